// RankGroup with real processes (the POSIX launcher): a failing rank kills the rank that
// would otherwise wait for it, and the group reports the failing rank; ranks that end
// normally are left alone.
#include "worker/rank_group.h"

#include <signal.h>
#include <stdlib.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

class RankGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/xmod_rank_group_XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { system(("rm -rf " + dir_).c_str()); }

  std::unique_ptr<ChildProcess> Shell(int rank, const std::string& script) {
    LaunchOptions options;
    options.argv = {"/bin/sh", "-c", script};
    options.log_path = dir_ + "/rank" + std::to_string(rank) + ".log";
    absl::StatusOr<std::unique_ptr<ChildProcess>> child = launcher_->Start(options);
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? *std::move(child) : nullptr;
  }

  std::string dir_;
  std::unique_ptr<ProcessLauncher> launcher_ = NewPosixLauncher();
};

TEST_F(RankGroupTest, AFailingRankKillsTheWaitingRank) {
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  ranks.push_back(Shell(0, "echo waiting for rank 1 >&2; exec sleep 600"));
  ranks.push_back(Shell(1, "echo rank 1 lost its data >&2; exit 3"));
  RankGroup group(std::move(ranks));
  const ExitStatus exit = group.Wait();  // returns only because rank 0 was killed
  EXPECT_EQ(exit.code, 3);
  EXPECT_EQ(exit.signal, 0);
  EXPECT_EQ(group.failed_rank(), 1);
  EXPECT_THAT(group.StderrTail(), HasSubstr("rank 1 of 2: rank 1 lost its data"));
  EXPECT_THAT(group.StderrTail(), ::testing::Not(HasSubstr("waiting for rank 1")));
  ASSERT_TRUE(group.Poll().has_value());
  EXPECT_EQ(group.Poll()->code, 3);
}

TEST_F(RankGroupTest, RanksEndingNormallyAreNotFailures) {
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  ranks.push_back(Shell(0, "echo rank 0 done >&2; exit 75"));
  ranks.push_back(Shell(1, "exit 75"));
  ranks.push_back(Shell(2, "exit 0"));
  RankGroup group(std::move(ranks));
  const ExitStatus exit = group.Wait();
  EXPECT_EQ(exit.code, 75);  // rank 0's
  EXPECT_FALSE(group.failed_rank().has_value());
  EXPECT_THAT(group.StderrTail(), HasSubstr("rank 0 done"));
}

TEST_F(RankGroupTest, SignalReachesEveryRank) {
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  ranks.push_back(Shell(0, "exec sleep 600"));
  ranks.push_back(Shell(1, "exec sleep 600"));
  RankGroup group(std::move(ranks));
  group.Signal(SIGTERM);
  const ExitStatus exit = group.Wait();
  EXPECT_EQ(exit.signal, SIGTERM);
}

}  // namespace
}  // namespace xmod
