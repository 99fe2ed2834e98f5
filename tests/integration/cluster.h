// A one-machine xmod cluster for cross-process tests: the real xmod-coordinator and
// xmod-worker binaries (and, through the workers, xmod-train) started as processes on
// loopback, with ports picked by the coordinator (port 0 + --ports_file), in a temporary
// folder. Binaries come from $XMOD_BIN_DIR; $XMOD_COORDINATOR_BIN, $XMOD_WORKER_BIN and
// $XMOD_TRAIN_BIN override single ones. Everything started is killed when the cluster ends,
// including trainers orphaned by a killed worker (the test process is their subreaper).
//
// Thread-safety: none; one test thread drives a cluster.
#ifndef XMOD_TESTS_INTEGRATION_CLUSTER_H_
#define XMOD_TESTS_INTEGRATION_CLUSTER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/process_supervisor.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod {

// The path of binary `name`: $<override_env> if set, else $XMOD_BIN_DIR/name.
std::string BinaryPath(const std::string& name, const char* override_env);

// Writes `tokens` tokens of a learnable stream over a small vocabulary: a deterministic
// successor rule (t -> (5t + 3) mod 61) with 10% random tokens, so both the unigram and the
// bigram entropy are far below ln(vocab). Seeded, reproducible.
absl::Status WriteLearnableShard(const std::string& path, int64_t tokens, uint32_t seed);

class Cluster {
 public:
  // Makes a temporary folder; starts nothing.
  Cluster();
  ~Cluster();

  const std::string& dir() const { return dir_; }
  const std::string& db_path() const { return db_path_; }

  // Starts xmod-coordinator with `extra_flags` and waits for its ports file. A restart
  // (after KillCoordinator) listens on the gRPC port of the first start and opens the same
  // database, so running workers reconnect to it.
  absl::Status StartCoordinator(const std::vector<std::string>& extra_flags);
  // The port of the running coordinator's listener `listener` ("grpc", "http", "metrics",
  // "health") from its ports file; 0 for a disabled listener.
  absl::StatusOr<int> CoordinatorPort(const std::string& listener) const;
  // SIGKILLs the coordinator and reaps it.
  void KillCoordinator();
  // The process id of the coordinator last started (0 before the first start).
  int coordinator_pid() const { return coordinator_ == nullptr ? 0 : coordinator_->pid(); }
  // Starts a worker named `name` with `cpu_slots` 1-core CPU slots and `extra_flags`; its
  // work dir is dir()/name.
  absl::Status StartWorker(const std::string& name, int cpu_slots = 1,
                           const std::vector<std::string>& extra_flags = {});
  // SIGKILLs the worker process itself (its trainer is left orphaned, as on a lost machine).
  // StartWorker with the same name starts it again.
  absl::Status KillWorker(const std::string& name);
  // Sends `signal` (e.g. SIGSTOP, SIGCONT) to the worker process itself.
  absl::Status SignalWorker(const std::string& name, int signal);
  // Waits up to `timeout` for the worker to exit; DEADLINE_EXCEEDED if it is still running.
  absl::StatusOr<ExitStatus> WaitForWorkerExit(const std::string& name, absl::Duration timeout);
  // SIGTERMs every worker and waits for them to exit, then the coordinator; a process still
  // running past a worker's whole stop bound (kill grace + drain timeout + one RPC) after
  // its SIGTERM is SIGKILLed, so Stop() never hangs.
  void Stop();

  v1::Coordinator::Stub& stub() { return *stub_; }
  // Runs a read-only SQL query through the Coordinator API.
  absl::StatusOr<v1::QueryResponse> Query(const std::string& sql);
  // Polls GetSweep until the sweep is no longer active; the final state.
  absl::StatusOr<v1::Sweep> WaitForSweep(int64_t sweep_id, absl::Duration timeout);
  // The log files of every process started, for failure messages.
  std::string Logs() const;

  // Credentials for a test (docs/security.md): the bearer token of credential `name`, and the
  // file WriteCredentials puts it in.
  static std::string TokenOf(const std::string& name);
  std::string TokenFile(const std::string& name) const;
  // Writes dir()/credentials (mode 600), one credential per "SCOPE NAME" entry with
  // TokenOf(NAME) as its secret, and each token into TokenFile(NAME); the coordinator reads it
  // with CredentialsFlag().
  absl::Status WriteCredentials(const std::vector<std::string>& entries);
  std::string CredentialsFlag() const { return "--credentials_file=" + dir_ + "/credentials"; }
  // A sweep `name` of `runs` replicates (seeds 1..runs) of one tiny Dense run (tiny-test, L =
  // 64, 512 tokens a step, 1e12 FLOPs) reading `data`, as the fake trainer's tests submit it.
  static v1::SweepSpec TinyDenseSweep(const std::string& name, int runs, const std::string& data);
  // SubmitSweep of `spec` with credential `user`'s token: the response (a failure is a test
  // failure).
  v1::SubmitSweepResponse SubmitAs(const std::string& user, const v1::SweepSpec& spec);
  // worker/fake_train (XMOD_FAKE_TRAIN) as the workers' trainer: `steps` steps of `step_ms`,
  // a train/loss point of 5/step each, resuming after the checkpoint it resumes from.
  static void UseFakeTrainer(const std::string& fake_train, int steps, int step_ms);

  // A one-shot command (xmodctl, a coordinator's --restore_from) run to its end with `env`
  // added, its output in dir()/NAME.log: how it ended and what it printed. SIGKILLed, and
  // DEADLINE_EXCEEDED, past `timeout`.
  struct CommandResult {
    ExitStatus exit;
    std::string output;
  };
  absl::StatusOr<CommandResult> RunCommand(
      const std::string& name, std::vector<std::string> argv,
      const std::vector<std::pair<std::string, std::string>>& env = {},
      absl::Duration timeout = absl::Minutes(2));

 private:
  absl::StatusOr<std::unique_ptr<ChildProcess>> Launch(const std::string& name,
                                                       std::vector<std::string> argv);

  std::string dir_;
  std::string db_path_;
  std::unique_ptr<ProcessLauncher> launcher_;
  std::unique_ptr<ChildProcess> coordinator_;
  std::map<std::string, std::unique_ptr<ChildProcess>> workers_;
  std::vector<std::string> logs_;
  int grpc_port_ = 0;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

}  // namespace xmod

#endif  // XMOD_TESTS_INTEGRATION_CLUSTER_H_
