// fake_train: a stand-in for xmod-train in worker tests, following the process contract of
// docs/worker-trainer-contract.md through trainer_contract/ (xmod-train's command line, parsed
// by TrainerArgs::Parse; size-delimited TrainerEvents on --events_fd; exit 0 when done, 75 after
// a SIGTERM checkpoint, kExitBadFlags for a command line it cannot parse, a spec it cannot read
// or no --events_fd). It reads --spec (binary only), --events_fd and --resume, and ignores the
// lease (it does not fence itself). What it does is chosen by the environment:
//   FAKE_TRAIN_MODE=ok      started, FAKE_TRAIN_STEPS (default 5) train/loss points,
//                           a checkpoint, finished; exit 0. With FAKE_TRAIN_STEP_MS > 0 each
//                           step takes that long, and a SIGTERM between steps ends the run
//                           as xmod-train's would: a checkpoint of the last step done, exit 75.
//                           With FAKE_TRAIN_EXTRA_METRIC set, each step also logs a point of
//                           that name (value 1) before its train/loss. With
//                           FAKE_TRAIN_RESUME=1 a --resume of a step-<N>.pt checkpoint
//                           continues at step N + 1, as xmod-train's resume would
//   FAKE_TRAIN_MODE=fail    one metric, then "fake_train: boom" on stderr; exit 3
//   FAKE_TRAIN_MODE=term    started, then waits for SIGTERM: checkpoint event, exit 75
//   FAKE_TRAIN_MODE=law     as ok, with train/loss and val/loss at FAKE_TRAIN_STEPS marks
//                           evenly spaced up to the run's flop_budget, drawn from a known
//                           scaling law: dense L(C) = 2 + 40·C^−0.15, an X-MoD run
//                           L(C) + Δ(K, A, L, N_act) of paper Eq. 14 with the parameters
//                           of the JSON file FAKE_TRAIN_LAW (xmod-fit's "params" keys), plus
//                           Gaussian noise of sd FAKE_TRAIN_SIGMA nats (default 0) seeded
//                           by training.seed and the run's configuration
// It prints its arguments and thread variables to stdout (the attempt's log file).
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "common/files.h"
#include "fitter/law.h"
#include "fitter/law_json.h"
#include "fitter/observations.h"
#include "trainer_contract/event_stream.h"
#include "trainer_contract/exit_codes.h"
#include "trainer_contract/series.h"
#include "trainer_contract/trainer_args.h"
#include "trainer_contract/trainer_env.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/trainer.pb.h"

namespace {

volatile sig_atomic_t g_terminate = 0;

void OnTerm(int) { g_terminate = 1; }

xmod::v1::TrainerEvent Metric(int64_t step, const std::string& name, double value) {
  xmod::v1::TrainerEvent event;
  auto* point = event.mutable_metric();
  point->set_step(step);
  point->set_tokens(step * 64);
  point->set_flops(static_cast<double>(step) * 1e6);
  point->set_name(name);
  point->set_value(value);
  return event;
}

// Writes a one-byte checkpoint file (as far as the folder allows) and its event.
xmod::v1::TrainerEvent Checkpoint(int64_t step, const std::string& dir) {
  constexpr char kContents[] = "x";
  xmod::v1::TrainerEvent event;
  auto* cp = event.mutable_checkpoint();
  cp->set_step(step);
  cp->set_tokens(step * 64);
  cp->set_flops(static_cast<double>(step) * 1e6);
  cp->set_path(dir + "/step-" + std::to_string(step) + ".pt");
  if (absl::Status s = xmod::WriteFileAtomic(cp->path(), kContents); !s.ok()) {
    std::fprintf(stderr, "fake_train: %s\n", std::string(s.message()).c_str());
  }
  cp->set_sha256(xmod::Sha256Hex(kContents));
  cp->set_bytes(1);
  return event;
}

// Law mode: the run's Δ from FAKE_TRAIN_LAW (0 for a dense run), with its noise drawn.
absl::StatusOr<double> LawDelta(const xmod::v1::RunSpec& spec) {
  const xmod::v1::ModelSpec& m = spec.model();
  if (m.arch() != xmod::v1::XMOD || m.k() < 2) return 0.0;
  const char* path = std::getenv("FAKE_TRAIN_LAW");
  if (path == nullptr) return absl::InvalidArgumentError("FAKE_TRAIN_LAW: not set");
  absl::StatusOr<std::string> json = xmod::ReadFile(path);
  if (!json.ok()) return json.status();
  absl::StatusOr<xmod::fitter::LawParams> truth = xmod::fitter::LawParamsFromJson(*json);
  if (!truth.ok()) return truth.status();
  absl::StatusOr<xmod::fitter::Observation> at = xmod::fitter::MakeDeltaObservation(
      "fake", m.backbone().name(), spec.training().seq_len(), m.k(), m.a(), 0.0);
  if (!at.ok()) return at.status();
  const char* sigma_env = std::getenv("FAKE_TRAIN_SIGMA");
  const double sigma = sigma_env ? std::atof(sigma_env) : 0.0;
  std::seed_seq seed{static_cast<uint64_t>(spec.training().seed()), static_cast<uint64_t>(m.k()),
                     static_cast<uint64_t>(m.a() * 1000),
                     static_cast<uint64_t>(spec.training().seq_len()),
                     static_cast<uint64_t>(std::hash<std::string>()(m.backbone().name()))};
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, sigma > 0 ? sigma : 1.0);
  return xmod::fitter::PredictDelta(*truth, at->point()) + (sigma > 0 ? noise(rng) : 0.0);
}

// What to do, from the environment (the header comment).
struct Mode {
  std::string name = "ok";             // FAKE_TRAIN_MODE
  int steps = 5;                       // FAKE_TRAIN_STEPS
  int step_ms = 0;                     // FAKE_TRAIN_STEP_MS
  const char* extra_metric = nullptr;  // FAKE_TRAIN_EXTRA_METRIC
  bool resume = false;                 // FAKE_TRAIN_RESUME=1
};

Mode ModeFromEnvironment() {
  Mode mode;
  if (const char* env = std::getenv("FAKE_TRAIN_MODE")) mode.name = env;
  if (const char* env = std::getenv("FAKE_TRAIN_STEPS")) mode.steps = std::atoi(env);
  if (const char* env = std::getenv("FAKE_TRAIN_STEP_MS")) mode.step_ms = std::atoi(env);
  mode.extra_metric = std::getenv("FAKE_TRAIN_EXTRA_METRIC");
  if (const char* env = std::getenv("FAKE_TRAIN_RESUME")) mode.resume = std::string(env) == "1";
  return mode;
}

using Emit = std::function<void(const xmod::v1::TrainerEvent&)>;

// FAKE_TRAIN_MODE=law: points along the known law, a checkpoint at the budget, finished.
int RunLaw(const xmod::v1::RunSpec& spec, const Mode& mode, const Emit& emit) {
  absl::StatusOr<double> delta = LawDelta(spec);
  if (!delta.ok()) {
    std::fprintf(stderr, "fake_train: %s\n", std::string(delta.status().message()).c_str());
    return xmod::kExitInvalidConfig;
  }
  const double budget = spec.training().flop_budget();
  double loss = 0;
  for (int step = 1; step <= mode.steps; ++step) {
    if (mode.step_ms > 0) usleep(mode.step_ms * 1000);
    const double flops = budget * step / mode.steps;
    loss = 2 + 40 * std::pow(flops, -0.15) + *delta;
    for (xmod::v1::Series series : {xmod::v1::SERIES_TRAIN_LOSS, xmod::v1::SERIES_VAL_LOSS}) {
      xmod::v1::TrainerEvent event = Metric(step, xmod::SeriesName(series), loss);
      event.mutable_metric()->set_flops(flops);
      emit(event);
    }
  }
  xmod::v1::TrainerEvent checkpoint = Checkpoint(mode.steps, spec.checkpoint_dir());
  checkpoint.mutable_checkpoint()->set_flops(budget);
  emit(checkpoint);
  xmod::v1::TrainerEvent finished;
  finished.mutable_finished()->set_steps(mode.steps);
  finished.mutable_finished()->set_flops(budget);
  finished.mutable_finished()->set_final_val_loss(loss);
  emit(finished);
  return xmod::kExitOk;
}

// The step of a checkpoint this program wrote (".../step-<N>.pt"); 0 for another path.
int64_t CheckpointStep(const std::string& path) {
  const size_t at = path.rfind("/step-");
  return at == std::string::npos ? 0 : std::atoll(path.c_str() + at + 6);
}

// FAKE_TRAIN_MODE=ok: the steps after `resumed` (stopping at a SIGTERM between them), a
// checkpoint, finished.
int RunSteps(const xmod::v1::RunSpec& spec, const Mode& mode, int64_t resumed, const Emit& emit) {
  for (int step = static_cast<int>(resumed) + 1; step <= mode.steps; ++step) {
    if (mode.step_ms > 0) {
      usleep(mode.step_ms * 1000);
      if (g_terminate) {
        if (step - 1 > resumed) emit(Checkpoint(step - 1, spec.checkpoint_dir()));
        return xmod::kExitPreempted;
      }
    }
    if (mode.extra_metric != nullptr) emit(Metric(step, mode.extra_metric, 1.0));
    emit(Metric(step, xmod::SeriesName(xmod::v1::SERIES_TRAIN_LOSS), 5.0 / step));
  }
  emit(Checkpoint(mode.steps, spec.checkpoint_dir()));
  xmod::v1::TrainerEvent finished;
  finished.mutable_finished()->set_steps(mode.steps);
  finished.mutable_finished()->set_final_val_loss(1.0);
  emit(finished);
  return xmod::kExitOk;
}

// Prints the arguments and the thread variable to stdout (the attempt's log file).
void PrintInvocation(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) std::printf("%s%s", i ? " " : "", argv[i]);
  const char* omp = std::getenv(xmod::kEnvOmpNumThreads);
  std::printf("\n%s=%s\n", xmod::kEnvOmpNumThreads, omp ? omp : "");
  std::fflush(stdout);
}

// Emits the started event; the step a FAKE_TRAIN_RESUME run continues after (0 otherwise).
int64_t EmitStarted(const xmod::TrainerArgs& args, const Mode& mode, const Emit& emit) {
  const int64_t resumed =
      mode.resume && !args.resume.empty() ? CheckpointStep(args.resume.front()) : 0;
  xmod::v1::TrainerEvent started;
  started.mutable_started()->set_resumed_from_step(
      args.resume.empty() ? 0 : (mode.resume ? resumed : 1));
  started.mutable_started()->set_steps_planned(mode.steps);
  emit(started);
  return resumed;
}

// Runs FAKE_TRAIN_MODE's events after the started one; the exit code.
int RunMode(const xmod::v1::RunSpec& spec, const Mode& mode, int64_t resumed, const Emit& emit) {
  if (mode.name == "fail") {
    emit(Metric(1, xmod::SeriesName(xmod::v1::SERIES_TRAIN_LOSS), 5.0));
    std::fprintf(stderr, "fake_train: step 1\nfake_train: boom\n");
    return xmod::kExitInvalidConfig;
  }
  if (mode.name == "term") {
    while (!g_terminate) usleep(5'000);
    emit(Checkpoint(1, spec.checkpoint_dir()));
    return xmod::kExitPreempted;
  }
  if (mode.name == "law") return RunLaw(spec, mode, emit);
  return RunSteps(spec, mode, resumed, emit);
}

}  // namespace

int main(int argc, char** argv) {
  PrintInvocation(argc, argv);
  const xmod::ParsedTrainerArgs parsed = xmod::TrainerArgs::Parse(argc, argv, "fake_train");
  if (!parsed.args.has_value()) return parsed.exit_code;
  const xmod::TrainerArgs& args = *parsed.args;
  xmod::v1::RunSpec spec;
  auto bytes = xmod::ReadFile(args.spec);
  if (!bytes.ok() || !spec.ParseFromString(*bytes) || args.events_fd < 0) {
    std::fprintf(stderr, "fake_train: bad --spec or --events_fd\n");
    return xmod::kExitBadFlags;
  }
  xmod::EventWriter events(args.events_fd);
  const Emit emit = [&events](const xmod::v1::TrainerEvent& event) { (void)events.Write(event); };
  signal(SIGTERM, OnTerm);
  const Mode mode = ModeFromEnvironment();
  const int64_t resumed = EmitStarted(args, mode, emit);
  return RunMode(spec, mode, resumed, emit);
}
