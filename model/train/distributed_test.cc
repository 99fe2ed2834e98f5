// Data-parallel xmod-train: two ranks of the real binary, Gloo over loopback with a FileStore
// in a temp dir, against one process with the same global batch. The losses agree to float
// summation order, both ranks end with bit-identical parameters, only rank 0 writes events
// and checkpoints, a stop on one rank stops both, both resume from rank 0's checkpoint, and a
// world size that does not divide the step's windows is refused naming the field.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/files.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "model/accounting/accounting.h"
#include "model/train/test_corpus.h"
#include "trainer_contract/event_stream.h"
#include "trainer_contract/exit_codes.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/trainer.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

constexpr int kVocab = 256;  // the tiny-test backbone's vocabulary
constexpr int kSeqLen = 16;
// Far above a rank's few seconds here; above --dist_timeout_s so a failed rendezvous exits.
constexpr std::chrono::seconds kProcessDeadline(90);

struct Finished {
  int exit_code = -1;
  std::string stderr_text;
  std::vector<xmod::v1::TrainerEvent> events;
};

class DistributedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("XMOD_BIN_DIR");
    ASSERT_NE(bin, nullptr) << "run through ctest (XMOD_BIN_DIR)";
    binary_ = std::string(bin) + "/xmod-train";
    dir_ = MakeTestDir("distributed_test");
    ASSERT_TRUE(WriteLearnableShards(dir_, {"train_0.bin", "train_1.bin", "val_0.bin"},
                                     /*tokens=*/2000, kVocab, /*seed=*/3)
                    .ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A spec of `steps` steps of `batch_tokens`, checkpoints into dir_/<ckpt>.
  std::string WriteSpec(const std::string& name, xmod::v1::Architecture arch, int steps,
                        int batch_tokens, const std::string& ckpt) {
    xmod::v1::RunSpec spec;
    spec.mutable_model()->set_arch(arch);
    spec.mutable_model()->mutable_backbone()->set_name("tiny-test");
    if (arch == xmod::v1::MOE) {  // 2 of 4 routed experts + 1 shared
      xmod::v1::MoESpec* moe = spec.mutable_model()->mutable_moe();
      moe->set_active_experts(2);
      moe->set_total_experts(4);
      moe->set_shared_experts(1);
      moe->set_expert_dim(32);
    }
    xmod::v1::TrainingSpec* t = spec.mutable_training();
    t->set_seq_len(kSeqLen);
    t->set_batch_tokens(batch_tokens);
    // fp32: the ranks' sums then match one process's to rounding; under bf16 ("auto" on a CPU
    // with native bf16) each rank's smaller products round differently.
    t->set_precision("fp32");
    absl::StatusOr<Accounting> accounting = Account(spec.model(), kSeqLen);
    EXPECT_TRUE(accounting.ok()) << accounting.status();
    t->set_flop_budget((steps + 0.5) * accounting->train_flops_per_token * batch_tokens);
    t->set_lr(0.02);
    t->set_adamw_lr(0.01);
    t->set_eval_marks(2);
    t->set_eval_tokens(4 * kSeqLen);
    t->set_seed(9);
    spec.mutable_data()->set_train_glob(dir_ + "/train_*.bin");
    spec.mutable_data()->set_val_glob(dir_ + "/val_*.bin");
    spec.set_checkpoint_dir(dir_ + "/" + ckpt);
    std::string text;
    google::protobuf::TextFormat::PrintToString(spec, &text);
    const std::string path = dir_ + "/" + name + ".textpb";
    EXPECT_TRUE(WriteFileAtomic(path, text).ok());
    return path;
  }

  // Starts xmod-train with `args`, events to dir_/<tag>.events, stderr to dir_/<tag>.stderr.
  pid_t Start(const std::string& tag, std::vector<std::string> args) {
    const std::string events = dir_ + "/" + tag + ".events";
    const std::string err = dir_ + "/" + tag + ".stderr";
    pid_t pid = ::fork();
    if (pid == 0) {
      int events_fd = ::open(events.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(err_fd, 2);
      args.insert(args.begin(), binary_);
      args.insert(args.end(),
                  {"--events_fd", std::to_string(events_fd), "--threads", "1", "--log_every", "1",
                   "--dist_timeout_s", "60", "--dist_host", "127.0.0.1"});
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(binary_.c_str(), argv.data());
      ::_exit(127);
    }
    return pid;
  }

  // Waits for `pid` to exit; past kProcessDeadline it is killed and the test fails with its
  // stderr, so a hung rendezvous reports itself rather than running into ctest's timeout.
  Finished Wait(const std::string& tag, pid_t pid) {
    Finished f;
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + kProcessDeadline;
    pid_t waited = 0;
    while ((waited = ::waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    f.stderr_text = ReadFile(dir_ + "/" + tag + ".stderr").value_or("");
    if (waited == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << tag << " still running after " << kProcessDeadline.count()
                    << " s; killed. stderr:\n"
                    << f.stderr_text;
      return f;
    }
    EXPECT_EQ(waited, pid);
    f.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    absl::StatusOr<std::vector<xmod::v1::TrainerEvent>> events =
        ParseEvents(ReadFile(dir_ + "/" + tag + ".events").value_or(""));
    EXPECT_TRUE(events.ok()) << events.status();
    if (events.ok()) f.events = *std::move(events);
    return f;
  }

  // Runs one process (world size 1) to completion.
  Finished RunSingle(const std::string& tag, const std::string& spec,
                     std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--spec", spec};
    args.insert(args.end(), extra.begin(), extra.end());
    return Wait(tag, Start(tag, args));
  }

  // Runs ranks 0 and 1 concurrently to completion; `extra[r]` are rank r's extra flags.
  std::vector<Finished> RunTwoRanks(const std::string& tag, const std::string& spec,
                                    std::vector<std::vector<std::string>> extra = {{}, {}}) {
    const std::string rendezvous = dir_ + "/" + tag + ".rendezvous";
    std::vector<pid_t> pids;
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<std::string> args = {"--spec",       spec, "--rank",       std::to_string(rank),
                                       "--world_size", "2",  "--rendezvous", rendezvous};
      args.insert(args.end(), extra[rank].begin(), extra[rank].end());
      pids.push_back(Start(tag + "_rank" + std::to_string(rank), args));
    }
    std::vector<Finished> finished;
    for (int rank = 0; rank < 2; ++rank) {
      finished.push_back(Wait(tag + "_rank" + std::to_string(rank), pids[rank]));
    }
    return finished;
  }

  static std::vector<xmod::v1::MetricPoint> Points(
      const std::vector<xmod::v1::TrainerEvent>& events, const std::string& name) {
    std::vector<xmod::v1::MetricPoint> points;
    for (const auto& e : events) {
      if (e.has_metric() && e.metric().name() == name) points.push_back(e.metric());
    }
    return points;
  }

  // The "parameters sha256 <hex>" a rank printed on its last line.
  static std::string ParametersSha256(const std::string& stderr_text) {
    const std::string key = "parameters sha256 ";
    const size_t at = stderr_text.rfind(key);
    return at == std::string::npos ? "" : stderr_text.substr(at + key.size(), 64);
  }

  // Expects equal step/tokens/FLOPs and values within `rel` (relative) for metric `name`.
  static void ExpectSameSeries(const std::vector<xmod::v1::TrainerEvent>& got,
                               const std::vector<xmod::v1::TrainerEvent>& want,
                               const std::string& name, double rel) {
    std::vector<xmod::v1::MetricPoint> g = Points(got, name), w = Points(want, name);
    ASSERT_EQ(g.size(), w.size()) << name;
    ASSERT_FALSE(w.empty()) << name;
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_EQ(g[i].step(), w[i].step()) << name;
      EXPECT_EQ(g[i].tokens(), w[i].tokens()) << name;
      EXPECT_EQ(g[i].flops(), w[i].flops()) << name;
      EXPECT_NEAR(g[i].value(), w[i].value(), rel * std::abs(w[i].value()) + 1e-12)
          << name << " at step " << w[i].step();
    }
  }

  std::string binary_;
  std::string dir_;
};

TEST_F(DistributedTest, TwoRanksTrainLikeOneProcessWithTheSameGlobalBatch) {
  // 4 windows a step: rank 0 takes windows 0-1, rank 1 windows 2-3.
  const std::string spec = WriteSpec("dense", xmod::v1::DENSE, 6, 4 * kSeqLen, "ckpt");
  Finished single = RunSingle("single", spec);
  ASSERT_EQ(single.exit_code, 0) << single.stderr_text;
  // The same spec file: the ranks' checkpoints go to the same directory, so move the single
  // process's out of the way first.
  std::filesystem::rename(dir_ + "/ckpt", dir_ + "/single_ckpt");
  std::vector<Finished> ranks = RunTwoRanks("dp", spec);
  ASSERT_EQ(ranks[0].exit_code, 0) << ranks[0].stderr_text;
  ASSERT_EQ(ranks[1].exit_code, 0) << ranks[1].stderr_text;

  // Rank 0 speaks for the run; rank 1 writes no events.
  const std::vector<xmod::v1::TrainerEvent>& events = ranks[0].events;
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.front().has_started());
  ASSERT_TRUE(events.back().has_finished());
  EXPECT_EQ(events.back().finished().steps(), 6);
  EXPECT_TRUE(ranks[1].events.empty());

  // Global means: the one-process losses up to summation order; the same tokens and FLOPs.
  ExpectSameSeries(events, single.events, "train/loss", 1e-5);
  ExpectSameSeries(events, single.events, "train/lr", 0);
  ExpectSameSeries(events, single.events, "val/loss", 1e-5);

  // Both ranks end bit-identical.
  const std::string sha0 = ParametersSha256(ranks[0].stderr_text);
  EXPECT_EQ(sha0.size(), 64u) << ranks[0].stderr_text;
  EXPECT_EQ(sha0, ParametersSha256(ranks[1].stderr_text));

  // Checkpoints as in one process, written once (by rank 0).
  int checkpoints = 0;
  for (const auto& e : events) {
    if (!e.has_checkpoint()) continue;
    ++checkpoints;
    EXPECT_TRUE(std::filesystem::exists(e.checkpoint().path()));
  }
  EXPECT_EQ(checkpoints, 2);  // at the two evaluation marks
}

TEST_F(DistributedTest, MoeRanksMatchOneProcessWithTheRanksMicroBatches) {
  // The MoE balance loss is per forward, so one process matches with micro-batches of a
  // rank's share; the expert loads of the aux-loss-free bias update are summed over ranks.
  const std::string spec = WriteSpec("moe", xmod::v1::MOE, 4, 4 * kSeqLen, "ckpt");
  Finished single = RunSingle("single", spec, {"--micro_batch_tokens", "32"});
  ASSERT_EQ(single.exit_code, 0) << single.stderr_text;
  std::filesystem::remove_all(dir_ + "/ckpt");
  std::vector<Finished> ranks = RunTwoRanks("dp", spec);
  ASSERT_EQ(ranks[0].exit_code, 0) << ranks[0].stderr_text;
  ASSERT_EQ(ranks[1].exit_code, 0) << ranks[1].stderr_text;
  ExpectSameSeries(ranks[0].events, single.events, "train/loss", 1e-5);
  ExpectSameSeries(ranks[0].events, single.events, "train/aux_loss", 1e-5);
  ExpectSameSeries(ranks[0].events, single.events, "val/loss", 1e-5);
  EXPECT_EQ(ParametersSha256(ranks[0].stderr_text), ParametersSha256(ranks[1].stderr_text));
}

TEST_F(DistributedTest, BothRanksResumeFromRankZerosCheckpoint) {
  const std::string spec = WriteSpec("dense", xmod::v1::DENSE, 6, 4 * kSeqLen, "ckpt");
  std::vector<Finished> whole = RunTwoRanks("whole", spec);
  ASSERT_EQ(whole[0].exit_code, 0) << whole[0].stderr_text;
  ASSERT_EQ(whole[1].exit_code, 0) << whole[1].stderr_text;
  // The first evaluation mark's checkpoint (step 3), kept aside from the run's directory.
  std::string mark;
  for (const auto& e : whole[0].events) {
    if (e.has_checkpoint() && e.checkpoint().step() == 3) mark = e.checkpoint().path();
  }
  ASSERT_FALSE(mark.empty());
  const std::string saved = dir_ + "/step3.pt";
  std::filesystem::copy_file(mark, saved);
  std::filesystem::copy_file(mark + ".sha256", saved + ".sha256");

  std::vector<Finished> resumed =
      RunTwoRanks("resumed", spec, {{"--resume", saved}, {"--resume", saved}});
  ASSERT_EQ(resumed[0].exit_code, 0) << resumed[0].stderr_text;
  ASSERT_EQ(resumed[1].exit_code, 0) << resumed[1].stderr_text;
  EXPECT_EQ(resumed[0].events.front().started().resumed_from_step(), 3);
  // Steps 4..6 repeat bit for bit, and the final parameters too.
  std::vector<xmod::v1::MetricPoint> want = Points(whole[0].events, "train/loss");
  std::vector<xmod::v1::MetricPoint> got = Points(resumed[0].events, "train/loss");
  ASSERT_EQ(want.size(), 6u);
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].step(), want[3 + i].step());
    EXPECT_EQ(got[i].value(), want[3 + i].value()) << "step " << got[i].step();
  }
  EXPECT_EQ(ParametersSha256(resumed[1].stderr_text), ParametersSha256(whole[0].stderr_text));
}

TEST_F(DistributedTest, SigtermOnOneRankStopsBothAfterTheSameStep) {
  const std::string spec = WriteSpec("long", xmod::v1::DENSE, 100000, 4 * kSeqLen, "ckpt");
  const std::string rendezvous = dir_ + "/long.rendezvous";
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    pids.push_back(Start("long_rank" + std::to_string(rank),
                         {"--spec", spec, "--rank", std::to_string(rank), "--world_size", "2",
                          "--rendezvous", rendezvous}));
  }
  // Once rank 0 reports a training loss, ask rank 1 (only) to stop.
  bool training = false;
  while (!training) {
    absl::StatusOr<std::vector<xmod::v1::TrainerEvent>> events =
        ParseEvents(ReadFile(dir_ + "/long_rank0.events").value_or(""));
    training = events.ok() && !Points(*events, "train/loss").empty();
    int status;
    if (!training && ::waitpid(pids[0], &status, WNOHANG) == pids[0]) {
      ::kill(pids[1], SIGKILL);
      ::waitpid(pids[1], &status, 0);
      FAIL() << "rank 0 exited early: " << *ReadFile(dir_ + "/long_rank0.stderr");
    }
    if (!training) ::usleep(20000);
  }
  ASSERT_EQ(::kill(pids[1], SIGTERM), 0);
  Finished rank0 = Wait("long_rank0", pids[0]);
  Finished rank1 = Wait("long_rank1", pids[1]);
  EXPECT_EQ(rank0.exit_code, kExitPreempted) << rank0.stderr_text;
  EXPECT_EQ(rank1.exit_code, kExitPreempted) << rank1.stderr_text;
  ASSERT_FALSE(rank0.events.empty());
  ASSERT_TRUE(rank0.events.back().has_checkpoint());
  const int64_t step = rank0.events.back().checkpoint().step();
  EXPECT_EQ(Points(rank0.events, "train/loss").back().step(), step);
  EXPECT_THAT(rank1.stderr_text,
              HasSubstr("stopped (SIGTERM) after " + std::to_string(step) + " steps"));
  EXPECT_EQ(ParametersSha256(rank0.stderr_text), ParametersSha256(rank1.stderr_text));
}

TEST_F(DistributedTest, WorldSizeThatDoesNotDivideTheWindowsIsRefused) {
  // 3 windows a step over 2 ranks; refused before the rendezvous, so rank 0 alone fails.
  const std::string spec = WriteSpec("odd", xmod::v1::DENSE, 2, 3 * kSeqLen, "ckpt");
  Finished f = Wait("odd", Start("odd", {"--spec", spec, "--rank", "0", "--world_size", "2",
                                         "--rendezvous", dir_ + "/odd.rendezvous"}));
  EXPECT_EQ(f.exit_code, kExitInvalidConfig);
  EXPECT_THAT(f.stderr_text, HasSubstr("training.batch_tokens: 48 tokens are 3 windows"));
  EXPECT_THAT(f.stderr_text, HasSubstr("2 data-parallel ranks"));
  EXPECT_TRUE(f.events.empty());
}

}  // namespace
}  // namespace xmod
