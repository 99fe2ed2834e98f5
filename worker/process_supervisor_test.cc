#include "worker/process_supervisor.h"

#include <signal.h>
#include <stdlib.h>

#include <string>

#include "common/files.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/delimited_message_util.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

class PosixLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/xmod_supervisor_XXXXXX";
    dir_ = mkdtemp(tmpl);
    v1::RunSpec spec;
    spec.set_run_id(42);
    spec.set_checkpoint_dir(dir_ + "/ckpt");
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/spec.pb", spec.SerializeAsString()).ok());
  }
  void TearDown() override { system(("rm -rf " + dir_).c_str()); }

  LaunchOptions Shell(const std::string& script) {
    LaunchOptions options;
    options.argv = {"/bin/sh", "-c", script};
    options.log_path = dir_ + "/log.txt";
    return options;
  }
  LaunchOptions FakeTrain(const std::string& mode) {
    LaunchOptions options;
    options.argv = {XMOD_FAKE_TRAIN, "--spec", dir_ + "/spec.pb", "--events_fd", "3"};
    options.env = {{"FAKE_TRAIN_MODE", mode}, {"OMP_NUM_THREADS", "2"}};
    options.log_path = dir_ + "/log.txt";
    return options;
  }

  std::string dir_;
  std::unique_ptr<ProcessLauncher> launcher_ = NewPosixLauncher();
};

TEST_F(PosixLauncherTest, ReadsTheEventStreamAndTheExitCode) {
  auto child = launcher_->Start(FakeTrain("ok"));
  ASSERT_TRUE(child.ok()) << child.status();
  std::vector<v1::TrainerEvent> events;
  v1::TrainerEvent event;
  while (true) {
    auto more = (*child)->ReadEvent(&event);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    events.push_back(event);
  }
  ExitStatus exit = (*child)->Wait();
  EXPECT_TRUE(exit.success()) << exit.ToString();
  ASSERT_EQ(events.size(), 8u);  // started, 5 metrics, checkpoint, finished
  EXPECT_TRUE(events.front().has_started());
  EXPECT_EQ(events[1].metric().name(), "train/loss");
  EXPECT_EQ(events[5].metric().step(), 5);
  EXPECT_EQ(events[6].checkpoint().path(), dir_ + "/ckpt/step-5.pt");
  EXPECT_TRUE(events.back().has_finished());
  // stdout went to the log with the environment the launcher set.
  auto log = ReadFile(dir_ + "/log.txt");
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("OMP_NUM_THREADS=2"), std::string::npos) << *log;
  EXPECT_EQ((*child)->Poll()->code, 0);
}

TEST_F(PosixLauncherTest, KeepsTheStderrTailOfAFailedChild) {
  auto child = launcher_->Start(FakeTrain("fail"));
  ASSERT_TRUE(child.ok());
  ExitStatus exit = (*child)->Wait();
  EXPECT_EQ(exit.code, 3);
  EXPECT_EQ(exit.AsExitCode(), 3);
  EXPECT_NE((*child)->StderrTail().find("fake_train: boom"), std::string::npos);
  auto log = ReadFile(dir_ + "/log.txt");
  EXPECT_NE(log->find("fake_train: boom"), std::string::npos);  // also in the log
}

TEST_F(PosixLauncherTest, StderrTailIsBounded) {
  auto child = launcher_->Start(
      Shell("i=0; while [ $i -lt 2000 ]; do echo line-$i >&2; i=$((i+1)); done; echo last >&2; "
            "exit 1"));
  ASSERT_TRUE(child.ok());
  EXPECT_EQ((*child)->Wait().code, 1);
  std::string tail = (*child)->StderrTail();
  EXPECT_LE(tail.size(), kStderrTailBytes);
  EXPECT_GT(tail.size(), kStderrTailBytes / 2);
  EXPECT_EQ(tail.substr(tail.size() - 5), "last\n");
}

TEST_F(PosixLauncherTest, SigtermLetsTheTrainerCheckpointAndExit75) {
  auto child = launcher_->Start(FakeTrain("term"));
  ASSERT_TRUE(child.ok());
  v1::TrainerEvent event;
  ASSERT_TRUE(*(*child)->ReadEvent(&event));
  ASSERT_TRUE(event.has_started());  // the handler is installed before this event
  EXPECT_FALSE((*child)->Poll().has_value());
  (*child)->Signal(SIGTERM);
  ASSERT_TRUE(*(*child)->ReadEvent(&event));
  EXPECT_TRUE(event.has_checkpoint());
  EXPECT_FALSE(*(*child)->ReadEvent(&event));
  EXPECT_EQ((*child)->Wait().code, 75);
}

TEST_F(PosixLauncherTest, SigkillReachesTheWholeProcessGroup) {
  // The shell's own child (sleep) holds the event pipe open; only a group kill ends it.
  LaunchOptions options = Shell("sleep 1000 & wait");
  auto child = launcher_->Start(options);
  ASSERT_TRUE(child.ok());
  (*child)->Signal(SIGKILL);
  ExitStatus exit = (*child)->Wait();
  EXPECT_EQ(exit.signal, SIGKILL);
  EXPECT_EQ(exit.AsExitCode(), 128 + SIGKILL);
  v1::TrainerEvent event;
  auto more = (*child)->ReadEvent(&event);  // EOF: nobody holds the pipe any more
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(*more);
  (*child)->Signal(SIGKILL);  // after exit: no effect
}

TEST_F(PosixLauncherTest, GarbageOnTheEventPipeIsDataLoss) {
  auto child = launcher_->Start(Shell("printf '\\005ab' >&3"));
  ASSERT_TRUE(child.ok());
  v1::TrainerEvent event;
  auto more = (*child)->ReadEvent(&event);
  EXPECT_EQ(more.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE((*child)->Wait().success());
}

TEST_F(PosixLauncherTest, LeaseExtensionsReachTheChildOnItsControlDescriptor) {
  // The child copies one packet from its control descriptor (4) into a file.
  LaunchOptions options = Shell("dd bs=256 count=1 <&4 > " + dir_ + "/control 2>/dev/null");
  options.control_fd = 4;
  auto child = launcher_->Start(options);
  ASSERT_TRUE(child.ok()) << child.status();
  (*child)->ExtendLease(123456789);
  EXPECT_TRUE((*child)->Wait().success());
  (*child)->ExtendLease(5);  // after the exit: nothing, and no SIGPIPE
  absl::StatusOr<std::string> bytes = ReadFile(dir_ + "/control");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  google::protobuf::io::ArrayInputStream stream(bytes->data(), static_cast<int>(bytes->size()));
  v1::TrainerControl control;
  bool eof = false;
  ASSERT_TRUE(google::protobuf::util::ParseDelimitedFromZeroCopyStream(&control, &stream, &eof));
  EXPECT_EQ(control.lease_deadline_ms(), 123456789);
  // A control descriptor must not collide with the event pipe.
  options.control_fd = 3;
  EXPECT_EQ(launcher_->Start(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PosixLauncherTest, AMissingProgramExits127WithTheReason) {
  LaunchOptions options;
  options.argv = {dir_ + "/no-such-trainer"};
  options.log_path = dir_ + "/log.txt";
  auto child = launcher_->Start(options);
  ASSERT_TRUE(child.ok());
  EXPECT_EQ((*child)->Wait().code, 127);
  EXPECT_NE((*child)->StderrTail().find("cannot execute"), std::string::npos);
}

TEST_F(PosixLauncherTest, RejectsBadOptions) {
  LaunchOptions options;
  EXPECT_EQ(launcher_->Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Shell("true");
  options.events_fd = 2;
  EXPECT_EQ(launcher_->Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Shell("true");
  options.log_path = dir_ + "/missing/dir/log.txt";
  EXPECT_FALSE(launcher_->Start(options).ok());
}

}  // namespace
}  // namespace xmod
