// Tests of the training loop on a tiny model and tiny generated shards: budget -> steps,
// spec defaults, the event stream of a full run, checkpoints, and bit-exact resume.
#include "model/train/trainer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "data/bpe_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/accounting/accounting.h"
#include "model/train/test_corpus.h"
#include "model/train/test_step_graphs.h"
#include "model/train/threads.h"
#include "trainer_contract/event_stream.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

constexpr int kVocab = 256;  // the tiny-test backbone's vocabulary
constexpr int kSeqLen = 16;
constexpr int kBatchTokens = 64;
constexpr int kResumeSteps = 8;

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ApplyThreadBudget(1);
    dir_ = MakeTestDir("trainer_test");
    ASSERT_TRUE(WriteLearnableShards(dir_, {"train_0.bin", "train_1.bin", "val_0.bin"},
                                     /*tokens=*/3000, kVocab, /*seed=*/11)
                    .ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A spec for `steps` steps of the tiny-test backbone.
  xmod::v1::RunSpec Spec(xmod::v1::Architecture arch, int steps, const std::string& ckpt_dir) {
    xmod::v1::RunSpec spec;
    spec.mutable_model()->set_arch(arch);
    spec.mutable_model()->mutable_backbone()->set_name("tiny-test");
    if (arch == xmod::v1::XMOD) {
      spec.mutable_model()->set_k(2);
      spec.mutable_model()->set_a(1);
      spec.mutable_model()->set_n0(1);
    }
    if (arch == xmod::v1::MOE) {  // 2 of 4 routed experts + 1 shared
      xmod::v1::MoESpec* moe = spec.mutable_model()->mutable_moe();
      moe->set_active_experts(2);
      moe->set_total_experts(4);
      moe->set_shared_experts(1);
      moe->set_expert_dim(32);
    }
    absl::StatusOr<Accounting> accounting = Account(spec.model(), kSeqLen);
    EXPECT_TRUE(accounting.ok()) << accounting.status();
    xmod::v1::TrainingSpec* t = spec.mutable_training();
    t->set_seq_len(kSeqLen);
    t->set_batch_tokens(kBatchTokens);
    t->set_flop_budget((steps + 0.5) * accounting->train_flops_per_token * kBatchTokens);
    t->set_lr(0.02);
    t->set_adamw_lr(0.01);
    t->set_weight_decay(0.1);
    t->set_grad_clip(1.0);
    t->set_eval_marks(4);
    t->set_eval_tokens(4 * kSeqLen);
    t->set_seed(5);
    t->set_log_every_steps(1);
    spec.mutable_data()->set_train_glob(dir_ + "/train_*.bin");
    spec.mutable_data()->set_val_glob(dir_ + "/val_*.bin");
    spec.set_checkpoint_dir(ckpt_dir);
    return spec;
  }

  // Runs the trainer with events into a file; returns the parsed events.
  std::vector<xmod::v1::TrainerEvent> RunAndCollect(TrainerOptions options, TrainerResult* result) {
    if (graphs_ != nullptr) options.TEST_step_graphs = graphs_;
    const std::string path = dir_ + "/events_" + std::to_string(runs_++);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_GE(fd, 0);
    options.events_fd = fd;
    absl::StatusOr<TrainerResult> r = RunTrainer(options);
    ::close(fd);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) *result = *r;
    absl::StatusOr<std::vector<xmod::v1::TrainerEvent>> events = ParseEvents(*ReadFile(path));
    EXPECT_TRUE(events.ok()) << events.status();
    return events.ok() ? *events : std::vector<xmod::v1::TrainerEvent>{};
  }

  static std::vector<xmod::v1::MetricPoint> Points(
      const std::vector<xmod::v1::TrainerEvent>& events, const std::string& name) {
    std::vector<xmod::v1::MetricPoint> points;
    for (const auto& e : events) {
      if (e.has_metric() && e.metric().name() == name) points.push_back(e.metric());
    }
    return points;
  }

  // Training kResumeSteps without interruption and training about half, stopping (as on
  // SIGTERM), resuming from the checkpoint and training the rest give bit-identical losses.
  void ExpectResumeIsBitIdentical(const xmod::v1::RunSpec& spec);

  std::string dir_;
  int runs_ = 0;
  // When set, every run records its step with these stand-in graphs.
  std::function<std::unique_ptr<StepGraphs>()> graphs_;
};

TEST_F(TrainerTest, FullRunWritesOrderedEventsAndCheckpoints) {
  TrainerOptions options;
  options.spec = Spec(xmod::v1::DENSE, 8, dir_ + "/ckpt");
  TrainerResult result;
  std::vector<xmod::v1::TrainerEvent> events = RunAndCollect(options, &result);
  ASSERT_GE(events.size(), 3u);
  ASSERT_TRUE(events.front().has_started());
  EXPECT_EQ(events.front().started().steps_planned(), 8);
  EXPECT_EQ(events.front().started().resumed_from_step(), 0);
  ASSERT_TRUE(events.back().has_finished());
  EXPECT_EQ(events.back().finished().steps(), 8);
  EXPECT_FALSE(result.preempted);
  EXPECT_EQ(result.tokens, 8 * kBatchTokens);
  // Progress is throttled, but every evaluation mark reports, the last with the final loss.
  const xmod::v1::TrainerEvent* progress = nullptr;
  for (const auto& e : events) {
    if (e.has_progress()) progress = &e;
  }
  ASSERT_NE(progress, nullptr);
  EXPECT_EQ(progress->progress().step(), 8);
  EXPECT_EQ(progress->progress().flop_budget(), options.spec.training().flop_budget());
  EXPECT_EQ(progress->progress().val_loss(), Points(events, "val/loss").back().value());

  // Every metric series advances in step, tokens and FLOPs.
  std::map<std::string, xmod::v1::MetricPoint> last;
  for (const auto& e : events) {
    if (!e.has_metric()) continue;
    auto it = last.find(e.metric().name());
    if (it != last.end()) {
      EXPECT_GT(e.metric().step(), it->second.step()) << e.metric().name();
      EXPECT_GT(e.metric().tokens(), it->second.tokens()) << e.metric().name();
      EXPECT_GT(e.metric().flops(), it->second.flops()) << e.metric().name();
    }
    EXPECT_EQ(e.metric().tokens(), e.metric().step() * kBatchTokens);
    last[e.metric().name()] = e.metric();
  }
  EXPECT_EQ(Points(events, "train/loss").size(), 8u);
  std::vector<xmod::v1::MetricPoint> val = Points(events, "val/loss");
  ASSERT_EQ(val.size(), 4u);  // marks after steps 2, 4, 6, 8
  EXPECT_EQ(val.back().step(), 8);
  EXPECT_LT(val.back().value(), std::log(static_cast<double>(kVocab)));
  EXPECT_LT(val.back().value(), val.front().value());
  EXPECT_EQ(Points(events, "perf/tokens_per_second").size(), 4u);
  EXPECT_TRUE(Points(events, "val/loss_topk").empty());  // dense: no routing

  // One checkpoint per evaluation, each on disk with its checksum: the trainer deletes
  // none (the worker does, once newer ones are durable at the coordinator).
  std::vector<xmod::v1::TrainerCheckpoint> checkpoints;
  for (const auto& e : events) {
    if (e.has_checkpoint()) checkpoints.push_back(e.checkpoint());
  }
  ASSERT_EQ(checkpoints.size(), 4u);
  for (int i : {0, 1, 2, 3}) {
    EXPECT_EQ(*Sha256File(checkpoints[i].path()), checkpoints[i].sha256());
    EXPECT_EQ(checkpoints[i].bytes(),
              static_cast<int64_t>(std::filesystem::file_size(checkpoints[i].path())));
  }
  EXPECT_EQ(result.last_checkpoint, checkpoints[3].path());
}

TEST_F(TrainerTest, RoutedModelReportsTopKLossAndRoutingDiagnostics) {
  TrainerOptions options;
  options.spec = Spec(xmod::v1::XMOD, 2, "");
  options.spec.mutable_training()->set_eval_marks(1);
  TrainerResult result;
  std::vector<xmod::v1::TrainerEvent> events = RunAndCollect(options, &result);
  EXPECT_EQ(Points(events, "val/loss").size(), 1u);
  EXPECT_EQ(Points(events, "val/loss_topk").size(), 1u);
  std::vector<xmod::v1::MetricPoint> coverage = Points(events, "route/coverage");
  ASSERT_EQ(coverage.size(), 1u);
  EXPECT_GT(coverage[0].value(), 0.0);
  EXPECT_LE(coverage[0].value(), 1.0);
  EXPECT_EQ(Points(events, "route/agreement").size(), 1u);
  for (const char* name : {"route/agreement_topk_pass", "route/agreement_passes"}) {
    std::vector<xmod::v1::MetricPoint> agreement = Points(events, name);
    ASSERT_EQ(agreement.size(), 1u) << name;
    EXPECT_GT(agreement[0].value(), 0.0) << name;
    EXPECT_LE(agreement[0].value(), 1.0) << name;
  }
  // Table 10's references for K = 2 and the spec's A*K = 2-layer intervals.
  ASSERT_EQ(Points(events, "route/coverage_identical").size(), 1u);
  EXPECT_DOUBLE_EQ(Points(events, "route/coverage_identical")[0].value(), 0.5);
  EXPECT_DOUBLE_EQ(Points(events, "route/jaccard_identical")[0].value(), 1.0);
  EXPECT_DOUBLE_EQ(Points(events, "route/coverage_random")[0].value(), 0.75);
  EXPECT_DOUBLE_EQ(Points(events, "route/jaccard_random")[0].value(), 1.0 / 3.0);
  EXPECT_FALSE(Points(events, "route/updates_0").empty());
  EXPECT_TRUE(result.last_checkpoint.empty());  // no checkpoint_dir, no checkpoints
}

// training.eval_tasks: scored after the final evaluation, before `finished`, with the
// tokenizer found beside the validation shards.
TEST_F(TrainerTest, EvalTasksGiveEvalMetricsAtTheEnd) {
  ASSERT_TRUE(SaveBpeMerges(dir_ + "/tokenizer_256.txt", {}).ok());  // byte-level, vocab 256
  const std::string testdata = std::string(std::getenv("XMOD_SOURCE_DIR")) + "/model/eval/testdata";
  TrainerOptions options;
  options.spec = Spec(xmod::v1::XMOD, 2, "");
  for (const char* task : {"boolq", "lambada"}) {
    xmod::v1::EvalTask* eval = options.spec.mutable_training()->add_eval_tasks();
    eval->set_task(task);
    eval->set_data(absl::StrCat(testdata, "/", task, ".jsonl"));
  }
  TrainerResult result;
  std::vector<xmod::v1::TrainerEvent> events = RunAndCollect(options, &result);
  ASSERT_FALSE(events.empty());
  ASSERT_TRUE(events.back().has_finished());
  std::vector<xmod::v1::MetricPoint> acc = Points(events, "eval/boolq/acc");
  ASSERT_EQ(acc.size(), 1u);
  EXPECT_EQ(acc[0].step(), 2);
  EXPECT_GE(acc[0].value(), 0.0);
  EXPECT_LE(acc[0].value(), 1.0);
  EXPECT_EQ(Points(events, "eval/boolq/acc_norm").size(), 1u);
  ASSERT_EQ(Points(events, "eval/boolq/n").size(), 1u);
  EXPECT_EQ(Points(events, "eval/boolq/n")[0].value(), 5);
  ASSERT_EQ(Points(events, "eval/lambada/ppl").size(), 1u);
  EXPECT_GT(Points(events, "eval/lambada/ppl")[0].value(), 1.0);
  EXPECT_TRUE(Points(events, "eval/lambada/acc_norm").empty());
  // Each metric's standard error as lm-evaluation-harness computes it (model/eval/stderr.h).
  for (const char* name : {"eval/boolq/acc_stderr", "eval/boolq/acc_norm_stderr",
                           "eval/lambada/acc_stderr", "eval/lambada/ppl_stderr"}) {
    SCOPED_TRACE(name);
    ASSERT_EQ(Points(events, name).size(), 1u);
    EXPECT_GE(Points(events, name)[0].value(), 0.0);
  }
  EXPECT_GT(Points(events, "eval/lambada/ppl_stderr")[0].value(), 0.0);  // a bootstrap spread
}

class ResumeTest : public TrainerTest,
                   public ::testing::WithParamInterface<xmod::v1::Architecture> {};

TEST_P(ResumeTest, ResumedRunIsBitIdentical) {
  ExpectResumeIsBitIdentical(Spec(GetParam(), kResumeSteps, dir_ + "/whole"));
}

INSTANTIATE_TEST_SUITE_P(Architectures, ResumeTest,
                         ::testing::Values(xmod::v1::DENSE, xmod::v1::XMOD, xmod::v1::MOE));

// training.cuda_graphs "on", with stand-in recordings (test_step_graphs.h): the step is
// recorded after its warm-up, replayed at every later step, and a run resumed from a
// checkpoint computes the uninterrupted run's losses bit for bit — its own warm-up steps run
// what the replays run.
TEST_F(TrainerTest, RecordedStepsResumeBitIdentically) {
  for (auto arch : {xmod::v1::DENSE, xmod::v1::XMOD}) {
    xmod::v1::RunSpec spec = Spec(arch, kResumeSteps, dir_ + "/whole");
    spec.mutable_training()->set_cuda_graphs("on");
    spec.mutable_training()->set_micro_batch_tokens(2 * kSeqLen);
    ReplayCounts counts;
    graphs_ = ClosureStepGraphsFactory(&counts);
    ExpectResumeIsBitIdentical(spec);
    EXPECT_GT(counts.captures, 0);
    EXPECT_GT(counts.replays, counts.captures);
    graphs_ = nullptr;
  }
}

// "on" where the step cannot be recorded fails the run before it trains, naming the field:
// on a CPU, and for MoE.
TEST_F(TrainerTest, CudaGraphsOnNamesWhatIsMissing) {
  TrainerOptions options;
  options.spec = Spec(xmod::v1::DENSE, 2, "");
  options.spec.mutable_training()->set_cuda_graphs("on");
  absl::StatusOr<TrainerResult> r = RunTrainer(options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("training.cuda_graphs"));
  EXPECT_THAT(r.status().message(), HasSubstr("CUDA device"));
  options.spec = Spec(xmod::v1::MOE, 2, "");
  options.spec.mutable_training()->set_cuda_graphs("on");
  options.TEST_step_graphs = ClosureStepGraphsFactory(nullptr);
  r = RunTrainer(options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("MoE"));
}

// The GPU step's options on CPU: bf16 autocast, activation checkpointing, gradient
// accumulation over micro-batches and fused attention where the LibTorch has it.
TEST_F(TrainerTest, GpuStepOptionsTrainAndResumeBitIdentically) {
  xmod::v1::RunSpec spec = Spec(xmod::v1::XMOD, kResumeSteps, dir_ + "/whole");
  xmod::v1::TrainingSpec* t = spec.mutable_training();
  t->set_precision("bf16");
  t->set_activation_checkpointing(true);
  t->set_micro_batch_tokens(2 * kSeqLen);
  t->set_attention("auto");
  ExpectResumeIsBitIdentical(spec);

  // bf16 really changed the numerics, and the run still learns.
  TrainerOptions fp32;
  fp32.spec = Spec(xmod::v1::XMOD, kResumeSteps, "");
  fp32.spec.mutable_training()->set_precision("fp32");
  TrainerResult fp32_result, bf16_result;
  RunAndCollect(fp32, &fp32_result);
  TrainerOptions bf16 = fp32;
  bf16.spec.mutable_training()->set_precision("bf16");
  std::vector<xmod::v1::TrainerEvent> events = RunAndCollect(bf16, &bf16_result);
  EXPECT_NE(bf16_result.final_val_loss, fp32_result.final_val_loss);
  EXPECT_NEAR(bf16_result.final_val_loss, fp32_result.final_val_loss, 0.1);
  std::vector<xmod::v1::MetricPoint> losses = Points(events, "train/loss");
  ASSERT_GE(losses.size(), 2u);
  EXPECT_LT(losses.back().value(), losses.front().value());
}

void TrainerTest::ExpectResumeIsBitIdentical(const xmod::v1::RunSpec& spec) {
  constexpr int kSteps = kResumeSteps;
  TrainerOptions whole;
  whole.spec = spec;
  TrainerResult whole_result;
  std::vector<xmod::v1::TrainerEvent> uninterrupted = RunAndCollect(whole, &whole_result);

  TrainerOptions first = whole;
  first.spec.set_checkpoint_dir(dir_ + "/split");
  first.stop_requested = [](int64_t step) { return step >= kSteps / 2 - 1; };  // off a mark
  TrainerResult first_result;
  std::vector<xmod::v1::TrainerEvent> before = RunAndCollect(first, &first_result);
  ASSERT_TRUE(first_result.preempted);
  EXPECT_EQ(first_result.steps, kSteps / 2 - 1);
  EXPECT_FALSE(before.back().has_finished());
  ASSERT_TRUE(before.back().has_checkpoint());
  EXPECT_EQ(before.back().checkpoint().step(), kSteps / 2 - 1);

  TrainerOptions second = whole;
  second.spec.set_checkpoint_dir(dir_ + "/split");
  second.resume_path = first_result.last_checkpoint;
  TrainerResult second_result;
  std::vector<xmod::v1::TrainerEvent> after = RunAndCollect(second, &second_result);
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.front().started().resumed_from_step(), kSteps / 2 - 1);
  EXPECT_EQ(second_result.steps, kSteps);

  for (const char* name : {"train/loss", "train/aux_loss", "val/loss"}) {
    std::vector<xmod::v1::MetricPoint> expected = Points(uninterrupted, name);
    std::vector<xmod::v1::MetricPoint> got = Points(before, name);
    for (const auto& p : Points(after, name)) got.push_back(p);
    ASSERT_EQ(got.size(), expected.size()) << name;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(got[i].step(), expected[i].step()) << name;
      EXPECT_EQ(got[i].flops(), expected[i].flops()) << name;
      EXPECT_EQ(got[i].value(), expected[i].value()) << name << " at step " << got[i].step();
    }
  }
  EXPECT_EQ(second_result.final_val_loss, whole_result.final_val_loss);
}

TEST_F(TrainerTest, BadInputsAreRefusedWithTheField) {
  TrainerOptions options;
  options.spec = Spec(xmod::v1::DENSE, 1, "");
  options.spec.mutable_training()->set_flop_budget(1);
  absl::StatusOr<TrainerResult> r = RunTrainer(options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("training.flop_budget"));

  options.spec = Spec(xmod::v1::DENSE, 1, "");
  options.spec.mutable_data()->set_train_glob(dir_ + "/missing_*.bin");
  EXPECT_THAT(RunTrainer(options).status().message(), HasSubstr("data.train_glob"));

  options.spec = Spec(xmod::v1::DENSE, 1, "");
  options.device = "gpu7";
  EXPECT_THAT(RunTrainer(options).status().message(), HasSubstr("--device"));

  // Eval tasks are read at setup: a missing file fails the run before it trains.
  options = TrainerOptions();
  options.spec = Spec(xmod::v1::DENSE, 1, "");
  xmod::v1::EvalTask* eval = options.spec.mutable_training()->add_eval_tasks();
  eval->set_task("boolq");
  eval->set_data(dir_ + "/missing.jsonl");
  EXPECT_THAT(RunTrainer(options).status().message(), HasSubstr("training.eval_tasks[0]"));
}

}  // namespace
}  // namespace xmod
