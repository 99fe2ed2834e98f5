#include "tests/integration/cluster.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "data/shard.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

// The integer value of "key": N in a one-line JSON object; 0 when absent.
int JsonInt(const std::string& json, const std::string& key) {
  std::smatch match;
  if (std::regex_search(json, match, std::regex("\"" + key + "\"\\s*:\\s*([0-9]+)"))) {
    return std::stoi(match[1]);
  }
  return 0;
}

// Kills and reaps every remaining child of this process (orphaned trainers included).
void KillOrphans() {
  const pid_t self = getpid();
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(atoi(entry->d_name));
    if (pid <= 0) continue;
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (sscanf(line.c_str() + paren + 1, " %c %d", &state, &ppid) != 2) continue;
    if (ppid == self) kill(pid, SIGKILL);
  }
  closedir(proc);
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

// The workers' stop bounds: a trainer gets kWorkerKillGraceMs to checkpoint after SIGTERM,
// then the worker gets kWorkerDrainTimeoutMs to deliver its reports (one RPC may take up to
// 10 s more) before it keeps them in its spill and exits.
constexpr int kWorkerKillGraceMs = 20000;
constexpr int kWorkerDrainTimeoutMs = 5000;

// How long Stop() lets a process drain after SIGTERM before it SIGKILLs it: longer than a
// worker's whole stop bound, so that a trainer's last checkpoint is reported or kept.
constexpr absl::Duration kStopGrace =
    absl::Milliseconds(kWorkerKillGraceMs + kWorkerDrainTimeoutMs + 15000);

// SIGTERMs every process of `children`, waits until all have exited or `grace` has passed,
// then SIGKILLs and reaps the rest: never blocks much longer than `grace`.
void StopWithin(const std::vector<ChildProcess*>& children, absl::Duration grace) {
  for (ChildProcess* child : children) child->Signal(SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  for (ChildProcess* child : children) {
    while (!child->Poll().has_value() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    if (!child->Poll().has_value()) child->Signal(SIGKILL);
    child->Wait();
  }
}

}  // namespace

std::string BinaryPath(const std::string& name, const char* override_env) {
  if (const char* path = getenv(override_env); path != nullptr && *path != '\0') return path;
  const char* dir = getenv("XMOD_BIN_DIR");
  return absl::StrCat(dir != nullptr ? dir : ".", "/", name);
}

absl::Status WriteLearnableShard(const std::string& path, int64_t tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> coin(0, 9);
  std::uniform_int_distribution<int> any(0, 60);
  std::vector<uint16_t> data(tokens);
  int t = any(rng);
  for (int64_t i = 0; i < tokens; ++i) {
    t = coin(rng) == 0 ? any(rng) : (5 * t + 3) % 61;
    data[i] = static_cast<uint16_t>(t);
  }
  return WriteShard(path, data);
}

Cluster::Cluster() : launcher_(NewPosixLauncher()) {
  // Trainers orphaned by a killed worker become our children, so they can be cleaned up.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  char tmpl[] = "/tmp/xmod_cluster_XXXXXX";
  dir_ = mkdtemp(tmpl);
  db_path_ = dir_ + "/xmod.db";
}

Cluster::~Cluster() {
  workers_.clear();  // each ChildProcess SIGKILLs its process group
  coordinator_.reset();
  KillOrphans();
  if (getenv("XMOD_KEEP_TEST_DIR") == nullptr) {
    int ignored = system(("rm -rf " + dir_).c_str());
    (void)ignored;
  }
}

absl::StatusOr<std::unique_ptr<ChildProcess>> Cluster::Launch(const std::string& name,
                                                              std::vector<std::string> argv) {
  LaunchOptions options;
  options.argv = std::move(argv);
  options.log_path = absl::StrCat(dir_, "/", name, ".log");
  logs_.push_back(options.log_path);
  return launcher_->Start(options);
}

std::string Cluster::TokenOf(const std::string& name) {
  return absl::StrCat(name, "-secret-token-0123");
}

std::string Cluster::TokenFile(const std::string& name) const {
  return absl::StrCat(dir_, "/", name, ".token");
}

absl::Status Cluster::WriteCredentials(const std::vector<std::string>& entries) {
  std::string lines;
  for (const std::string& entry : entries) {
    const std::string name = entry.substr(entry.find(' ') + 1);
    absl::StrAppend(&lines, entry, " ", TokenOf(name), "\n");
    if (absl::Status s = WriteFileAtomic(TokenFile(name), TokenOf(name)); !s.ok()) return s;
  }
  const std::string path = dir_ + "/credentials";
  if (absl::Status s = WriteFileAtomic(path, lines); !s.ok()) return s;
  chmod(path.c_str(), 0600);
  return absl::OkStatus();
}

v1::SweepSpec Cluster::TinyDenseSweep(const std::string& name, int runs, const std::string& data) {
  v1::SweepSpec spec;
  spec.set_name(name);
  v1::GridSpec* grid = spec.add_grids();
  grid->set_label(name);
  grid->add_archs(v1::DENSE);
  grid->add_backbones("tiny-test");
  grid->add_seq_lens(64);
  grid->add_ks(1);
  grid->add_as(1);
  for (int seed = 1; seed <= runs; ++seed) grid->add_seeds(seed);
  spec.mutable_training()->set_flop_budget(1e12);
  spec.mutable_training()->set_seq_len(64);
  spec.mutable_training()->set_batch_tokens(512);
  spec.mutable_data()->set_train_glob(data);
  spec.mutable_data()->set_val_glob(data);
  return spec;
}

v1::SubmitSweepResponse Cluster::SubmitAs(const std::string& user, const v1::SweepSpec& spec) {
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = spec;
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer " + TokenOf(user));
  v1::SubmitSweepResponse response;
  grpc::Status status = stub_->SubmitSweep(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

void Cluster::UseFakeTrainer(const std::string& fake_train, int steps, int step_ms) {
  setenv("XMOD_TRAIN_BIN", fake_train.c_str(), 1);
  setenv("FAKE_TRAIN_MODE", "ok", 1);
  setenv("FAKE_TRAIN_RESUME", "1", 1);
  setenv("FAKE_TRAIN_STEPS", std::to_string(steps).c_str(), 1);
  setenv("FAKE_TRAIN_STEP_MS", std::to_string(step_ms).c_str(), 1);
}

absl::StatusOr<Cluster::CommandResult> Cluster::RunCommand(
    const std::string& name, std::vector<std::string> argv,
    const std::vector<std::pair<std::string, std::string>>& env, absl::Duration timeout) {
  LaunchOptions options;
  options.argv = std::move(argv);
  options.env = env;
  options.log_path = absl::StrCat(dir_, "/", name, ".log");
  std::remove(options.log_path.c_str());  // only this run's output
  logs_.push_back(options.log_path);
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = launcher_->Start(options);
  if (!child.ok()) return child.status();
  const absl::Time deadline = absl::Now() + timeout;
  std::optional<ExitStatus> exit;
  while (!(exit = (*child)->Poll()).has_value()) {
    if (absl::Now() > deadline) {
      (*child)->Signal(SIGKILL);
      (*child)->Wait();
      return absl::DeadlineExceededError(
          absl::StrCat(name, " ran past ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  absl::StatusOr<std::string> output = ReadFile(options.log_path);
  return CommandResult{*exit, output.ok() ? *std::move(output) : ""};
}

absl::Status Cluster::StartCoordinator(const std::vector<std::string>& extra_flags) {
  const std::string ports_file = dir_ + "/ports.json";
  std::remove(ports_file.c_str());  // left by an earlier start
  std::vector<std::string> argv = {BinaryPath("xmod-coordinator", "XMOD_COORDINATOR_BIN"),
                                   absl::StrCat("--listen=127.0.0.1:", grpc_port_),
                                   "--http_listen=127.0.0.1:0",
                                   "--metrics_listen=127.0.0.1:0",
                                   "--db=" + db_path_,
                                   "--checkpoint_root=" + dir_ + "/checkpoints",
                                   "--data_root=" + dir_,
                                   "--ports_file=" + ports_file};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = Launch("coordinator", argv);
  if (!child.ok()) return child.status();
  coordinator_ = *std::move(child);
  // Bounded wait for the ports file (written atomically once every listener is up).
  int port = 0;
  for (int i = 0; i < 600; ++i) {
    absl::StatusOr<std::string> ports = ReadFile(ports_file);
    if (ports.ok() && (port = JsonInt(*ports, "grpc")) > 0) break;
    if (coordinator_->Poll().has_value()) {
      return absl::InternalError("xmod-coordinator exited early:\n" + Logs());
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (port == 0) return absl::DeadlineExceededError("no ports file from xmod-coordinator");
  grpc_port_ = port;
  stub_ = v1::Coordinator::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port_),
                                                       grpc::InsecureChannelCredentials()));
  return absl::OkStatus();
}

absl::StatusOr<int> Cluster::CoordinatorPort(const std::string& listener) const {
  absl::StatusOr<std::string> ports = ReadFile(dir_ + "/ports.json");
  if (!ports.ok()) return ports.status();
  return JsonInt(*ports, listener);
}

absl::Status Cluster::StartWorker(const std::string& name, int cpu_slots,
                                  const std::vector<std::string>& extra_flags) {
  const std::string work_dir = absl::StrCat(dir_, "/", name);
  if (absl::Status status = MakeDirs(work_dir); !status.ok()) return status;
  std::vector<std::string> argv = {BinaryPath("xmod-worker", "XMOD_WORKER_BIN"),
                                   absl::StrCat("--coordinator=127.0.0.1:", grpc_port_),
                                   "--name=" + name,
                                   "--work_dir=" + work_dir,
                                   "--train_bin=" + BinaryPath("xmod-train", "XMOD_TRAIN_BIN"),
                                   absl::StrCat("--cpu_slots=", cpu_slots),
                                   "--cores_per_slot=1",
                                   "--gpus=false",
                                   "--metrics_listen=127.0.0.1:0",
                                   "--acquire_wait_ms=1000",
                                   absl::StrCat("--kill_grace_ms=", kWorkerKillGraceMs)};
  const bool drain_given = std::any_of(
      extra_flags.begin(), extra_flags.end(),
      [](const std::string& flag) { return absl::StartsWith(flag, "--drain_timeout_ms"); });
  if (!drain_given) argv.push_back(absl::StrCat("--drain_timeout_ms=", kWorkerDrainTimeoutMs));
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = Launch(name, argv);
  if (!child.ok()) return child.status();
  workers_[name] = *std::move(child);
  return absl::OkStatus();
}

absl::Status Cluster::KillWorker(const std::string& name) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return absl::NotFoundError(name);
  kill(it->second->pid(), SIGKILL);  // the worker only, not its trainer's process group
  it->second->Wait();
  return absl::OkStatus();
}

absl::StatusOr<ExitStatus> Cluster::WaitForWorkerExit(const std::string& name,
                                                      absl::Duration timeout) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return absl::NotFoundError(name);
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (std::optional<ExitStatus> exit = it->second->Poll()) return *exit;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("worker ", name, " still running after ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

void Cluster::KillCoordinator() {
  if (coordinator_ == nullptr) return;
  coordinator_->Signal(SIGKILL);
  coordinator_->Wait();
}

absl::Status Cluster::SignalWorker(const std::string& name, int signal) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return absl::NotFoundError(name);
  if (kill(it->second->pid(), signal) != 0) return absl::InternalError("kill failed");
  return absl::OkStatus();
}

void Cluster::Stop() {
  std::vector<ChildProcess*> workers;
  for (auto& [name, worker] : workers_) workers.push_back(worker.get());
  StopWithin(workers, kStopGrace);  // first: they drain to the coordinator
  if (coordinator_ != nullptr) StopWithin({coordinator_.get()}, kStopGrace);
}

absl::StatusOr<v1::QueryResponse> Cluster::Query(const std::string& sql) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::QueryRequest request;
  request.set_sql(sql);
  v1::QueryResponse response;
  grpc::Status status = stub_->Query(&context, request, &response);
  if (!status.ok())
    return absl::Status(absl::StatusCode(status.error_code()), status.error_message());
  return response;
}

absl::StatusOr<v1::Sweep> Cluster::WaitForSweep(int64_t sweep_id, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GetSweepRequest request;
    request.set_sweep_id(sweep_id);
    v1::Sweep sweep;
    grpc::Status status = stub_->GetSweep(&context, request, &sweep);
    if (status.ok() && sweep.state() != v1::SWEEP_ACTIVE &&
        sweep.state() != v1::SWEEP_STATE_UNSPECIFIED) {
      return sweep;
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("sweep ", sweep_id, " still active: ", sweep.ShortDebugString()));
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
}

std::string Cluster::Logs() const {
  std::string text;
  for (const std::string& path : logs_) {
    absl::StatusOr<std::string> log = ReadFile(path);
    if (!log.ok()) continue;
    const size_t keep = 3000;
    absl::StrAppend(&text, "==== ", path, " (tail) ====\n",
                    log->size() > keep ? log->substr(log->size() - keep) : *log, "\n");
  }
  return text;
}

}  // namespace xmod
