// The real xmod-train binary under the worker contract: events on a pipe, SIGTERM ->
// checkpoint, its event, exit 75; a bad spec -> exit 1 with the field on stderr; a lapsed
// lease (--lease_deadline_ms) -> exit 7 and no checkpoint written after the deadline.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "common/files.h"
#include "data/shard.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "trainer_contract/event_stream.h"
#include "trainer_contract/exit_codes.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/trainer.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

class TrainProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("XMOD_BIN_DIR");
    ASSERT_NE(bin, nullptr) << "run through ctest (XMOD_BIN_DIR)";
    binary_ = std::string(bin) + "/xmod-train";
    dir_ = (std::filesystem::path(::testing::TempDir()) /
            ("train_process_test_" + std::to_string(::getpid())))
               .string();
    std::filesystem::create_directories(dir_);
    std::vector<uint16_t> tokens(4000);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = (i * 7) % 256;
    ASSERT_TRUE(WriteShard(dir_ + "/train.bin", tokens).ok());
    ASSERT_TRUE(WriteShard(dir_ + "/val.bin", tokens).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WriteSpec(double flop_budget, int checkpoint_every_steps = 0) {
    xmod::v1::RunSpec spec;
    spec.mutable_model()->set_arch(xmod::v1::DENSE);
    spec.mutable_model()->mutable_backbone()->set_name("tiny-test");
    spec.mutable_training()->set_flop_budget(flop_budget);
    spec.mutable_training()->set_seq_len(16);
    spec.mutable_training()->set_batch_tokens(32);
    spec.mutable_data()->set_train_glob(dir_ + "/train.bin");
    spec.mutable_data()->set_val_glob(dir_ + "/val.bin");
    spec.mutable_training()->set_checkpoint_every_steps(checkpoint_every_steps);
    spec.set_checkpoint_dir(dir_ + "/ckpt");
    std::string text;
    google::protobuf::TextFormat::PrintToString(spec, &text);
    const std::string path = dir_ + "/spec.textpb";
    EXPECT_TRUE(WriteFileAtomic(path, text).ok());
    return path;
  }

  // Starts xmod-train with events on a pipe (read end returned), stderr to a file and
  // `extra` flags.
  pid_t Start(const std::string& spec, int* events_read_fd,
              const std::vector<std::string>& extra = {}) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    std::vector<std::string> args = {
        binary_, "--spec",      spec, "--events_fd", std::to_string(fds[1]), "--threads",
        "1",     "--log_every", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      int err = ::open((dir_ + "/stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(err, 2);
      ::execv(binary_.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    *events_read_fd = fds[0];
    return pid;
  }

  // Starts xmod-train, drains its events and waits: its exit code (-1 unless it exited).
  int RunToExit(const std::string& spec, const std::vector<std::string>& extra = {}) {
    int events_fd;
    pid_t pid = Start(spec, &events_fd, extra);
    char buffer[256];
    while (::read(events_fd, buffer, sizeof(buffer)) > 0) {
    }
    ::close(events_fd);
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
  }

  std::string binary_;
  std::string dir_;
};

TEST_F(TrainProcessTest, SigtermWritesACheckpointAndExits75) {
  int events_fd;
  pid_t pid = Start(WriteSpec(1e18), &events_fd);  // far more steps than the test runs
  EventReader reader(events_fd);
  std::vector<xmod::v1::TrainerEvent> events;
  bool sent = false;
  xmod::v1::TrainerEvent event;
  while (reader.Next(&event).value_or(false)) {
    events.push_back(event);
    // Training is under way once a step's loss is out: ask it to stop.
    if (!sent && event.has_metric() && event.metric().name() == "train/loss") {
      ASSERT_EQ(::kill(pid, SIGTERM), 0);
      sent = true;
    }
  }
  ::close(events_fd);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), kExitPreempted) << *ReadFile(dir_ + "/stderr");
  ASSERT_GE(events.size(), 3u);
  EXPECT_TRUE(events.front().has_started());
  ASSERT_TRUE(events.back().has_checkpoint());
  const xmod::v1::TrainerCheckpoint& checkpoint = events.back().checkpoint();
  EXPECT_GE(checkpoint.step(), 1);
  EXPECT_EQ(*Sha256File(checkpoint.path()), checkpoint.sha256());
}

// Reads the whole event stream on `fd` (closing it) and reaps `pid`; its exit code.
int Drain(int fd, pid_t pid, std::vector<xmod::v1::TrainerEvent>* events) {
  EventReader reader(fd);
  xmod::v1::TrainerEvent event;
  while (reader.Next(&event).value_or(false)) events->push_back(event);
  ::close(fd);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int64_t MonotonicMillis() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// Checkpoint files (not temporaries) in `dir`.
std::vector<std::filesystem::path> CheckpointFiles(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  if (!std::filesystem::exists(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp.") == std::string::npos) files.push_back(entry.path());
  }
  return files;
}

TEST_F(TrainProcessTest, APassedLeaseDeadlineStopsTheTrainerBeforeAnything) {
  int events_fd;
  pid_t pid = Start(WriteSpec(1e18, /*checkpoint_every_steps=*/1), &events_fd,
                    {"--lease_deadline_ms", "1"});
  std::vector<xmod::v1::TrainerEvent> events;
  EXPECT_EQ(Drain(events_fd, pid, &events), 7) << *ReadFile(dir_ + "/stderr");
  EXPECT_THAT(*ReadFile(dir_ + "/stderr"), HasSubstr("lease lapsed"));
  for (const auto& e : events) EXPECT_FALSE(e.has_checkpoint());
  EXPECT_TRUE(CheckpointFiles(dir_ + "/ckpt").empty());
}

TEST_F(TrainProcessTest, ALeaseLapsingMidRunStopsTheTrainerWithoutWritingAfterIt) {
  // Checkpoints after every step of an endless run; the lease lapses a few seconds in and is
  // never extended (as when the worker is frozen).
  const int64_t deadline_ms = MonotonicMillis() + 4000;
  const auto wall_deadline =
      std::filesystem::file_time_type::clock::now() + std::chrono::milliseconds(4000);
  int events_fd;
  pid_t pid = Start(WriteSpec(1e18, /*checkpoint_every_steps=*/1), &events_fd,
                    {"--lease_deadline_ms", std::to_string(deadline_ms)});
  std::vector<xmod::v1::TrainerEvent> events;
  EXPECT_EQ(Drain(events_fd, pid, &events), 7) << *ReadFile(dir_ + "/stderr");
  EXPECT_GE(MonotonicMillis(), deadline_ms);
  for (const auto& e : events) EXPECT_FALSE(e.has_finished());
  // Whatever became a checkpoint did so before the deadline (a write cut short stays a
  // temporary file), give or take the watchdog thread's wake-up on a loaded machine: within
  // the margin by which the worker keeps a trainer's deadline ahead of the coordinator's
  // lease (at most 1 s, worker/agent.h), which is what fencing needs. The trainer deleted
  // none of them. Each reported checkpoint has its file and sidecar; the lapse may also have
  // come after a file but before its event.
  int written = 0;
  for (const auto& e : events) written += e.has_checkpoint() ? 1 : 0;
  const std::vector<std::filesystem::path> files = CheckpointFiles(dir_ + "/ckpt");
  EXPECT_GE(static_cast<int>(files.size()), 2 * written);
  EXPECT_LE(static_cast<int>(files.size()), 2 * written + 2);
  for (const auto& file : files) {
    EXPECT_LE(std::filesystem::last_write_time(file), wall_deadline + std::chrono::seconds(1))
        << file;
  }
}

TEST_F(TrainProcessTest, TooSmallBudgetFailsNamingTheField) {
  EXPECT_EQ(RunToExit(WriteSpec(1.0)), kExitInvalidConfig);
  EXPECT_THAT(*ReadFile(dir_ + "/stderr"),
              HasSubstr("training.flop_budget: 1 FLOPs is too small for one step of"));
}

TEST_F(TrainProcessTest, AnUnknownFlagExits2) {
  EXPECT_EQ(RunToExit(WriteSpec(1e9), {"--no_such_flag"}), kExitBadFlags);
  EXPECT_THAT(*ReadFile(dir_ + "/stderr"), HasSubstr("--no_such_flag"));
}

}  // namespace
}  // namespace xmod
