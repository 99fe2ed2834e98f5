// See agent.h. This file: registration, the heartbeat (orders, lease renewals and the
// enforcement of grace periods, leases and stall timeouts), acquiring runs, drain and the
// loops; agent_start.cc starts an attempt, agent_supervise.cc supervises it to its end.
#include "worker/agent.h"

#include <signal.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "glog/logging.h"

namespace xmod {
namespace {

// An attempt held only for its reports whose reports the coordinator has answered with
// errors to retry, and nothing else, for this many lease TTLs is no longer listed in
// heartbeats (MetricRelay::attempts_to_hold).
constexpr int64_t kHoldStuckReportsLeaseTtls = 3;

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
  if (started && !abandon_.HasBeenNotified()) SayLeaving();
}

void Agent::SayLeaving() {
  // Its reply is not read: it would ask at most for a registration, which would start a life
  // that never heartbeats again.
  absl::StatusOr<v1::HeartbeatResponse> reply = gateway_->Heartbeat(HeartbeatRequestNow());
  if (!reply.ok()) LOG(WARNING) << "the last heartbeat (leaving) failed: " << reply.status();
}

int64_t Agent::LeaseDeadline(int64_t sent_ms, int64_t ttl_ms) const {
  return sent_ms + ttl_ms - std::min<int64_t>(1000, ttl_ms / 10);
}

absl::Status Agent::HeartbeatOnce() {
  // Read before the request leaves: the renewal happens later, so the lease lasts longer.
  const int64_t sent = clock_->MonotonicMillis();
  const v1::HeartbeatRequest request = HeartbeatRequestNow();
  absl::StatusOr<v1::HeartbeatResponse> reply = gateway_->Heartbeat(request);
  if (!reply.ok()) return reply.status();
  if (reply->reregister()) {
    LOG(WARNING) << "coordinator asked to re-register";
    absl::Status status = RegisterOnce();
    if (!status.ok()) return status;
  }
  absl::MutexLock lock(&mu_);
  for (const v1::Order& order : reply->orders()) ApplyOrderLocked(order);
  // A reply that asks to re-register renewed nothing.
  if (reply->reregister()) return absl::OkStatus();
  const int64_t deadline =
      LeaseDeadline(sent, reply->lease_ttl_ms() > 0 ? reply->lease_ttl_ms() : lease_ttl_ms_);
  RenewLeasesLocked(request, deadline);
  return absl::OkStatus();
}

v1::HeartbeatRequest Agent::HeartbeatRequestNow() {
  v1::HeartbeatRequest request;
  absl::MutexLock lock(&mu_);
  request.set_worker_id(worker_id_);
  request.set_leaving(draining_);
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
  return request;
}

void Agent::ApplyOrderLocked(const v1::Order& order) {
  auto it = attempts_.find({order.run_id(), order.attempt()});
  if (it == attempts_.end()) return;
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

void Agent::RenewLeasesLocked(const v1::HeartbeatRequest& request, int64_t deadline) {
  for (const v1::RunningAttempt& running : request.running()) {
    auto it = attempts_.find({running.run_id(), running.attempt()});
    if (it == attempts_.end() || it->second->killed) continue;
    Attempt& attempt = *it->second;
    if (deadline <= attempt.lease_deadline_ms) continue;
    attempt.lease_deadline_ms = deadline;
    attempt.child->ExtendLease(deadline);
  }
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
