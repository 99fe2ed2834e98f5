// Tests of `xmodctl plan` (offline accounting): the JSON keys and the paper's Table 6 values
// for 556M X-MoD A4K8 at L = 32768, and flag-named errors for bad parameters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "cli/app.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod::cli {
namespace {

using ::testing::HasSubstr;

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result Xmodctl(std::vector<std::string> args) {
  args.insert(args.begin(), "xmodctl");
  std::ostringstream out, err;
  int code = RunXmodctl(args, Io{&out, &err, false});
  return {code, out.str(), err.str()};
}

TEST(PlanCommandTest, JsonHasTheKeysAndTable6Values) {
  Result r = Xmodctl({"plan", "--backbone", "556M", "--arch", "xmod", "--K", "8", "--A", "4",
                      "--n0", "4", "--L", "32768", "--output", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  google::protobuf::Struct json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &json).ok()) << r.out;
  const auto& f = json.fields();
  for (const char* key : {"layers", "layer_plan", "total_params", "active_params",
                          "forward_flops_per_token", "train_flops_per_token"}) {
    EXPECT_TRUE(f.contains(key)) << key;
  }
  EXPECT_EQ(f.at("layers").number_value(), 161);
  EXPECT_EQ(f.at("layer_plan").string_value(), "[D]x4 + ([S8]x24+[D]) + ([S8]x32+[D])x4");
  // Paper Table 6: 2.635B parameters, 3.93e9 forward FLOPs per token (within 1%).
  EXPECT_NEAR(f.at("total_params").number_value(), 2.635e9, 0.01 * 2.635e9);
  EXPECT_NEAR(f.at("forward_flops_per_token").number_value(), 3.93e9, 0.01 * 3.93e9);
  EXPECT_DOUBLE_EQ(f.at("train_flops_per_token").number_value(),
                   3 * f.at("forward_flops_per_token").number_value());
  // The Plan RPC's PlanResponse, with the offline extras and defaults printed.
  xmod::v1::PlanResponse plan;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &plan).ok());
  EXPECT_NEAR(plan.phi_over_phi_dense(), 0.4685, 5e-5);
  EXPECT_EQ(plan.backbone().name(), "556M");
  EXPECT_TRUE(f.contains("n0"));  // defaults print
}

TEST(PlanCommandTest, TableShowsFormattedFigures) {
  Result r = Xmodctl(
      {"plan", "--backbone", "556M", "--arch", "xmod", "--K", "8", "--A", "4", "--L", "32768"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("total_params             2.64B"));
  EXPECT_THAT(r.out, HasSubstr("forward_flops_per_token  3.93e9"));
  EXPECT_THAT(r.out, HasSubstr("layers                   161"));
}

TEST(PlanCommandTest, MoeNeedsExperts) {
  Result r =
      Xmodctl({"plan", "--arch", "moe", "--experts", "6:64+2", "--expert_dim", "384", "-o", "csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("experts,6:64+2\n"));
  r = Xmodctl({"plan", "--arch", "moe"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--experts"));
}

TEST(PlanCommandTest, BadParametersNameTheFlagAndExit2) {
  struct Case {
    std::vector<std::string> args;
    const char* flag;
  };
  for (const Case& c :
       {Case{{"--K", "0"}, "--K"}, Case{{"--A", "0.3"}, "--A"},
        Case{{"--backbone", "7B"}, "--backbone"}, Case{{"--arch", "lstm"}, "--arch"},
        Case{{"--L", "2", "--K", "8"}, "--K"}, Case{{"--n0", "99"}, "--n0"},
        Case{{"--arch", "moe", "--experts", "9:8+1"}, "--experts"},
        Case{{"--K", "eight"}, "--K"}}) {
    std::vector<std::string> args = {"plan"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Result r = Xmodctl(args);
    EXPECT_EQ(r.code, 2) << c.flag;
    EXPECT_THAT(r.err, HasSubstr(c.flag));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace xmod::cli
