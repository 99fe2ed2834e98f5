// One coordinator per database (coordinator/store/database_lock.h) with real xmod-coordinator
// processes: a second one started on the database of a live one refuses to start, exits
// non-zero and names the first (its pid); the first keeps serving. Once the first is
// SIGKILLed the kernel has released its lock, and a new coordinator starts on the database.
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster.h"
#include "worker/process_supervisor.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

// Starts another xmod-coordinator on `cluster`'s database and waits, with a deadline, for it
// to exit; nullopt when it is still running then (it is killed on return).
std::optional<ExitStatus> RunSecondCoordinator(const Cluster& cluster, const std::string& log) {
  LaunchOptions options;
  options.argv = {BinaryPath("xmod-coordinator", "XMOD_COORDINATOR_BIN"),
                  "--listen=127.0.0.1:0",
                  "--http_listen=127.0.0.1:0",
                  "--metrics_listen=127.0.0.1:0",
                  "--db=" + cluster.db_path(),
                  "--checkpoint_root=" + cluster.dir() + "/checkpoints"};
  options.log_path = log;
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = NewPosixLauncher()->Start(options);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return std::nullopt;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    if (std::optional<ExitStatus> exit = (*child)->Poll()) return exit;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return std::nullopt;
}

TEST(CoordinatorLockTest, ASecondCoordinatorOnTheSameDatabaseRefusesToStart) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartCoordinator({}).ok()) << cluster.Logs();
  const int first = cluster.coordinator_pid();
  const std::string log = cluster.dir() + "/second.log";
  std::optional<ExitStatus> exit = RunSecondCoordinator(cluster, log);
  ASSERT_TRUE(exit.has_value()) << "the second coordinator kept running";
  EXPECT_NE(exit->AsExitCode(), 0);
  const std::string text = ReadFile(log).value_or("");
  EXPECT_THAT(text,
              HasSubstr(absl::StrCat("holds ", cluster.db_path(), ".lock (pid ", first, ", host ")))
      << text;
  EXPECT_THAT(text, HasSubstr("one coordinator per database")) << text;
  // The first still serves.
  EXPECT_TRUE(cluster.Query("SELECT COUNT(*) FROM runs").ok());

  // SIGKILL releases the lock with the process: a new coordinator starts and records itself.
  cluster.KillCoordinator();
  ASSERT_TRUE(cluster.StartCoordinator({}).ok()) << cluster.Logs();
  EXPECT_THAT(ReadFile(cluster.db_path() + ".lock").value_or(""),
              HasSubstr(absl::StrCat("pid ", cluster.coordinator_pid(), ", host ")));
  EXPECT_TRUE(cluster.Query("SELECT COUNT(*) FROM runs").ok());
  cluster.Stop();
}

}  // namespace
}  // namespace xmod
