// fake_train: a stand-in for xmod-train in worker tests, following the process contract of
// docs/design.md, "Process contract" (`--spec FILE --events_fd N [--threads T] [--resume PATH]`,
// size-delimited TrainerEvents on fd N, exit 0 when done, 75 after a SIGTERM checkpoint). What it
// does is chosen by the environment:
//   FAKE_TRAIN_MODE=ok      started, FAKE_TRAIN_STEPS (default 5) train/loss points,
//                           a checkpoint, finished; exit 0
//   FAKE_TRAIN_MODE=fail    one metric, then "fake_train: boom" on stderr; exit 3
//   FAKE_TRAIN_MODE=term    started, then waits for SIGTERM: checkpoint event, exit 75
// It prints its arguments and thread variables to stdout (the attempt's log file).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/files.h"
#include "google/protobuf/util/delimited_message_util.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/trainer.pb.h"

namespace {

volatile sig_atomic_t g_terminate = 0;

void OnTerm(int) { g_terminate = 1; }

bool Emit(int fd, const xmod::v1::TrainerEvent& event) {
  return google::protobuf::util::SerializeDelimitedToFileDescriptor(event, fd);
}

xmod::v1::TrainerEvent Metric(int64_t step, const char* name, double value) {
  xmod::v1::TrainerEvent event;
  auto* point = event.mutable_metric();
  point->set_step(step);
  point->set_tokens(step * 64);
  point->set_flops(static_cast<double>(step) * 1e6);
  point->set_name(name);
  point->set_value(value);
  return event;
}

xmod::v1::TrainerEvent Checkpoint(int64_t step, const std::string& dir) {
  xmod::v1::TrainerEvent event;
  auto* cp = event.mutable_checkpoint();
  cp->set_step(step);
  cp->set_tokens(step * 64);
  cp->set_flops(static_cast<double>(step) * 1e6);
  cp->set_path(dir + "/step-" + std::to_string(step) + ".pt");
  cp->set_bytes(1);
  return event;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec_path;
  std::string resume;
  int fd = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--spec") spec_path = argv[i + 1];
    if (flag == "--events_fd") fd = std::atoi(argv[i + 1]);
    if (flag == "--resume") resume = argv[i + 1];
  }
  for (int i = 0; i < argc; ++i) std::printf("%s%s", i ? " " : "", argv[i]);
  const char* omp = std::getenv("OMP_NUM_THREADS");
  std::printf("\nOMP_NUM_THREADS=%s\n", omp ? omp : "");
  std::fflush(stdout);

  xmod::v1::RunSpec spec;
  auto bytes = xmod::ReadFile(spec_path);
  if (!bytes.ok() || !spec.ParseFromString(*bytes) || fd < 0) {
    std::fprintf(stderr, "fake_train: bad --spec or --events_fd\n");
    return 2;
  }
  signal(SIGTERM, OnTerm);
  const char* mode_env = std::getenv("FAKE_TRAIN_MODE");
  const std::string mode = mode_env ? mode_env : "ok";
  const char* steps_env = std::getenv("FAKE_TRAIN_STEPS");
  const int steps = steps_env ? std::atoi(steps_env) : 5;

  xmod::v1::TrainerEvent started;
  started.mutable_started()->set_resumed_from_step(resume.empty() ? 0 : 1);
  started.mutable_started()->set_steps_planned(steps);
  Emit(fd, started);

  if (mode == "fail") {
    Emit(fd, Metric(1, "train/loss", 5.0));
    std::fprintf(stderr, "fake_train: step 1\nfake_train: boom\n");
    return 3;
  }
  if (mode == "term") {
    while (!g_terminate) usleep(5'000);
    Emit(fd, Checkpoint(1, spec.checkpoint_dir()));
    return 75;
  }
  for (int step = 1; step <= steps; ++step) {
    Emit(fd, Metric(step, "train/loss", 5.0 / step));
  }
  Emit(fd, Checkpoint(steps, spec.checkpoint_dir()));
  xmod::v1::TrainerEvent finished;
  finished.mutable_finished()->set_steps(steps);
  finished.mutable_finished()->set_final_val_loss(1.0);
  Emit(fd, finished);
  return 0;
}
