// Tests of the trainer's command line: what the worker writes, the trainer parses back.
#include "trainer_contract/trainer_args.h"

#include <sstream>
#include <string>
#include <vector>

#include "common/build_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer_contract/exit_codes.h"

namespace xmod {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Parses `args` (after argv[0]) as xmod-train would.
class TrainerArgsTest : public ::testing::Test {
 protected:
  ParsedTrainerArgs Parse(const std::vector<std::string>& args) {
    std::vector<const char*> argv = {"/opt/xmod/xmod-train"};
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    return TrainerArgs::Parse(static_cast<int>(argv.size()), argv.data(), "xmod-train",
                              "LibTorch 9.9", out_, err_);
  }

  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(TrainerArgsTest, TheWorkersCommandLineIsPairsInTheDocumentedOrder) {
  TrainerArgs args;
  args.spec = "/w/run-4-a2/spec.pb";
  args.events_fd = 3;
  args.threads = 2;
  args.lease_deadline_ms = 123456;
  args.lease_fd = 4;
  args.resume = {"/c/ckpt-a1-s0000000020.pt", "/c/ckpt-a1-s0000000010.pt"};
  args.resume_sha256 = {"aa", "bb"};
  args.rank = 1;
  args.world_size = 2;
  args.rendezvous = "/w/run-4-a2/rdzv";
  args.device = "cuda:0";
  args.backend = "nccl";
  EXPECT_THAT(args.ToArgv(),
              ElementsAre("--spec", "/w/run-4-a2/spec.pb", "--events_fd", "3", "--threads", "2",
                          "--lease_deadline_ms", "123456", "--lease_fd", "4", "--resume",
                          "/c/ckpt-a1-s0000000020.pt", "--resume_sha256", "aa", "--resume",
                          "/c/ckpt-a1-s0000000010.pt", "--resume_sha256", "bb", "--rank", "1",
                          "--world_size", "2", "--rendezvous", "/w/run-4-a2/rdzv", "--device",
                          "cuda:0", "--backend", "nccl"));
}

TEST_F(TrainerArgsTest, DefaultsBeyondTheFirstFiveFlagsAreLeftOut) {
  TrainerArgs args;
  args.spec = "s.pb";
  EXPECT_THAT(args.ToArgv(), ElementsAre("--spec", "s.pb", "--events_fd", "-1", "--threads", "0",
                                         "--lease_deadline_ms", "0", "--lease_fd", "-1"));
  // Rank 0 of several ranks names all three distributed flags.
  args.world_size = 2;
  args.rendezvous = "r";
  EXPECT_THAT(args.ToArgv(),
              ::testing::IsSupersetOf({"--rank", "0", "--world_size", "2", "--rendezvous"}));
}

TEST_F(TrainerArgsTest, ToArgvThenParseGivesTheSameArguments) {
  TrainerArgs defaults;
  defaults.spec = "spec.textpb";
  TrainerArgs every;
  every.spec = "/a b/spec.json";  // a space survives: each value is its own word
  every.events_fd = -1;
  every.threads = 7;
  every.lease_deadline_ms = 9'000'000'000;
  every.lease_fd = 5;
  every.resume = {"/c/new.pt", "/c/old.pt"};
  every.resume_sha256 = {"ab12", "cd34"};
  every.resume_bytes = {123, 456};
  every.rank = 3;
  every.world_size = 4;
  every.rendezvous = "tcp://host:29500";
  every.device = "cuda:1";
  every.backend = "nccl";
  every.log_every = 10;
  every.micro_batch_tokens = 4096;
  every.dist_host = "10.0.0.2";
  every.dist_timeout_s = 60;
  TrainerArgs resume_without_digests = defaults;
  resume_without_digests.resume = {"/c/only.pt"};
  for (const TrainerArgs& args : {defaults, every, resume_without_digests}) {
    ParsedTrainerArgs parsed = Parse(args.ToArgv());
    ASSERT_TRUE(parsed.args.has_value()) << err_.str();
    EXPECT_TRUE(*parsed.args == args) << ::testing::PrintToString(args.ToArgv());
  }
  EXPECT_FALSE(every == defaults);
}

TEST_F(TrainerArgsTest, TheEqualsFormParsesToo) {
  ParsedTrainerArgs parsed = Parse({"--spec=s.pb", "--events_fd=3", "--threads=4"});
  ASSERT_TRUE(parsed.args.has_value()) << err_.str();
  EXPECT_EQ(parsed.args->spec, "s.pb");
  EXPECT_EQ(parsed.args->events_fd, 3);
  EXPECT_EQ(parsed.args->threads, 4);
}

TEST_F(TrainerArgsTest, AnUnknownFlagIsBadFlagsNamingIt) {
  ParsedTrainerArgs parsed = Parse({"--spec", "s.pb", "--no_such_flag", "1"});
  EXPECT_FALSE(parsed.args.has_value());
  EXPECT_EQ(parsed.exit_code, kExitBadFlags);
  EXPECT_THAT(err_.str(), HasSubstr("--no_such_flag"));
  EXPECT_THAT(err_.str(), ::testing::StartsWith("xmod-train: "));
}

TEST_F(TrainerArgsTest, AMalformedValueIsBadFlagsNamingTheFlag) {
  ParsedTrainerArgs parsed = Parse({"--spec", "s.pb", "--threads", "many"});
  EXPECT_FALSE(parsed.args.has_value());
  EXPECT_EQ(parsed.exit_code, kExitBadFlags);
  EXPECT_THAT(err_.str(), HasSubstr("--threads"));
}

TEST_F(TrainerArgsTest, AMissingSpecIsBadFlags) {
  ParsedTrainerArgs parsed = Parse({"--events_fd", "3"});
  EXPECT_EQ(parsed.exit_code, kExitBadFlags);
  EXPECT_THAT(err_.str(), HasSubstr("--spec"));
}

TEST_F(TrainerArgsTest, DigestsMustMatchTheResumeCandidates) {
  ParsedTrainerArgs parsed =
      Parse({"--spec", "s.pb", "--resume", "a.pt", "--resume", "b.pt", "--resume_sha256", "aa"});
  EXPECT_FALSE(parsed.args.has_value());
  EXPECT_EQ(parsed.exit_code, kExitBadFlags);
  EXPECT_THAT(err_.str(), HasSubstr("--resume_sha256 given 1 times for 2 --resume"));
}

TEST_F(TrainerArgsTest, SizesMustMatchTheResumeCandidates) {
  ParsedTrainerArgs parsed =
      Parse({"--spec", "s.pb", "--resume", "a.pt", "--resume", "b.pt", "--resume_bytes", "7"});
  EXPECT_FALSE(parsed.args.has_value());
  EXPECT_THAT(err_.str(), HasSubstr("--resume_bytes given 1 times for 2 --resume"));
}

TEST_F(TrainerArgsTest, HelpAndVersionExit0) {
  ParsedTrainerArgs help = Parse({"--help"});
  EXPECT_FALSE(help.args.has_value());
  EXPECT_EQ(help.exit_code, kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("--lease_deadline_ms"));
  out_.str("");
  ParsedTrainerArgs version = Parse({"--version"});
  EXPECT_EQ(version.exit_code, kExitOk);
  EXPECT_EQ(out_.str(), VersionLine("xmod-train", "LibTorch 9.9") + "\n");
}

}  // namespace
}  // namespace xmod
