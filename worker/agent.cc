#include "worker/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "glog/logging.h"
#include "trainer_contract/exit_codes.h"
#include "trainer_contract/trainer_args.h"
#include "trainer_contract/trainer_env.h"
#include "worker/rank_group.h"

namespace xmod {
namespace {

// A lexically normal form of `path` without a trailing '/'.
std::filesystem::path Normal(const std::string& path) {
  std::filesystem::path normal = std::filesystem::path(path).lexically_normal();
  return normal.has_filename() ? normal : normal.parent_path();
}

// Deletes the checkpoint `path` and its sidecar, which must be direct children of `dir`
// (lexically): the name is unlinked relative to `dir` opened without following a symlink
// (O_NOFOLLOW), and unlinkat never follows one in the name, so swapping a component for a
// symlink at any moment cannot make it delete anything outside `dir`. INVALID_ARGUMENT,
// deleting nothing, for a path elsewhere or a `dir` that is a symlink.
absl::Status RemoveInside(const std::string& path, const std::string& dir) {
  const std::filesystem::path file = Normal(path);
  const std::string name = file.filename().string();
  if (file.parent_path() != Normal(dir) || name.empty() || name == "." || name == ".." ||
      name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("path: ", path, " is not a file directly inside ", dir));
  }
  const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("path: cannot open ", dir, " (a folder, not a symlink): ", strerror(errno)));
  }
  absl::Status status;
  for (const std::string& entry : {name, name + ".sha256"}) {
    if (unlinkat(dir_fd, entry.c_str(), 0) != 0 && errno != ENOENT) {
      status.Update(absl::InternalError(
          absl::StrCat("cannot delete ", dir, "/", entry, ": ", strerror(errno))));
    }
  }
  close(dir_fd);
  return status;
}

// An attempt held only for its reports whose reports the coordinator has answered with
// errors to retry, and nothing else, for this many lease TTLs is no longer listed in
// heartbeats (MetricRelay::attempts_to_hold).
constexpr int64_t kHoldStuckReportsLeaseTtls = 3;

const char* OutcomeName(v1::Outcome outcome) {
  switch (outcome) {
    case v1::OUTCOME_SUCCEEDED:
      return "SUCCEEDED";
    case v1::OUTCOME_FAILED:
      return "FAILED";
    case v1::OUTCOME_CANCELLED:
      return "CANCELLED";
    case v1::OUTCOME_PREEMPTED:
      return "PREEMPTED";
    default:
      return "UNSPECIFIED";
  }
}

MetricRelayOptions RelayOptions(const AgentOptions& options) {
  MetricRelayOptions relay = options.relay;
  if (relay.spill_dir.empty()) relay.spill_dir = options.work_dir + "/spill";
  return relay;
}

}  // namespace

Agent::Agent(AgentOptions options, GatewayClient* gateway, ProcessLauncher* launcher,
             DeviceProbe* probe, Clock* clock, WorkerMetrics* metrics)
    : options_(std::move(options)),
      gateway_(gateway),
      launcher_(launcher),
      probe_(probe),
      clock_(clock),
      metrics_(metrics),
      relay_(gateway, clock, RelayOptions(options_), metrics) {
  relay_.set_stale_callback(
      [this](AttemptKey key, const std::string& refusal) { OnStale(key, refusal); });
}

Agent::~Agent() {
  Drain();
  Abandon();
  Wait();
  JoinFinishedThreads();
}

absl::Status Agent::Register() {
  if (slots_.empty()) {
    absl::StatusOr<std::vector<v1::Slot>> slots = probe_->Probe();
    if (!slots.ok()) return slots.status();
    if (slots->empty()) return absl::FailedPreconditionError("device probe found no slots");
    slots_ = *std::move(slots);
    absl::MutexLock lock(&mu_);
    busy_.assign(slots_.size(), false);
    UpdateSlotGaugesLocked();
  }
  while (true) {
    absl::Status status = RegisterOnce();
    if (status.ok()) return status;
    LOG(WARNING) << "Register failed, retrying: " << status;
    if (drain_.WaitForNotificationWithTimeout(absl::Milliseconds(options_.retry_delay_ms))) {
      return absl::CancelledError("drained before registering");
    }
  }
}

absl::Status Agent::RegisterOnce() {
  v1::RegisterRequest request;
  request.set_worker_name(options_.worker_name);
  request.set_hostname(options_.hostname);
  request.set_version(options_.version);
  request.set_advertise_host(options_.advertise_host);
  request.set_rendezvous_port_first(options_.rendezvous_port_first);
  request.set_rendezvous_port_last(options_.rendezvous_port_last);
  for (const v1::Slot& slot : slots_) *request.add_slots() = slot;
  absl::StatusOr<v1::RegisterResponse> reply = gateway_->Register(request);
  if (!reply.ok()) return reply.status();
  relay_.set_worker_id(reply->worker_id());
  absl::MutexLock lock(&mu_);
  worker_id_ = reply->worker_id();
  if (reply->heartbeat_interval_ms() > 0) heartbeat_interval_ms_ = reply->heartbeat_interval_ms();
  if (reply->lease_ttl_ms() > 0) lease_ttl_ms_ = reply->lease_ttl_ms();
  LOG(INFO) << "registered as worker " << worker_id_ << " with " << slots_.size()
            << " slots; heartbeat every " << heartbeat_interval_ms_ << " ms";
  return absl::OkStatus();
}

void Agent::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  acquire_thread_ = std::thread([this] { AcquireLoop(); });
  relay_thread_ = std::thread([this] { relay_.RunPumpLoop(&shutdown_); });
}

void Agent::Drain() {
  absl::MutexLock lock(&mu_);
  if (draining_) return;
  draining_ = true;
  drain_.Notify();
  LOG(INFO) << "draining: preempting " << attempts_.size() << " attempts";
  for (auto& [key, attempt] : attempts_) StopLocked(*attempt, v1::OUTCOME_PREEMPTED);
}

void Agent::Abandon() {
  if (!abandon_.HasBeenNotified()) abandon_.Notify();
  relay_.Interrupt();
}

void Agent::Wait() {
  drain_.WaitForNotification();
  if (acquire_thread_.joinable()) acquire_thread_.join();
  {
    // The trainers stop first, each within kill_grace_ms (the heartbeat thread enforces it).
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::map<AttemptKey, std::unique_ptr<Attempt>>* attempts) {
          return std::all_of(attempts->begin(), attempts->end(),
                             [](const auto& entry) { return entry.second->exited; });
        },
        &attempts_));
  }
  // Then their reports have drain_timeout_ms to reach the coordinator (if anything sends).
  bool started;
  {
    absl::MutexLock lock(&mu_);
    started = started_;
  }
  if (!started) {
    Abandon();
  } else if (!relay_.WaitIdle(clock_->MonotonicMillis() + options_.drain_timeout_ms, &abandon_)) {
    LOG(WARNING) << "drain: reports still undelivered after " << options_.drain_timeout_ms
                 << " ms; keeping them for the next start";
    Abandon();
  }
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::map<AttemptKey, std::unique_ptr<Attempt>>* attempts) { return attempts->empty(); },
        &attempts_));
  }
  if (!shutdown_.HasBeenNotified()) shutdown_.Notify();
  relay_.Interrupt();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  if (relay_thread_.joinable()) relay_thread_.join();
  JoinFinishedThreads();
  relay_.Keep();
}

int64_t Agent::LeaseDeadline(int64_t sent_ms, int64_t ttl_ms) const {
  return sent_ms + ttl_ms - std::min<int64_t>(1000, ttl_ms / 10);
}

absl::Status Agent::HeartbeatOnce() {
  v1::HeartbeatRequest request;
  // Read before the request leaves: the renewal happens later, so the lease lasts longer.
  const int64_t sent = clock_->MonotonicMillis();
  {
    absl::MutexLock lock(&mu_);
    request.set_worker_id(worker_id_);
    for (const auto& [key, attempt] : attempts_) {
      v1::RunningAttempt* running = request.add_running();
      running->set_run_id(key.run_id);
      running->set_attempt(key.attempt);
      *running->mutable_progress() = attempt->progress;
    }
    // Attempts whose reports are still on their way (kept by an earlier start, or refused
    // at start) hold their lease until their FinishRun arrives, unless the coordinator keeps
    // answering their reports with errors: then it may end them as lost.
    for (const AttemptKey& key :
         relay_.attempts_to_hold(kHoldStuckReportsLeaseTtls * lease_ttl_ms_)) {
      if (attempts_.count(key) > 0) continue;
      v1::RunningAttempt* running = request.add_running();
      running->set_run_id(key.run_id);
      running->set_attempt(key.attempt);
    }
  }
  absl::StatusOr<v1::HeartbeatResponse> reply = gateway_->Heartbeat(request);
  if (!reply.ok()) return reply.status();
  if (reply->reregister()) {
    LOG(WARNING) << "coordinator asked to re-register";
    absl::Status status = RegisterOnce();
    if (!status.ok()) return status;
  }
  absl::MutexLock lock(&mu_);
  for (const v1::Order& order : reply->orders()) {
    auto it = attempts_.find({order.run_id(), order.attempt()});
    if (it == attempts_.end()) continue;
    if (order.action() == v1::STOP) {
      LOG(INFO) << "run " << order.run_id() << " attempt " << order.attempt() << ": STOP order";
      StopLocked(*it->second, v1::OUTCOME_CANCELLED);
    } else if (order.action() == v1::PREEMPT) {
      LOG(INFO) << "run " << order.run_id() << " attempt " << order.attempt() << ": PREEMPT order";
      StopLocked(*it->second, v1::OUTCOME_PREEMPTED);
    } else if (order.action() == v1::KILL) {
      LOG(WARNING) << "run " << order.run_id() << " attempt " << order.attempt()
                   << ": KILL order, the attempt is no longer current";
      KillLocked(*it->second, v1::OUTCOME_PREEMPTED,
                 "the coordinator no longer holds the attempt's lease");
    }
  }
  // A reply that asks to re-register renewed nothing.
  if (reply->reregister()) return absl::OkStatus();
  const int64_t deadline =
      LeaseDeadline(sent, reply->lease_ttl_ms() > 0 ? reply->lease_ttl_ms() : lease_ttl_ms_);
  for (const v1::RunningAttempt& running : request.running()) {
    auto it = attempts_.find({running.run_id(), running.attempt()});
    if (it == attempts_.end() || it->second->killed) continue;
    Attempt& attempt = *it->second;
    if (deadline <= attempt.lease_deadline_ms) continue;
    attempt.lease_deadline_ms = deadline;
    attempt.child->ExtendLease(deadline);
  }
  return absl::OkStatus();
}

void Agent::EnforceLeases() {
  absl::MutexLock lock(&mu_);
  const int64_t now = clock_->MonotonicMillis();
  for (auto& [key, attempt] : attempts_) {
    if (attempt->killed || now < attempt->lease_deadline_ms) continue;
    LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt
                 << ": lease not renewed in time, sending SIGKILL";
    KillLocked(*attempt, v1::OUTCOME_PREEMPTED,
               "the worker could not renew the attempt's lease before it lapsed");
  }
}

void Agent::EnforceStallTimeout() {
  if (options_.stall_timeout_ms <= 0) return;
  absl::MutexLock lock(&mu_);
  const int64_t now = clock_->MonotonicMillis();
  for (auto& [key, attempt] : attempts_) {
    if (attempt->killed || !attempt->has_events ||
        now - attempt->progress_ms < options_.stall_timeout_ms) {
      continue;
    }
    const std::string reason =
        absl::StrCat("no step progress for ", (now - attempt->progress_ms) / 1000,
                     " s (stall timeout ", options_.stall_timeout_ms / 1000, " s, last step ",
                     std::max<int64_t>(attempt->last_step, 0), "): killed");
    LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt << ": " << reason;
    if (metrics_ != nullptr) metrics_->children_stalled.Increment();
    KillLocked(*attempt, v1::OUTCOME_FAILED, reason);
  }
}

void Agent::EnforceGrace() {
  absl::MutexLock lock(&mu_);
  const int64_t now = clock_->MonotonicMillis();
  for (auto& [key, attempt] : attempts_) {
    if (attempt->kill_at_ms == 0 || attempt->killed || now < attempt->kill_at_ms) continue;
    LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt
                 << ": grace period over, sending SIGKILL";
    attempt->child->Signal(SIGKILL);
    attempt->killed = true;
  }
}

absl::StatusOr<bool> Agent::AcquireOnce() {
  JoinFinishedThreads();
  v1::AcquireRunRequest request;
  {
    absl::MutexLock lock(&mu_);
    if (draining_) return false;
    request.set_worker_id(worker_id_);
  }
  for (int32_t slot : FreeSlots()) request.add_free_slots(slot);
  if (request.free_slots().empty()) return false;
  request.set_wait_ms(options_.acquire_wait_ms);
  const int64_t sent = clock_->MonotonicMillis();  // the lease is granted later
  absl::StatusOr<v1::AcquireRunResponse> reply = gateway_->AcquireRun(request);
  if (!reply.ok()) return reply.status();
  if (!reply->has_assignment()) return false;
  int64_t ttl = reply->assignment().lease_ttl_ms();
  if (ttl <= 0) {
    absl::MutexLock lock(&mu_);
    ttl = lease_ttl_ms_;
  }
  StartAttempt(reply->assignment(), LeaseDeadline(sent, ttl));
  return true;
}

std::vector<int32_t> Agent::FreeSlots() const {
  absl::MutexLock lock(&mu_);
  std::vector<int32_t> free;
  for (size_t i = 0; i < busy_.size(); ++i) {
    if (!busy_[i]) free.push_back(static_cast<int32_t>(i));
  }
  return free;
}

size_t Agent::running_attempts() const {
  absl::MutexLock lock(&mu_);
  return attempts_.size();
}

int64_t Agent::worker_id() const {
  absl::MutexLock lock(&mu_);
  return worker_id_;
}

void Agent::StartAttempt(const v1::Assignment& assignment, int64_t lease_deadline_ms) {
  const AttemptKey key{assignment.run_id(), assignment.attempt()};
  v1::FinishRunRequest refusal;
  refusal.set_run_id(key.run_id);
  refusal.set_attempt(key.attempt);
  refusal.set_worker_id(worker_id());

  // Slots: W = training.ranks (0 = 1), or ranks_per_worker for a gang's part; the assigned
  // ones that are free here, topped up with other free slots.
  const bool gang = assignment.has_gang();
  const int ranks = gang ? assignment.spec().training().ranks_per_worker()
                         : std::max(1, assignment.spec().training().ranks());
  // This worker's ranks are rank_offset .. rank_offset + W - 1 of world_size.
  const int rank_offset = gang ? assignment.gang().rank_offset() : 0;
  const int world_size = gang ? assignment.gang().world_size() : ranks;
  std::vector<int32_t> slots;
  {
    absl::MutexLock lock(&mu_);
    auto usable = [&](int32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return slot >= 0 && slot < static_cast<int32_t>(busy_.size()) && !busy_[slot] &&
             std::find(slots.begin(), slots.end(), slot) == slots.end();
    };
    for (int32_t slot : assignment.slots()) {
      if (static_cast<int>(slots.size()) < ranks && usable(slot)) slots.push_back(slot);
    }
    for (int32_t i = 0; i < static_cast<int32_t>(busy_.size()); ++i) {
      if (static_cast<int>(slots.size()) < ranks && usable(i)) slots.push_back(i);
    }
    if (draining_ || static_cast<int>(slots.size()) < ranks) {
      refusal.set_outcome(v1::OUTCOME_PREEMPTED);
      refusal.set_error(draining_ ? "worker is draining"
                                  : absl::StrCat("the run needs ", ranks, " free slots, ",
                                                 slots.size(), " are free on the worker"));
    } else {
      for (int32_t slot : slots) busy_[slot] = true;  // reserved while the children start
      UpdateSlotGaugesLocked();
    }
  }
  if (refusal.outcome() != v1::OUTCOME_UNSPECIFIED) {
    LOG(WARNING) << "run " << key.run_id << ": not started: " << refusal.error();
    relay_.Finish(key, refusal);
    return;
  }

  // Folder, spec and command lines.
  const std::string dir = absl::StrCat(options_.work_dir, "/run-", key.run_id, "-a", key.attempt);
  v1::RunSpec spec = assignment.spec();
  spec.set_run_id(key.run_id);
  spec.set_attempt(key.attempt);
  if (spec.checkpoint_dir().empty()) {
    spec.set_checkpoint_dir(absl::StrCat(options_.work_dir, "/run-", key.run_id, "/checkpoints"));
  }
  const std::string spec_path = dir + "/spec.pb";
  absl::Status status = MakeDirs(dir);
  if (status.ok()) status = MakeDirs(spec.checkpoint_dir());
  if (status.ok()) status = WriteFileAtomic(spec_path, spec.SerializeAsString());
  // A gang meets at member 0's TCPStore; ranks on this worker alone at a FileStore here.
  const std::string rendezvous = gang ? assignment.gang().rendezvous() : dir + "/rdzv";
  if (status.ok() && !gang && ranks > 1) {
    // A FileStore must be fresh: a file left by an earlier start holds its keys.
    std::error_code error;
    std::filesystem::remove(rendezvous, error);
    if (error) {
      status = absl::InternalError(
          absl::StrCat("cannot remove the stale rendezvous ", rendezvous, ": ", error.message()));
    }
  }

  std::vector<LaunchOptions> launches;
  int threads = 0;  // per rank, for the log line
  for (int rank = 0; rank < ranks; ++rank) {
    const v1::Slot& slot = slots_[slots[rank]];
    threads = spec.training().threads() > 0 ? spec.training().threads() : slot.cores();
    threads = std::max(threads, 1);
    TrainerArgs args;
    args.spec = spec_path;
    args.events_fd = rank_offset + rank == 0 ? options_.events_fd : -1;
    args.threads = threads;
    args.lease_deadline_ms = lease_deadline_ms;
    args.lease_fd = options_.control_fd;
    // Resume candidates, newest first, each with the digest the coordinator recorded.
    std::vector<v1::ResumePoint> candidates;
    if (assignment.has_resume() && !assignment.resume().path().empty()) {
      candidates.push_back(assignment.resume());
    }
    candidates.insert(candidates.end(), assignment.fallbacks().begin(),
                      assignment.fallbacks().end());
    for (const v1::ResumePoint& candidate : candidates) {
      if (candidate.sha256().empty()) {
        // Nothing to verify it against: not a candidate (the others are still verified).
        if (rank == 0) {
          LOG(WARNING) << "run " << key.run_id << ": not offering " << candidate.path()
                       << ": no digest recorded";
        }
        continue;
      }
      args.resume.push_back(candidate.path());
      args.resume_sha256.push_back(candidate.sha256());
      args.resume_bytes.push_back(candidate.bytes());
    }
    if (world_size > 1) {
      args.rank = rank_offset + rank;
      args.world_size = world_size;
      args.rendezvous = rendezvous;
    }
    if (gang) args.dist_host = assignment.gang().host();  // where the other members reach it
    LaunchOptions launch;
    if (slot.kind() == v1::CUDA) {
      args.device = "cuda:0";  // the slot's GPU, the only one CUDA_VISIBLE_DEVICES shows
      if (world_size > 1) args.backend = "nccl";
      launch.env.emplace_back(kEnvCudaVisibleDevices, absl::StrCat(slot.device()));
    }
    launch.argv = args.ToArgv();
    launch.argv.insert(launch.argv.begin(), options_.train_bin);
    launch.env.emplace_back(kEnvOmpNumThreads, absl::StrCat(threads));
    launch.env.emplace_back(kEnvMklNumThreads, absl::StrCat(threads));
    // OMP_WAIT_POLICY stays libgomp's default (spin briefly, then sleep), or the worker's
    // own: with every thread in one OpenMP pool that is the faster one (docs/design.md,
    // "Threads on CPU").
    for (const auto& entry : options_.train_env) launch.env.push_back(entry);
    launch.log_path =
        rank == 0 ? dir + "/train.log" : absl::StrCat(dir, "/train.rank", rank, ".log");
    launch.events_fd = options_.events_fd;
    launch.control_fd = options_.control_fd;
    launches.push_back(std::move(launch));
  }

  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      status.ok() ? StartRanks(launches) : absl::StatusOr<std::unique_ptr<ChildProcess>>(status);
  if (!child.ok()) {
    LOG(ERROR) << "run " << key.run_id << " attempt " << key.attempt
               << ": cannot start the trainer: " << child.status();
    if (metrics_ != nullptr) metrics_->children_failed.Increment();
    refusal.set_outcome(v1::OUTCOME_FAILED);
    refusal.set_exit_code(-1);
    refusal.set_error(
        absl::StrCat("xmod-worker could not start the trainer: ", child.status().ToString()));
    {
      absl::MutexLock lock(&mu_);
      for (int32_t slot : slots) busy_[slot] = false;
      UpdateSlotGaugesLocked();
    }
    relay_.Finish(key, refusal);
    return;
  }
  LOG(INFO) << "run " << key.run_id << " attempt " << key.attempt << ": started pid "
            << (*child)->pid() << " on slots " << absl::StrJoin(slots, ",") << " with " << threads
            << " threads" << (ranks > 1 ? absl::StrCat(" per rank, ", ranks, " ranks") : "")
            << (gang ? absl::StrCat(", gang member ", assignment.gang().member(), " of ",
                                    assignment.gang().members(), " (ranks ", rank_offset, "..",
                                    rank_offset + ranks - 1, " of ", world_size, ", ", rendezvous,
                                    ")")
                     : "")
            << (assignment.has_resume() ? ", resuming" : "");
  if (metrics_ != nullptr) metrics_->children_started.Increment();
  relay_.Open(key);

  absl::MutexLock lock(&mu_);
  auto attempt = std::make_unique<Attempt>();
  attempt->key = key;
  attempt->assignment = assignment;
  attempt->checkpoint_dir = spec.checkpoint_dir();
  attempt->child = *std::move(child);
  attempt->slots = slots;
  attempt->lease_deadline_ms = lease_deadline_ms;
  attempt->progress_ms = clock_->MonotonicMillis();
  attempt->has_events = rank_offset == 0;
  Attempt* raw = attempt.get();
  attempts_[key] = std::move(attempt);
  raw->thread = std::thread([this, raw] { Supervise(raw); });
  // A drain that began while the child was starting preempts it too.
  if (draining_) StopLocked(*raw, v1::OUTCOME_PREEMPTED);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> Agent::StartRanks(
    const std::vector<LaunchOptions>& launches) {
  if (launches.size() == 1) return launcher_->Start(launches[0]);
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (const LaunchOptions& launch : launches) {
    absl::StatusOr<std::unique_ptr<ChildProcess>> rank = launcher_->Start(launch);
    if (!rank.ok()) {
      // The ranks already started would wait for this one until their timeout.
      for (std::unique_ptr<ChildProcess>& started : ranks) {
        started->Signal(SIGKILL);
        started->Wait();
      }
      return absl::Status(rank.status().code(),
                          absl::StrCat("rank ", ranks.size(), ": ", rank.status().message()));
    }
    ranks.push_back(*std::move(rank));
  }
  return std::make_unique<RankGroup>(std::move(ranks));
}

void Agent::Supervise(Attempt* attempt) {
  const AttemptKey key = attempt->key;
  ChildProcess* child = attempt->child.get();
  bool finished_event = false;
  while (true) {
    v1::TrainerEvent event;
    absl::StatusOr<bool> more = child->ReadEvent(&event);
    if (!more.ok()) {
      LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt << ": " << more.status();
      break;
    }
    if (!*more) break;
    int64_t step = -1;  // the step the event shows the child at
    if (event.has_progress()) step = event.progress().step();
    if (event.has_metric()) step = event.metric().step();
    if (event.has_checkpoint()) step = event.checkpoint().step();
    if (event.has_started() || step >= 0) {
      absl::MutexLock lock(&mu_);
      if (event.has_started() || step > attempt->last_step) {
        attempt->progress_ms = clock_->MonotonicMillis();
        attempt->last_step = std::max(attempt->last_step, step);
      }
    }
    switch (event.event_case()) {
      case v1::TrainerEvent::kStarted:
        VLOG(1) << "run " << key.run_id << ": trainer started, steps planned "
                << event.started().steps_planned() << ", resumed from step "
                << event.started().resumed_from_step();
        break;
      case v1::TrainerEvent::kMetric:
        relay_.AddMetric(key, event.metric());
        break;
      case v1::TrainerEvent::kProgress: {
        absl::MutexLock lock(&mu_);
        attempt->progress = event.progress();
        break;
      }
      case v1::TrainerEvent::kCheckpoint: {
        const v1::TrainerCheckpoint& cp = event.checkpoint();
        v1::ReportCheckpointRequest request;
        request.set_step(cp.step());
        request.set_tokens(cp.tokens());
        request.set_flops(cp.flops());
        request.set_path(cp.path());
        request.set_sha256(cp.sha256());
        request.set_bytes(cp.bytes());
        RelayCheckpoint(attempt, std::move(request));
        break;
      }
      case v1::TrainerEvent::kResumeRejected: {
        const v1::TrainerResumeRejected& refused = event.resume_rejected();
        LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt << ": trainer refused "
                     << refused.path() << ": " << refused.reason();
        // The coordinator knows the checkpoint by the ResumePoint it sent.
        std::vector<v1::ResumePoint> sent(attempt->assignment.fallbacks().begin(),
                                          attempt->assignment.fallbacks().end());
        if (attempt->assignment.has_resume()) sent.push_back(attempt->assignment.resume());
        for (const v1::ResumePoint& point : sent) {
          if (point.path() != refused.path()) continue;
          v1::ReportCheckpointRequest request;
          request.set_step(point.step());
          request.set_path(point.path());
          request.set_sha256(point.sha256());
          request.set_rejected(refused.reason().empty() ? "refused" : refused.reason());
          RelayCheckpoint(attempt, std::move(request));
          break;
        }
        break;
      }
      case v1::TrainerEvent::kFinished:
        finished_event = true;
        LOG(INFO) << "run " << key.run_id << " attempt " << key.attempt << ": finished, val/loss "
                  << event.finished().final_val_loss() << ", "
                  << event.finished().tokens_per_second() << " tokens/s";
        break;
      default:
        break;
    }
  }
  const ExitStatus exit = child->Wait();
  {
    absl::MutexLock lock(&mu_);
    attempt->exited = true;
  }

  v1::FinishRunRequest finish;
  finish.set_run_id(key.run_id);
  finish.set_attempt(key.attempt);
  finish.set_exit_code(exit.AsExitCode());
  v1::Outcome stop_outcome;
  std::string stop_reason;
  {
    absl::MutexLock lock(&mu_);
    stop_outcome = attempt->stop_outcome;
    stop_reason = attempt->stop_reason;
  }
  if (exit.success() && (finished_event || stop_outcome == v1::OUTCOME_UNSPECIFIED)) {
    finish.set_outcome(v1::OUTCOME_SUCCEEDED);
  } else if (stop_outcome != v1::OUTCOME_UNSPECIFIED) {
    finish.set_outcome(stop_outcome);
    finish.set_error(stop_reason);
  } else if (exit.signal == 0 && exit.code == kExitLeaseExpired) {
    // The trainer fenced itself off: its lease lapsed (e.g. this worker was frozen).
    finish.set_outcome(v1::OUTCOME_PREEMPTED);
    finish.set_error("the trainer's lease lapsed; it stopped without writing a checkpoint");
  } else if (exit.signal == 0 && exit.code == kExitPreempted) {
    // Someone else sent the trainer SIGTERM (a scheduler's scancel or preemption signals
    // the whole job): it checkpointed and stopped, as if this worker had asked.
    finish.set_outcome(v1::OUTCOME_PREEMPTED);
    finish.set_error("the trainer was stopped by SIGTERM from outside the worker");
  } else {
    finish.set_outcome(v1::OUTCOME_FAILED);
    std::string tail = child->StderrTail();
    finish.set_error(tail.empty() ? absl::StrCat("xmod-train ", exit.ToString()) : tail);
    if (metrics_ != nullptr) metrics_->children_failed.Increment();
  }
  LOG(INFO) << "run " << key.run_id << " attempt " << key.attempt << ": child " << exit.ToString()
            << " -> " << OutcomeName(finish.outcome());

  // Every point first, then the end of the attempt (the relay sends it after them). Once
  // abandoned, what is undelivered is kept for the next start (Wait).
  CollectCheckpoints(attempt, relay_.WaitDelivered(key, &abandon_));
  relay_.Finish(key, finish);
  relay_.WaitFinished(key, &abandon_);

  std::unique_ptr<Attempt> done;
  {
    absl::MutexLock lock(&mu_);
    auto it = attempts_.find(key);
    done = std::move(it->second);
    attempts_.erase(it);
    for (int32_t slot : done->slots) busy_[slot] = false;
    UpdateSlotGaugesLocked();
    finished_threads_.push_back(std::move(done->thread));
  }
  // `done` (and the child) are destroyed here, before the thread ends.
}

void Agent::StopLocked(Attempt& attempt, v1::Outcome outcome) {
  if (attempt.stop_outcome != v1::OUTCOME_UNSPECIFIED) return;
  attempt.stop_outcome = outcome;
  attempt.kill_at_ms = clock_->MonotonicMillis() + options_.kill_grace_ms;
  attempt.child->Signal(SIGTERM);
}

void Agent::KillLocked(Attempt& attempt, v1::Outcome outcome, const std::string& reason) {
  if (attempt.killed) return;
  if (attempt.stop_outcome == v1::OUTCOME_UNSPECIFIED) attempt.stop_outcome = outcome;
  if (attempt.stop_reason.empty()) attempt.stop_reason = reason;
  attempt.killed = true;
  attempt.child->Signal(SIGKILL);
}

void Agent::RelayCheckpoint(Attempt* attempt, v1::ReportCheckpointRequest request) {
  attempt->reports.push_back(request);
  relay_.AddCheckpoint(attempt->key, std::move(request));
  CollectCheckpoints(attempt, /*all_delivered=*/false);
}

void Agent::CollectCheckpoints(Attempt* attempt, bool all_delivered) {
  const std::vector<v1::ReportCheckpointRequest>& reports = attempt->reports;
  size_t acked = reports.size();
  if (!all_delivered) {
    // The relay reports in order and forgets a report once acknowledged. Staleness is read
    // after the count: a stale attempt's dropped reports must not look acknowledged.
    const size_t pending = relay_.pending_checkpoints(attempt->key);
    if (relay_.stale(attempt->key)) return;
    acked = reports.size() - std::min(pending, reports.size());
  }
  // What the coordinator holds: the assignment's candidates and the acknowledged reports,
  // less the candidates the trainer refused.
  std::set<std::string> refused = relay_.refused_checkpoints(attempt->key);
  for (const v1::ReportCheckpointRequest& r : reports) {
    if (!r.rejected().empty()) refused.insert(r.path());
  }
  std::vector<std::pair<int64_t, std::string>> known;  // (step, path)
  if (attempt->assignment.has_resume() && !attempt->assignment.resume().path().empty()) {
    known.emplace_back(attempt->assignment.resume().step(), attempt->assignment.resume().path());
  }
  for (const v1::ResumePoint& p : attempt->assignment.fallbacks()) {
    known.emplace_back(p.step(), p.path());
  }
  for (size_t i = 0; i < acked; ++i) {
    if (reports[i].rejected().empty()) known.emplace_back(reports[i].step(), reports[i].path());
  }
  std::vector<int64_t> good;
  for (const auto& [step, path] : known) {
    if (refused.count(path) == 0) good.push_back(step);
  }
  if (good.size() < 2) return;
  std::sort(good.rbegin(), good.rend());
  const int64_t keep_from = good[1];  // the two newest good ones stay (a fallback for a retry)
  for (const auto& [step, path] : known) {
    if (step >= keep_from || std::find(attempt->deleted.begin(), attempt->deleted.end(), path) !=
                                 attempt->deleted.end()) {
      continue;
    }
    attempt->deleted.push_back(path);
    if (absl::Status s = RemoveInside(path, attempt->checkpoint_dir); !s.ok()) {
      LOG(WARNING) << "run " << attempt->key.run_id << ": checkpoint not deleted: " << s;
      continue;
    }
    VLOG(1) << "run " << attempt->key.run_id << ": deleted checkpoint " << path;
  }
}

void Agent::OnStale(AttemptKey key, const std::string& refusal) {
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find(key);
  if (it == attempts_.end()) return;
  if (!refusal.empty()) {
    // Nothing more it reports can be stored: it ends FAILED with the refusal (retried).
    LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt
                 << ": its metrics were refused: killing it";
    KillLocked(*it->second, v1::OUTCOME_FAILED, refusal);
    return;
  }
  LOG(WARNING) << "run " << key.run_id << " attempt " << key.attempt
               << " is no longer current: killing it";
  KillLocked(*it->second, v1::OUTCOME_CANCELLED,
             "the coordinator no longer considers the attempt current");
}

void Agent::UpdateSlotGaugesLocked() {
  if (metrics_ == nullptr) return;
  const auto busy = std::count(busy_.begin(), busy_.end(), true);
  metrics_->slots_busy.Set(static_cast<double>(busy));
  metrics_->slots_free.Set(static_cast<double>(busy_.size() - busy));
}

void Agent::JoinFinishedThreads() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    threads.swap(finished_threads_);
  }
  for (std::thread& thread : threads) thread.join();
}

void Agent::HeartbeatLoop() {
  while (!shutdown_.HasBeenNotified()) {
    absl::Status status = HeartbeatOnce();
    if (!status.ok()) LOG(WARNING) << "Heartbeat failed: " << status;
    EnforceGrace();
    EnforceLeases();
    EnforceStallTimeout();
    int64_t interval;
    {
      absl::MutexLock lock(&mu_);
      interval = heartbeat_interval_ms_;
    }
    shutdown_.WaitForNotificationWithTimeout(absl::Milliseconds(interval));
  }
}

void Agent::AcquireLoop() {
  while (!drain_.HasBeenNotified()) {
    if (FreeSlots().empty()) {
      // Wait for a slot to free up (or the drain).
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return draining_ || std::find(busy_.begin(), busy_.end(), false) != busy_.end();
      };
      mu_.Await(absl::Condition(&ready));
      continue;
    }
    absl::StatusOr<bool> started = AcquireOnce();
    if (!started.ok()) {
      LOG(WARNING) << "AcquireRun failed: " << started.status();
      drain_.WaitForNotificationWithTimeout(absl::Milliseconds(options_.retry_delay_ms));
    }
  }
}

}  // namespace xmod
