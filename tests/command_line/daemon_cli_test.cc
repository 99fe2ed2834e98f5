// xmod-coordinator, xmod-worker and xmod-data parse their command lines with CLI11 through
// common/command_line.h. Each case runs the real binary with arguments that stop it before it
// serves anything: --version and --help, a bad flag, or valid flags followed by a check of
// the binary's own that fails after the command line parsed (which shows the flags' forms
// were accepted).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/build_info.h"
#include "common/files.h"
#include "data/shard.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class DaemonCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("XMOD_BIN_DIR");
    ASSERT_NE(bin, nullptr) << "run through ctest (XMOD_BIN_DIR)";
    bin_ = bin;
    dir_ =
        (std::filesystem::path(::testing::TempDir()) / absl::StrCat("daemon_cli_test_", ::getpid()))
            .string();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs BIN_DIR/`binary` with `args` (each single-quoted for the shell).
  Outcome Start(const std::string& binary, const std::vector<std::string>& args) {
    std::vector<std::string> words = {"'" + bin_ + "/" + binary + "'"};
    for (const std::string& arg : args) words.push_back("'" + arg + "'");
    const std::string command =
        absl::StrCat(absl::StrJoin(words, " "), " </dev/null >'", dir_, "/out' 2>'", dir_, "/err'");
    const int status = std::system(command.c_str());
    Outcome run;
    if (status != -1 && WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
    run.out = ReadFile(dir_ + "/out").value_or("");
    run.err = ReadFile(dir_ + "/err").value_or("");
    return run;
  }

  std::string bin_;
  std::string dir_;
};

TEST_F(DaemonCliTest, VersionPrintsTheBuildAndExits0) {
  for (const char* binary : {"xmod-coordinator", "xmod-worker", "xmod-data"}) {
    const Outcome run = Start(binary, {"--version"});
    EXPECT_EQ(run.exit_code, 0) << binary << ": " << run.err;
    EXPECT_EQ(run.out, VersionLine(binary) + "\n");
  }
}

TEST_F(DaemonCliTest, HelpListsFlagsWithTheirDefaultsAndExits0) {
  const Outcome coordinator = Start("xmod-coordinator", {"--help"});
  EXPECT_EQ(coordinator.exit_code, 0);
  EXPECT_THAT(coordinator.out, HasSubstr("--lease_ttl_ms"));
  EXPECT_THAT(coordinator.out, HasSubstr("30000"));
  EXPECT_THAT(coordinator.out, HasSubstr("--check_data_paths"));
  EXPECT_THAT(coordinator.out, HasSubstr("--data_root"));
  const Outcome worker = Start("xmod-worker", {"--help"});
  EXPECT_EQ(worker.exit_code, 0);
  EXPECT_THAT(worker.out, HasSubstr("--stall_timeout_ms"));
  EXPECT_THAT(worker.out, HasSubstr("900000"));
  EXPECT_THAT(worker.out, HasSubstr("--drain_timeout_ms"));
  const Outcome data = Start("xmod-data", {"--help"});
  EXPECT_EQ(data.exit_code, 0);
  EXPECT_THAT(data.out, HasSubstr("gcide-task"));
  const Outcome encode = Start("xmod-data", {"encode", "--help"});
  EXPECT_EQ(encode.exit_code, 0);
  EXPECT_THAT(encode.out, HasSubstr("--out_prefix"));
}

TEST_F(DaemonCliTest, AnUnknownFlagExits2NamingIt) {
  for (const char* binary : {"xmod-coordinator", "xmod-worker"}) {
    const Outcome run = Start(binary, {"--no_such_flag=1"});
    EXPECT_EQ(run.exit_code, 2) << binary;
    EXPECT_THAT(run.err, HasSubstr("--no_such_flag")) << binary;
    EXPECT_THAT(run.err, HasSubstr(absl::StrCat(binary, ": "))) << binary;
  }
  const Outcome data = Start("xmod-data", {"gcide", "--out", dir_ + "/out.txt", "--no_such_flag"});
  EXPECT_EQ(data.exit_code, 2);
  EXPECT_THAT(data.err, HasSubstr("--no_such_flag"));
}

TEST_F(DaemonCliTest, AMalformedValueExits2NamingTheFlag) {
  const Outcome coordinator = Start("xmod-coordinator", {"--lease_ttl_ms=soon"});
  EXPECT_EQ(coordinator.exit_code, 2);
  EXPECT_THAT(coordinator.err, HasSubstr("--lease_ttl_ms"));
  const Outcome worker = Start("xmod-worker", {"--cpu_slots", "many"});
  EXPECT_EQ(worker.exit_code, 2);
  EXPECT_THAT(worker.err, HasSubstr("--cpu_slots"));
}

TEST_F(DaemonCliTest, CoordinatorAcceptsItsCallersFlagForms) {
  // As deploy/, tests/lib/cluster.sh and bench/load/run_bench.sh write them: --flag=value,
  // --flag value, an empty value, a boolean set false; the run then stops at its own check.
  const Outcome run = Start(
      "xmod-coordinator",
      {"--listen=127.0.0.1:0", "--http_listen=", "--metrics_listen=", "--db", dir_ + "/xmod.db",
       "--check_data_paths=false", "--insecure", "--data_root=/data/a,/data/b", "--data_root", dir_,
       "--lease_ttl_ms=100", "--heartbeat_interval_ms=200"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--lease_ttl_ms must exceed --heartbeat_interval_ms"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/xmod.db"));
  // A data root must be absolute.
  const Outcome relative =
      Start("xmod-coordinator", {"--db", dir_ + "/xmod.db", "--data_root=data"});
  EXPECT_EQ(relative.exit_code, 2);
  EXPECT_THAT(relative.err, HasSubstr("--data_root: \"data\" is not an absolute directory path"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/xmod.db"));
}

TEST_F(DaemonCliTest, WorkerAcceptsItsCallersFlagForms) {
  // As tests/integration/cluster.cc and deploy/local/cluster.sh write them; --train_env is a
  // comma-separated list that a repeated flag adds to, and a bad entry stops the worker.
  const Outcome run = Start(
      "xmod-worker", {"--coordinator=127.0.0.1:1", "--name", "w", "--gpus=false", "--nogpus",
                      "--cpu_slots=1", "--cores_per_slot", "1", "--work_dir=" + dir_ + "/work",
                      "--train_env", "A=1,B=2", "--train_env=NOT_AN_ENTRY"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--train_env: \"NOT_AN_ENTRY\" is not KEY=VALUE"));
  EXPECT_THAT(run.err, Not(HasSubstr("\"A=1\"")));
}

TEST_F(DaemonCliTest, DataRunsASubcommandWithItsPositionalAndFlags) {
  const std::string shard = dir_ + "/tokens.bin";
  ASSERT_TRUE(WriteShard(shard, std::vector<uint16_t>{5, 6, 7, 8}).ok());
  const Outcome run = Start("xmod-data", {"inspect", shard, "--show", "2"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("4 tokens"));
  EXPECT_THAT(run.out, HasSubstr("first 2: 5 6"));

  const Outcome missing = Start("xmod-data", {"encode", "--text", shard});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--tokenizer"));
  const Outcome none = Start("xmod-data", {});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("a command is needed"));
  const Outcome unknown = Start("xmod-data", {"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("frobnicate"));
}

}  // namespace
}  // namespace xmod
