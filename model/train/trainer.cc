// The training loop of xmod-train: setup from a RunSpec, steps, evaluations, checkpoints and
// the event stream.
#include "model/train/trainer.h"

#include <glog/logging.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"
#include "model/accounting/accounting.h"
#include "model/accounting/step_budget.h"
#include "model/autocast.h"
#include "model/device.h"
#include "model/eval/evaluate.h"
#include "model/routing_diagnostics.h"
#include "model/train/checkpoint.h"
#include "model/train/communicator.h"
#include "model/train/data_loader.h"
#include "model/train/grad_reducer.h"
#include "model/train/lease.h"
#include "model/train/parameter_update.h"
#include "model/train/schedule.h"
#include "model/train/step_graph.h"
#include "model/train/train_step.h"
#include "model/train/training_config.h"
#include "model/transformer.h"
#include "trainer_contract/event_stream.h"
#include "trainer_contract/series.h"

namespace xmod {
namespace {

constexpr int64_t kProgressIntervalMs = 1000;

// Whether the plan has routed layers (val/loss_topk and routing diagnostics apply).
bool IsRouted(const LayerPlan& plan) {
  return std::any_of(plan.layers.begin(), plan.layers.end(), [](LayerKind kind) {
    return kind == LayerKind::kSparse || kind == LayerKind::kSparseFullKv ||
           kind == LayerKind::kRoutedFfn;
  });
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Whether a buffer is a per-rank counter that data-parallel ranks sum (MoE expert loads,
// model/moe.h), as opposed to state every rank computes identically.
bool IsPerRankCounter(const std::string& name) {
  return name == "load" || absl::EndsWith(name, ".load");
}

// SHA-256 over the SHA-256s of each parameter's bytes, in the model's parameter order.
std::string ParametersSha256(torch::nn::Module& model) {
  std::string digests;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    torch::Tensor t = item.value().detach().to(torch::kCPU).contiguous();
    digests += Sha256Hex(absl::string_view(static_cast<const char*>(t.data_ptr()), t.nbytes()));
  }
  return Sha256Hex(digests);
}

struct Evaluation {
  double loss = 0;       // threshold rule (the reported validation loss)
  double loss_topk = 0;  // routed models only
  std::optional<RoutingDiagnostics> routing;
};

// How one step's global batch splits: into windows of seq_len, over the ranks, and into
// micro-batches of a rank's forward/backward passes.
struct BatchSplit {
  int64_t sequences_per_step = 0;  // windows of the global batch
  int64_t sequences_per_rank = 0;  // this rank's share of them
  int64_t sequences_per_micro = 0;
};

// Where this process began: the resumed checkpoint's counters, or zeros (the rates count
// from here).
struct StartPoint {
  int64_t tokens = 0;
  double flops = 0;
};

// The zero-shot tasks of training.eval_tasks, read at setup (rank 0 only).
struct EvalTasks {
  std::unique_ptr<Tokenizer> tokenizer;            // set when there are tasks
  std::vector<std::vector<TaskExample>> examples;  // one per training.eval_tasks
};

// One run: the objects of a training process and the loop over them.
class Run {
 public:
  explicit Run(const TrainerOptions& options)
      : options_(options),
        events_(options.distributed.rank == 0 ? options.events_fd : -1),
        device_(torch::kCPU),
        rank_(options.distributed.rank),
        world_size_(options.distributed.world_size) {}

  absl::StatusOr<TrainerResult> Train();

 private:
  // The setup steps, in this order: every local check before the rendezvous.
  absl::Status Setup();
  // The training options, the FLOP accounting, the planned steps and the batch split.
  absl::Status PlanSteps();
  // The training and validation data and the zero-shot tasks.
  absl::Status OpenData();
  // The device, the communicator and a check that every rank runs the same spec.
  absl::Status ConnectRanks();
  // The model on the device and its optimizers.
  void BuildModel();
  // Continues from options_.resume_path, if set, and records the start point.
  absl::Status RestoreCheckpoint();
  // The checkpoint folder, the per-rank counters, the ranks' sync check and the reducer;
  // then the step (MakeStep).
  absl::Status PrepareRanks();
  // The training step, recorded as graphs where training.cuda_graphs asks for them.
  absl::Status MakeStep();
  // The `started` event and the log line describing the run.
  absl::Status WriteStarted();
  absl::Status Step();
  absl::StatusOr<Evaluation> Evaluate();
  // At an evaluation mark: evaluates, checks the ranks are in sync and writes the metrics.
  absl::Status ReportEvaluation();
  // The metrics of an evaluation at the current step.
  std::vector<std::pair<std::string, double>> EvaluationMetrics(const Evaluation& evaluation) const;
  // Whether any rank was asked to stop after this step (never after the last one).
  absl::StatusOr<bool> AnyStopRequested();
  // One step of Train() and what follows it (evaluation, progress, checkpoint); true when a
  // stop request ended the run after it.
  absl::StatusOr<bool> StepAndReport();
  // Whether step (1..steps) is followed by an evaluation mark.
  bool IsEvalMark(int64_t step) const;
  // On a stop request: a checkpoint, then true.
  absl::StatusOr<bool> StopIfRequested();
  // The result of this call, which took `seconds`.
  TrainerResult Result(bool preempted, double seconds);
  absl::Status WriteFinished(const TrainerResult& result);
  // Reads training.eval_tasks and the tokenizer (at setup, so that a bad file fails the run
  // before it trains), then, after the final evaluation, scores them into eval/* metrics.
  absl::Status LoadEvalTasks();
  absl::Status EvaluateTasks();
  // Fails unless every rank holds the same parameters and buffers.
  absl::Status CheckRanksInSync();
  // Step() with LibTorch's and the allocator's out-of-memory errors turned into OutOfMemory().
  absl::Status GuardedStep();
  // RESOURCE_EXHAUSTED "out of memory at ..." naming this rank's micro-batch and whether
  // activation checkpointing was on (the coordinator's memory plan reads the exit code; the
  // attempt's error keeps this text).
  absl::Status OutOfMemory(absl::string_view what) const;
  absl::Status WriteCheckpoint();
  // WriteCheckpoint(), where a storage fault is logged and training goes on without it.
  absl::Status CheckpointOrGoOn();
  absl::Status Metric(const std::string& name, double value) {
    return events_.Metric(state_.step, state_.tokens, state_.flops, name, value);
  }
  absl::Status MaybeProgress(bool force);
  // torch tensors (rows, seq_len + 1) of int64 tokens on the device; on a GPU through pinned
  // host memory and an asynchronous copy.
  torch::Tensor ToDevice(std::vector<int64_t>& tokens, int64_t rows);
  // Writes train/* metrics and the log line; the step loop's one host synchronisation.
  absl::Status LogTraining(const torch::Tensor& loss, const torch::Tensor& aux, double lr);
  // The model's numerics and kernels from training.precision / attention /
  // activation_checkpointing. INVALID_ARGUMENT when this LibTorch cannot honour them.
  absl::StatusOr<ModelRuntimeOptions> RuntimeOptions() const;
  double TrainSeconds() const { return std::max(1e-9, train_seconds_); }

  const TrainerOptions& options_;
  EventWriter events_;
  torch::Device device_;
  const int rank_;
  const int world_size_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<OverlappedGradientReducer> reducer_;  // overlapped all-reduce, when used
  AutocastState autocast_;                              // bf16 mixed precision, when on
  ModelRuntimeOptions runtime_;                         // fused attention, act. checkpointing
  std::vector<torch::Tensor> per_rank_counters_;        // buffers summed over ranks each step
  xmod::v1::TrainingSpec training_;
  Accounting accounting_;
  bool routed_ = false;
  int64_t steps_ = 0;
  BatchSplit batch_;
  int log_every_ = 1;
  double flops_per_step_ = 0;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<TrainLoader> loader_;
  std::unique_ptr<ValidationSet> validation_;
  EvalTasks eval_tasks_;
  Transformer model_{nullptr};
  std::unique_ptr<ParameterUpdate> update_;
  std::unique_ptr<TrainStep> step_;
  TrainState state_;
  StartPoint start_;
  std::vector<int64_t> buffer_;
  double last_loss_ = 0;
  double last_val_loss_ = 0;
  double train_seconds_ = 0;
  int64_t last_progress_ms_ = -1;
  int64_t last_checkpoint_step_ = -1;
  std::string last_checkpoint_;
  int64_t checkpoint_failures_ = 0;  // checkpoints a full or failing volume cost
  // Test fault (XMOD_TEST_OOM_ABOVE_MICRO_BATCH_TOKENS, 0 = off): a step whose micro-batch
  // holds more tokens' activations than this runs out of memory, as a GPU would; activation
  // checkpointing counts as holding half. Lets the memory plans be tested on CPU.
  int64_t test_oom_above_tokens_ = 0;
};

absl::Status Run::Setup() {
  if (absl::Status s = PlanSteps(); !s.ok()) return s;
  if (absl::Status s = OpenData(); !s.ok()) return s;
  // After every local check, so a bad spec fails at once instead of after the rendezvous.
  if (absl::Status s = ConnectRanks(); !s.ok()) return s;
  absl::StatusOr<ModelRuntimeOptions> runtime = RuntimeOptions();
  if (!runtime.ok()) return runtime.status();
  runtime_ = *runtime;
  if (const char* oom = std::getenv("XMOD_TEST_OOM_ABOVE_MICRO_BATCH_TOKENS")) {
    if (!absl::SimpleAtoi(oom, &test_oom_above_tokens_) || test_oom_above_tokens_ < 0) {
      return absl::InvalidArgumentError(absl::StrCat("XMOD_TEST_OOM_ABOVE_MICRO_BATCH_TOKENS: \"",
                                                     oom, "\" is not a token count"));
    }
    LOG(WARNING) << "test fault: out of memory above micro-batches of " << test_oom_above_tokens_
                 << " tokens (XMOD_TEST_OOM_ABOVE_MICRO_BATCH_TOKENS)";
  }
  BuildModel();
  if (absl::Status s = RestoreCheckpoint(); !s.ok()) return s;
  if (absl::Status s = PrepareRanks(); !s.ok()) return s;
  return WriteStarted();
}

absl::Status Run::PlanSteps() {
  absl::Status valid = ValidateDistributedOptions(options_.distributed);
  if (!valid.ok()) return valid;
  absl::StatusOr<xmod::v1::TrainingSpec> training = ResolveTraining(options_.spec.training());
  if (!training.ok()) return training.status();
  training_ = *std::move(training);
  const int seq_len = training_.seq_len();

  absl::StatusOr<Accounting> accounting =
      Account(options_.spec.model(), seq_len, TrainFlopsMultiplier(training_));
  if (!accounting.ok()) {
    return absl::Status(accounting.status().code(),
                        absl::StrCat("model.", accounting.status().message()));
  }
  accounting_ = *std::move(accounting);
  routed_ = IsRouted(accounting_.plan);
  absl::StatusOr<int64_t> steps = PlannedSteps(
      training_.flop_budget(), accounting_.train_flops_per_token, training_.batch_tokens());
  if (!steps.ok()) return steps.status();
  steps_ = *steps;
  flops_per_step_ = accounting_.train_flops_per_token * training_.batch_tokens();
  batch_.sequences_per_step = training_.batch_tokens() / seq_len;
  if (batch_.sequences_per_step % world_size_ != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("training.batch_tokens: ", training_.batch_tokens(), " tokens are ",
                     batch_.sequences_per_step, " windows of seq_len ", seq_len,
                     " per step, which do not split evenly over ", world_size_,
                     " data-parallel ranks (--world_size)"));
  }
  batch_.sequences_per_rank = batch_.sequences_per_step / world_size_;
  const int64_t micro_tokens = options_.micro_batch_tokens > 0      ? options_.micro_batch_tokens
                               : training_.micro_batch_tokens() > 0 ? training_.micro_batch_tokens()
                                                                    : training_.batch_tokens();
  log_every_ = options_.log_every > 0 ? options_.log_every : training_.log_every_steps();
  batch_.sequences_per_micro =
      std::clamp<int64_t>(micro_tokens / seq_len, 1, batch_.sequences_per_rank);
  schedule_ =
      std::make_unique<LrSchedule>(steps_, training_.warmup_fraction(), training_.min_lr_ratio());
  return absl::OkStatus();
}

absl::Status Run::OpenData() {
  const xmod::v1::DataSpec& data = options_.spec.data();
  const int seq_len = training_.seq_len();
  const int vocab = accounting_.backbone.vocab_size;
  absl::StatusOr<std::unique_ptr<TrainLoader>> loader =
      TrainLoader::Open(data.train_glob(), "data.train_glob", seq_len, vocab, training_.seed());
  if (!loader.ok()) return loader.status();
  loader_ = *std::move(loader);
  absl::StatusOr<std::unique_ptr<ValidationSet>> validation = ValidationSet::Open(
      data.val_glob(), "data.val_glob", seq_len, vocab, training_.eval_tokens());
  if (!validation.ok()) return validation.status();
  validation_ = *std::move(validation);
  return LoadEvalTasks();
}

absl::Status Run::ConnectRanks() {
  try {
    device_ = torch::Device(options_.device);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device: \"", options_.device, "\" is not a device (cpu, cuda:N)"));
  }
  if (device_.is_cuda() && !torch::cuda::is_available()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device ", options_.device, ": this LibTorch has no CUDA or no GPU is visible"));
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      Communicator::Connect(options_.distributed, device_);
  if (!comm.ok()) return comm.status();
  comm_ = *std::move(comm);
  // The ranks must run the same spec: compare a fingerprint of it before any collective
  // sized by the model.
  const std::string digest = Sha256Hex(options_.spec.SerializeAsString());
  const auto fingerprint = static_cast<int64_t>(std::stoull(digest.substr(0, 15), nullptr, 16));
  return comm_->CheckIdentical({{"the run spec", torch::tensor({fingerprint}, torch::kInt64)}},
                               "--spec files");
}

void Run::BuildModel() {
  autocast_ = AutocastForPrecision(training_.precision(), device_, accounting_.backbone.d_model);
  torch::manual_seed(training_.seed());
  model_ = Transformer(options_.spec.model(), accounting_, training_.seq_len(), runtime_);
  model_->to(device_);
  model_->train();
  update_ = std::make_unique<ParameterUpdate>(model_, training_, autocast_);
}

absl::Status Run::RestoreCheckpoint() {
  if (!options_.resume_path.empty()) {
    // A checkpoint that verified (main.cc) but does not fit this run would fail every retry
    // the same way: report it refused, so the coordinator stops offering it.
    auto refuse = [this](const absl::Status& why) {
      xmod::v1::TrainerEvent event;
      event.mutable_resume_rejected()->set_path(options_.resume_path);
      event.mutable_resume_rejected()->set_reason(why.ToString());
      events_.Write(event).IgnoreError();  // the load error below says what matters
      return why;
    };
    absl::Status status = LoadCheckpoint(options_.resume_path, model_.get(), &update_->muon(),
                                         &update_->adamw(), &state_);
    if (!status.ok()) return refuse(status);
    if (state_.step > steps_) {
      return refuse(absl::FailedPreconditionError(
          absl::StrCat(options_.resume_path, ": checkpoint at step ", state_.step,
                       " is past the run's ", steps_, " planned steps")));
    }
    status = loader_->SetPosition(state_.data);
    if (!status.ok()) return status;
    last_checkpoint_step_ = state_.step;
    LOG(INFO) << "resumed from " << options_.resume_path << " at step " << state_.step;
  }
  start_ = StartPoint{state_.tokens, state_.flops};
  return absl::OkStatus();
}

absl::Status Run::PrepareRanks() {
  if (!options_.spec.checkpoint_dir().empty() && rank_ == 0) {
    absl::Status status = MakeDirs(options_.spec.checkpoint_dir());
    if (!status.ok()) return status;
  }
  for (const auto& item : model_->named_buffers(/*recurse=*/true)) {
    if (IsPerRankCounter(item.key())) per_rank_counters_.push_back(item.value());
  }
  absl::Status in_sync = CheckRanksInSync();
  if (!in_sync.ok()) return in_sync;
  // Overlap needs every parameter to get a gradient on every rank: not so for MoE experts.
  if (world_size_ > 1 && training_.overlap_grad_reduce() && per_rank_counters_.empty() &&
      comm_->CollectsOn(device_)) {
    reducer_ = std::make_unique<OverlappedGradientReducer>(comm_.get(), model_->parameters());
  }
  return MakeStep();
}

absl::Status Run::MakeStep() {
  const bool stand_in = options_.TEST_step_graphs != nullptr;
  absl::StatusOr<bool> graphs = UseStepGraphs(
      training_.cuda_graphs(),
      {stand_in || DeviceHasGraphs(device_), world_size_, model_->StaticTrainingStep()});
  if (!graphs.ok()) return graphs.status();
  std::unique_ptr<StepGraphs> recordings;
  if (*graphs && stand_in) {
    recordings = options_.TEST_step_graphs();
  } else if (*graphs) {
    absl::StatusOr<std::unique_ptr<StepGraphs>> made = MakeDeviceStepGraphs(device_);
    if (!made.ok()) return made.status();
    recordings = *std::move(made);
  }
  TrainStepOptions step;
  step.seq_len = training_.seq_len();
  step.rows = batch_.sequences_per_rank;
  step.micro_rows = batch_.sequences_per_micro;
  step.autocast = autocast_;
  step_ = std::make_unique<TrainStep>(model_, update_.get(), step, std::move(recordings),
                                      comm_.get(), reducer_.get(), per_rank_counters_);
  return absl::OkStatus();
}

absl::Status Run::WriteStarted() {
  xmod::v1::TrainerEvent event;
  xmod::v1::TrainerStarted* started = event.mutable_started();
  started->set_resumed_from_step(state_.step);
  started->set_total_params(accounting_.total_params);
  started->set_forward_flops_per_token(accounting_.forward_flops_per_token);
  started->set_steps_planned(steps_);
  LOG(INFO) << "run " << options_.spec.run_id() << ": " << accounting_.plan.notation << ", "
            << accounting_.layers << " layers, N = " << accounting_.total_params
            << ", train FLOPs/token = " << accounting_.train_flops_per_token << ", " << steps_
            << " steps of " << training_.batch_tokens() << " tokens on " << device_ << ", "
            << (autocast_.enabled ? "bf16" : "fp32") << " (precision " << training_.precision()
            << ")" << (runtime_.fused_attention ? ", fused attention" : "")
            << (runtime_.activation_checkpointing ? ", activation checkpointing" : "")
            << (step_->graphs() ? ", CUDA graphs" : "")
            << (world_size_ > 1 ? absl::StrCat(", rank ", rank_, " of ", world_size_, " (",
                                               options_.distributed.backend, ")")
                                : std::string());
  return events_.Write(event);
}

absl::StatusOr<ModelRuntimeOptions> Run::RuntimeOptions() const {
  ModelRuntimeOptions runtime;
  runtime.fused_attention = training_.attention() != "manual";
  runtime.activation_checkpointing = training_.activation_checkpointing();
  return runtime;
}

torch::Tensor Run::ToDevice(std::vector<int64_t>& tokens, int64_t rows) {
  torch::Tensor host =
      torch::from_blob(tokens.data(), {rows, training_.seq_len() + 1}, torch::kInt64);
  if (!device_.is_cuda()) return host.clone();
  // A pinned copy: `tokens` is refilled for the next batch while this copy may still run.
  return host.pin_memory().to(device_, /*non_blocking=*/true);
}

absl::Status Run::GuardedStep() {
  try {
    return Step();
  } catch (const c10::OutOfMemoryError& e) {
    return OutOfMemory(e.what_without_backtrace());
  } catch (const std::bad_alloc& e) {
    return OutOfMemory(absl::StrCat("std::bad_alloc: ", e.what()));
  } catch (const c10::Error& e) {
    // The CPU allocator's failure is a plain c10::Error.
    const std::string what = e.what_without_backtrace();
    if (absl::StrContains(what, "can't allocate memory")) return OutOfMemory(what);
    throw;
  }
}

absl::Status Run::OutOfMemory(absl::string_view what) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of memory at a micro-batch of ", batch_.sequences_per_micro * training_.seq_len(),
      " tokens per rank, activation checkpointing ",
      runtime_.activation_checkpointing ? "on" : "off", ", on ", device_.str(), ": ", what));
}

absl::Status Run::Step() {
  const auto begin = std::chrono::steady_clock::now();
  const double multiplier = schedule_->Multiplier(state_.step);
  const int64_t seq_len = training_.seq_len();
  if (test_oom_above_tokens_ > 0) {
    const int64_t held =
        batch_.sequences_per_micro * seq_len / (runtime_.activation_checkpointing ? 2 : 1);
    if (held > test_oom_above_tokens_) {
      return OutOfMemory(absl::StrCat(
          "a test fault: activations of ", held,
          " tokens > XMOD_TEST_OOM_ABOVE_MICRO_BATCH_TOKENS=", test_oom_above_tokens_));
    }
  }

  // This rank's windows of the step: [rank n/W, (rank + 1) n/W) of the global n.
  loader_->Skip(static_cast<int>(rank_ * batch_.sequences_per_rank));
  absl::Status status = loader_->Next(static_cast<int>(batch_.sequences_per_rank), &buffer_);
  if (!status.ok()) return status;
  loader_->Skip(static_cast<int>((world_size_ - 1 - rank_) * batch_.sequences_per_rank));
  torch::Tensor batch = ToDevice(buffer_, batch_.sequences_per_rank);  // (B / W, T + 1)
  absl::StatusOr<StepLosses> losses = step_->Run(batch, multiplier);
  if (!losses.ok()) return losses.status();
  ++state_.step;
  state_.tokens += training_.batch_tokens();
  state_.flops += flops_per_step_;
  state_.data = loader_->position();
  train_seconds_ += Seconds(std::chrono::steady_clock::now() - begin);
  if (state_.step % log_every_ == 0 || state_.step == steps_) {
    return LogTraining(losses->loss, losses->aux, training_.lr() * multiplier);
  }
  return absl::OkStatus();
}

absl::Status Run::LogTraining(const torch::Tensor& loss_tensor, const torch::Tensor& aux_tensor,
                              double lr) {
  const double loss = loss_tensor.item<double>(), aux = aux_tensor.item<double>();
  // Every rank sees the same global mean, so every rank fails alike.
  if (!std::isfinite(loss)) {
    return absl::InternalError(absl::StrCat(SeriesName(xmod::v1::SERIES_TRAIN_LOSS), " is ", loss,
                                            " at step ", state_.step, " (diverged)"));
  }
  last_loss_ = loss;
  if (rank_ != 0) return absl::OkStatus();
  for (auto [series, value] :
       {std::pair<xmod::v1::Series, double>{xmod::v1::SERIES_TRAIN_LOSS, loss},
        {xmod::v1::SERIES_TRAIN_AUX_LOSS, aux},
        {xmod::v1::SERIES_TRAIN_LR, lr}}) {
    absl::Status status = Metric(SeriesName(series), value);
    if (!status.ok()) return status;
  }
  LOG(INFO) << absl::StrFormat("step %d/%d loss %.4f aux %.4f lr %.3g tok/s %.0f", state_.step,
                               steps_, loss, aux, lr,
                               (state_.tokens - start_.tokens) / TrainSeconds());
  return absl::OkStatus();
}

absl::Status Run::MaybeProgress(bool force) {
  const int64_t now = options_.clock->NowMillis();
  if (!force && last_progress_ms_ >= 0 && now - last_progress_ms_ < kProgressIntervalMs) {
    return absl::OkStatus();
  }
  last_progress_ms_ = now;
  xmod::v1::TrainerEvent event;
  xmod::v1::Progress* progress = event.mutable_progress();
  progress->set_step(state_.step);
  progress->set_tokens(state_.tokens);
  progress->set_flops(state_.flops);
  progress->set_flop_budget(training_.flop_budget());
  progress->set_train_loss(last_loss_);
  progress->set_val_loss(last_val_loss_);
  progress->set_tokens_per_second((state_.tokens - start_.tokens) / TrainSeconds());
  return events_.Write(event);
}

absl::StatusOr<Evaluation> Run::Evaluate() {
  Evaluation result;
  if (rank_ != 0) {
    std::vector<double> losses = {0, 0};
    absl::Status status = comm_->BroadcastFromRankZero(&losses);
    if (!status.ok()) return status;
    result.loss = losses[0];
    result.loss_topk = losses[1];
    return result;
  }
  torch::NoGradGuard no_grad;
  model_->eval();
  RoutingDiagnosticsAccumulator diagnostics;
  const int64_t seq_len = training_.seq_len();
  const int64_t total = validation_->size();
  for (int64_t b = 0; b < total; b += batch_.sequences_per_micro) {
    const int64_t n = std::min(batch_.sequences_per_micro, total - b);
    absl::Status status = validation_->Get(b, n, &buffer_);
    if (!status.ok()) return status;
    torch::Tensor batch = ToDevice(buffer_, n);
    torch::Tensor inputs = batch.slice(/*dim=*/1, 0, seq_len).contiguous();       // (n, T)
    torch::Tensor targets = batch.slice(/*dim=*/1, 1, seq_len + 1).contiguous();  // (n, T)
    RoutingTrace trace;
    AutocastGuard autocast(device_.type(), autocast_);
    ModelOutput out =
        model_->forward(inputs, targets, RoutingMode::kThreshold, routed_ ? &trace : nullptr);
    result.loss += out.loss.item<double>() * n;
    if (routed_) {
      diagnostics.Add(trace);
      // A separate top-k-driven pass over the same batch (Table 10's agreement; C.4).
      RoutingTrace topk_trace;
      result.loss_topk +=
          model_->forward(inputs, targets, RoutingMode::kTopK, &topk_trace).loss.item<double>() * n;
      diagnostics.AddTopKPass(topk_trace, trace);
    }
  }
  model_->train();
  result.loss /= static_cast<double>(total);
  result.loss_topk /= static_cast<double>(total);
  if (routed_) result.routing = diagnostics.Result();
  std::vector<double> losses = {result.loss, result.loss_topk};
  absl::Status status = comm_->BroadcastFromRankZero(&losses);
  if (!status.ok()) return status;
  return result;
}

absl::Status Run::LoadEvalTasks() {
  if (rank_ != 0 || training_.eval_tasks().empty()) return absl::OkStatus();
  for (int i = 0; i < training_.eval_tasks_size(); ++i) {
    const xmod::v1::EvalTask& task = training_.eval_tasks(i);
    absl::StatusOr<std::vector<TaskExample>> examples =
        ReadTask(task.task(), task.data(), task.labels());
    if (!examples.ok()) {
      return absl::Status(
          examples.status().code(),
          absl::StrCat("training.eval_tasks[", i, "]: ", examples.status().message()));
    }
    eval_tasks_.examples.push_back(*std::move(examples));
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      OpenEvalTokenizer(training_.eval_tokenizer(), options_.spec, accounting_.backbone.vocab_size);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat("training.eval_tokenizer: ", tokenizer.status().message()));
  }
  eval_tasks_.tokenizer = *std::move(tokenizer);
  return absl::OkStatus();
}

absl::Status Run::EvaluateTasks() {
  if (eval_tasks_.tokenizer == nullptr) return absl::OkStatus();
  Scorer scorer(model_, training_.seq_len(), device_, batch_.sequences_per_micro);
  for (int i = 0; i < training_.eval_tasks_size(); ++i) {
    const std::string& task = training_.eval_tasks(i).task();
    absl::StatusOr<xmod::v1::EvalTaskResult> result;
    {
      AutocastGuard autocast(device_.type(), autocast_);
      result = EvaluateTask(task, eval_tasks_.examples[i], *eval_tasks_.tokenizer, scorer);
    }
    if (!result.ok()) return result.status();
    for (const auto& [name, value] : EvalMetrics(*result)) {
      absl::Status status = Metric(name, value);
      if (!status.ok()) return status;
    }
    LOG(INFO) << EvalResultLine(*result);
  }
  return absl::OkStatus();
}

absl::Status Run::CheckRanksInSync() {
  if (world_size_ == 1) return absl::OkStatus();
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : model_->named_parameters(/*recurse=*/true)) {
    named.emplace_back(item.key(), item.value());
  }
  for (const auto& item : model_->named_buffers(/*recurse=*/true)) {
    named.emplace_back(item.key(), item.value());
  }
  return comm_->CheckIdentical(named, absl::StrCat("model tensors after step ", state_.step));
}

absl::Status Run::WriteCheckpoint() {
  if (rank_ != 0 || options_.spec.checkpoint_dir().empty() ||
      last_checkpoint_step_ == state_.step) {
    return absl::OkStatus();
  }
  // Fencing (lease.h): an attempt whose lease lapsed writes nothing; the watchdog ends the
  // process should the lease lapse during the write, before the rename.
  ExitIfLeaseLapsed();
  // The file belongs to this attempt; nothing is deleted here: the worker removes older
  // checkpoints once newer ones are durable in the coordinator's database.
  absl::StatusOr<CheckpointInfo> info = SaveCheckpoint(
      CheckpointPath(options_.spec.checkpoint_dir(), options_.spec.attempt(), state_.step), *model_,
      update_->muon(), update_->adamw(), state_, &options_.spec);
  if (!info.ok()) return info.status();
  last_checkpoint_step_ = state_.step;
  last_checkpoint_ = info->path;
  xmod::v1::TrainerEvent event;
  xmod::v1::TrainerCheckpoint* checkpoint = event.mutable_checkpoint();
  checkpoint->set_step(state_.step);
  checkpoint->set_tokens(state_.tokens);
  checkpoint->set_flops(state_.flops);
  checkpoint->set_path(info->path);
  checkpoint->set_sha256(info->sha256);
  checkpoint->set_bytes(info->bytes);
  absl::Status status = events_.Write(event);
  if (!status.ok()) return status;
  LOG(INFO) << "checkpoint " << info->path << " (" << info->bytes << " bytes)";
  return absl::OkStatus();
}

absl::Status Run::CheckpointOrGoOn() {
  absl::Status status = WriteCheckpoint();
  // A full or failing checkpoint volume (ENOSPC, EIO: files.h) costs the checkpoint, not the
  // run: nothing of it was kept (the file is written beside its path and renamed only when
  // whole) or reported, so a resume starts from the last checkpoint that was, and the next
  // checkpoint is tried on schedule. Anything else ends the run as before.
  if (absl::IsResourceExhausted(status) || absl::IsUnavailable(status)) {
    ++checkpoint_failures_;
    LOG(WARNING) << "checkpoint at step " << state_.step << " not written, training goes on ("
                 << checkpoint_failures_ << " failed so far; the last one written is "
                 << (last_checkpoint_.empty() ? std::string("none") : last_checkpoint_)
                 << "): " << status;
    return absl::OkStatus();
  }
  return status;
}

absl::StatusOr<TrainerResult> Run::Train() {
  const auto begin = std::chrono::steady_clock::now();
  absl::Status status = Setup();
  if (!status.ok()) return status;
  bool preempted = false;
  while (!preempted && state_.step < steps_) {
    absl::StatusOr<bool> stopped = StepAndReport();
    if (!stopped.ok()) return stopped.status();
    preempted = *stopped;
  }

  if (!preempted) {
    status = EvaluateTasks();  // after the final evaluation, before `finished`
    if (!status.ok()) return status;
  }
  const TrainerResult result = Result(preempted, Seconds(std::chrono::steady_clock::now() - begin));
  if (!preempted) {
    status = WriteFinished(result);
    if (!status.ok()) return status;
  }
  return result;
}

absl::StatusOr<bool> Run::StepAndReport() {
  absl::Status status = GuardedStep();
  if (!status.ok()) return status;
  const bool eval_mark = IsEvalMark(state_.step);
  if (eval_mark) {
    status = ReportEvaluation();
    if (!status.ok()) return status;
  }
  // After the evaluation, so a mark's progress carries its validation loss.
  status = MaybeProgress(/*force=*/eval_mark || state_.step == steps_);
  if (!status.ok()) return status;
  const int every = training_.checkpoint_every_steps();
  if (eval_mark || (every > 0 && state_.step % every == 0)) {
    status = CheckpointOrGoOn();
    if (!status.ok()) return status;
  }
  return StopIfRequested();
}

bool Run::IsEvalMark(int64_t step) const {
  const int64_t marks = training_.eval_marks();
  // Mark m (1..marks) falls after step ceil(m * steps / marks); the last one at the end.
  auto mark_of = [&](int64_t n) { return n * marks / steps_; };
  return mark_of(step) > mark_of(step - 1);
}

absl::StatusOr<bool> Run::StopIfRequested() {
  absl::StatusOr<bool> stop = AnyStopRequested();
  if (!stop.ok()) return stop.status();
  if (!*stop) return false;
  absl::Status status = CheckpointOrGoOn();
  if (!status.ok()) return status;
  LOG(INFO) << "stopped at step " << state_.step << " on request";
  return true;
}

absl::Status Run::ReportEvaluation() {
  absl::StatusOr<Evaluation> evaluation = Evaluate();
  if (!evaluation.ok()) return evaluation.status();
  last_val_loss_ = evaluation->loss;
  absl::Status status = CheckRanksInSync();
  if (!status.ok()) return status;
  for (const auto& [name, value] : EvaluationMetrics(*evaluation)) {
    status = Metric(name, value);
    if (!status.ok()) return status;
  }
  LOG(INFO) << absl::StrFormat(
      "step %d: val/loss %.4f%s", state_.step, evaluation->loss,
      routed_ ? absl::StrFormat(" (top-k %.4f)", evaluation->loss_topk) : "");
  return absl::OkStatus();
}

std::vector<std::pair<std::string, double>> Run::EvaluationMetrics(
    const Evaluation& evaluation) const {
  std::vector<std::pair<std::string, double>> metrics = {
      {SeriesName(xmod::v1::SERIES_VAL_LOSS), evaluation.loss},
      {SeriesName(xmod::v1::SERIES_TOKENS_PER_SECOND),
       (state_.tokens - start_.tokens) / TrainSeconds()},
      {SeriesName(xmod::v1::SERIES_FLOPS_PER_SECOND),
       (state_.flops - start_.flops) / TrainSeconds()}};
  if (!evaluation.routing.has_value()) return metrics;
  const RoutingDiagnostics& routing = *evaluation.routing;
  metrics.push_back({SeriesName(xmod::v1::SERIES_VAL_LOSS_TOPK), evaluation.loss_topk});
  metrics.push_back({SeriesName(xmod::v1::SERIES_ROUTE_COVERAGE), routing.coverage});
  metrics.push_back({SeriesName(xmod::v1::SERIES_ROUTE_JACCARD), routing.jaccard});
  metrics.push_back({SeriesName(xmod::v1::SERIES_ROUTE_AGREEMENT), routing.agreement});
  metrics.push_back(
      {SeriesName(xmod::v1::SERIES_ROUTE_AGREEMENT_TOPK_PASS), routing.agreement_topk_pass});
  metrics.push_back(
      {SeriesName(xmod::v1::SERIES_ROUTE_AGREEMENT_PASSES), routing.agreement_passes});
  if (options_.spec.model().k() >= 1 && routing.interval_length >= 1) {
    const int k = options_.spec.model().k(), n = routing.interval_length;
    const ReferenceScheme identical = IdenticalSubsetReference(k, n);
    const ReferenceScheme random = RandomSubsetsReference(k, n);
    metrics.push_back({SeriesName(xmod::v1::SERIES_ROUTE_COVERAGE_IDENTICAL), identical.coverage});
    metrics.push_back({SeriesName(xmod::v1::SERIES_ROUTE_JACCARD_IDENTICAL), identical.jaccard});
    metrics.push_back({SeriesName(xmod::v1::SERIES_ROUTE_COVERAGE_RANDOM), random.coverage});
    metrics.push_back({SeriesName(xmod::v1::SERIES_ROUTE_JACCARD_RANDOM), random.jaccard});
  }
  for (size_t n = 0; n < routing.updates.size(); ++n) {
    metrics.push_back(
        {absl::StrCat(SeriesName(xmod::v1::SERIES_ROUTE_UPDATES_PREFIX), n), routing.updates[n]});
  }
  return metrics;
}

absl::StatusOr<bool> Run::AnyStopRequested() {
  if (state_.step >= steps_) return false;
  // Every rank stops after the same step if any was asked to.
  return comm_->Any(options_.stop_requested != nullptr && options_.stop_requested(state_.step));
}

TrainerResult Run::Result(bool preempted, double seconds) {
  TrainerResult result;
  result.preempted = preempted;
  result.seconds = seconds;
  result.steps = state_.step;
  result.tokens = state_.tokens;
  result.flops = state_.flops;
  result.final_val_loss = last_val_loss_;
  result.tokens_per_second = (state_.tokens - start_.tokens) / TrainSeconds();
  result.achieved_flops_per_second = (state_.flops - start_.flops) / TrainSeconds();
  result.last_checkpoint = last_checkpoint_;
  if (world_size_ > 1) result.parameters_sha256 = ParametersSha256(*model_);
  return result;
}

absl::Status Run::WriteFinished(const TrainerResult& result) {
  xmod::v1::TrainerEvent event;
  xmod::v1::TrainerFinished* finished = event.mutable_finished();
  finished->set_final_val_loss(result.final_val_loss);
  finished->set_steps(result.steps);
  finished->set_flops(result.flops);
  finished->set_seconds(result.seconds);
  finished->set_tokens_per_second(result.tokens_per_second);
  finished->set_achieved_flops_per_second(result.achieved_flops_per_second);
  return events_.Write(event);
}

}  // namespace

absl::StatusOr<TrainerResult> RunTrainer(const TrainerOptions& options) {
  if (options.log_every < 0) return absl::InvalidArgumentError("--log_every: must be >= 0");
  try {
    Run run(options);
    return run.Train();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("LibTorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  }
}

}  // namespace xmod
