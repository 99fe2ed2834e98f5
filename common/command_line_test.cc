// Tests of the shared command-line conventions: --version, --help and one-line parse errors.
#include "common/command_line.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "common/build_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

class CommandLineTest : public ::testing::Test {
 protected:
  CommandLineTest() {
    AddVersionFlag(app_, "xmod-test", "extra 1");
    app_.add_option("--listen", listen_, "where to listen");
    app_.add_option("--other", other_, "another flag");
  }

  std::optional<int> Parse(std::vector<const char*> args) {
    args.insert(args.begin(), "/some/path/xmod-test");
    return ParseCommandLine(app_, static_cast<int>(args.size()), args.data(), 7, out_, err_);
  }

  CLI::App app_;
  std::string listen_ = "default";
  std::string other_ = "default";
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(CommandLineTest, AGoodCommandLineGoesOn) {
  EXPECT_EQ(Parse({"--listen=1.2.3.4:5"}), std::nullopt);
  EXPECT_EQ(listen_, "1.2.3.4:5");
  EXPECT_EQ(err_.str(), "");
}

TEST_F(CommandLineTest, AnEmptyAssignmentIsAnEmptyValueNotTheNextFlag) {
  EXPECT_EQ(Parse({"--listen=", "--other=x"}), std::nullopt) << err_.str();
  EXPECT_EQ(listen_, "");
  EXPECT_EQ(other_, "x");
  EXPECT_EQ(Parse({"--other="}), std::nullopt) << err_.str();
  EXPECT_EQ(other_, "");
}

TEST_F(CommandLineTest, AfterADoubleDashNothingIsSplit) {
  EXPECT_EQ(ReversedForCli11({"--a=", "--", "--b="}),
            (std::vector<std::string>{"--b=", "--", "", "--a"}));
}

TEST_F(CommandLineTest, VersionPrintsTheVersionLineAndExits0) {
  EXPECT_EQ(Parse({"--version"}), 0);
  EXPECT_EQ(out_.str(), VersionLine("xmod-test", "extra 1") + "\n");
}

TEST_F(CommandLineTest, HelpListsTheFlagsAndExits0) {
  EXPECT_EQ(Parse({"--help"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("--listen"));
  EXPECT_THAT(out_.str(), HasSubstr("where to listen"));
}

TEST_F(CommandLineTest, AnUnknownFlagIsNamedOnOneLine) {
  EXPECT_EQ(Parse({"--no_such_flag=1"}), 7);
  const std::string err = err_.str();
  EXPECT_THAT(err, HasSubstr("--no_such_flag"));
  EXPECT_THAT(err, ::testing::StartsWith("xmod-test: "));
  EXPECT_THAT(err, ::testing::EndsWith("(see xmod-test --help)\n"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST_F(CommandLineTest, AMissingValueIsNamed) {
  EXPECT_EQ(Parse({"--listen"}), 7);
  EXPECT_THAT(err_.str(), HasSubstr("--listen"));
}

}  // namespace
}  // namespace xmod
