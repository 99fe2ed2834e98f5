// See sim_worker.h.
#include "bench/load/sim_worker.h"

#include <chrono>
#include <optional>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "trainer_contract/series.h"

namespace xmod::bench {
namespace {

constexpr int kRpcDeadlineMs = 10000;

void SetDeadline(grpc::ClientContext* context, int ms) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

double MillisSince(absl::Time start) { return absl::ToDoubleMilliseconds(absl::Now() - start); }

}  // namespace

SimWorker::SimWorker(std::shared_ptr<grpc::Channel> channel, SimWorkerOptions options,
                     const PhaseSlot* slot)
    : stub_(v1::WorkerGateway::NewStub(std::move(channel))),
      options_(std::move(options)),
      slot_(slot) {}

SimWorker::~SimWorker() { Stop(); }

bool SimWorker::Start() {
  v1::RegisterRequest request;
  request.set_worker_name(options_.name);
  request.set_hostname("load-bench");
  request.set_version("bench");
  v1::Slot* cpu = request.add_slots();
  cpu->set_index(0);
  cpu->set_kind(v1::CPU);
  cpu->set_cores(1);
  cpu->set_description("simulated");
  v1::RegisterResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, kRpcDeadlineMs);
  if (!stub_->Register(&context, request, &response).ok()) return false;
  worker_id_ = response.worker_id();
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  run_thread_ = std::thread([this] { RunLoop(); });
  return true;
}

void SimWorker::RequestStop() {
  absl::MutexLock lock(&mu_);
  if (!stop_.HasBeenNotified()) stop_.Notify();
}

void SimWorker::Stop() {
  RequestStop();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  if (run_thread_.joinable()) run_thread_.join();
}

void SimWorker::HeartbeatLoop() {
  if (stop_.WaitForNotificationWithTimeout(absl::Milliseconds(options_.first_heartbeat_delay_ms))) {
    return;
  }
  absl::Time next = absl::Now();
  while (!stop_.HasBeenNotified()) {
    v1::HeartbeatRequest request;
    request.set_worker_id(worker_id_);
    {
      absl::MutexLock lock(&mu_);
      if (running_run_ != 0) {
        v1::RunningAttempt* running = request.add_running();
        running->set_run_id(running_run_);
        running->set_attempt(running_attempt_);
      }
    }
    LoadStats* stats = slot_->stats.load();
    v1::HeartbeatResponse response;
    grpc::ClientContext context;
    SetDeadline(&context, kRpcDeadlineMs);
    const absl::Time start = absl::Now();
    const grpc::Status status = stub_->Heartbeat(&context, request, &response);
    const double ms = MillisSince(start);
    if (status.ok()) {
      absl::MutexLock lock(&stats->mu);
      stats->heartbeat_ms.push_back(ms);
    } else {
      stats->rpc_errors.fetch_add(1);
    }
    next += absl::Milliseconds(options_.heartbeat_ms);
    stop_.WaitForNotificationWithTimeout(std::max(absl::ZeroDuration(), next - absl::Now()));
  }
}

void SimWorker::RunLoop() {
  std::optional<absl::Time> freed;  // when the last FinishRun was sent
  while (!stop_.HasBeenNotified()) {
    v1::AcquireRunRequest request;
    request.set_worker_id(worker_id_);
    request.add_free_slots(0);
    request.set_wait_ms(1000);
    v1::AcquireRunResponse response;
    grpc::ClientContext context;
    SetDeadline(&context, kRpcDeadlineMs);
    if (!stub_->AcquireRun(&context, request, &response).ok()) {
      slot_->stats.load()->rpc_errors.fetch_add(1);
      stop_.WaitForNotificationWithTimeout(absl::Milliseconds(100));
      continue;
    }
    if (!response.has_assignment()) continue;
    const v1::Assignment& assignment = response.assignment();
    LoadStats* stats = slot_->stats.load();
    if (freed.has_value()) {
      absl::MutexLock lock(&stats->mu);
      stats->handoff_ms.push_back(MillisSince(*freed));
    }
    {
      absl::MutexLock lock(&mu_);
      running_run_ = assignment.run_id();
      running_attempt_ = assignment.attempt();
    }
    int64_t last_seq = 0;
    const bool trained = TrainRun(assignment.run_id(), assignment.attempt(), &last_seq);
    {
      absl::MutexLock lock(&mu_);
      running_run_ = 0;
    }
    if (!trained) {
      freed.reset();
      continue;
    }
    v1::FinishRunRequest finish;
    finish.set_worker_id(worker_id_);
    finish.set_run_id(assignment.run_id());
    finish.set_attempt(assignment.attempt());
    finish.set_outcome(v1::OUTCOME_SUCCEEDED);
    finish.set_last_acked_seq(last_seq);
    finish.set_last_seq(last_seq);
    v1::FinishRunResponse finished;
    grpc::ClientContext finish_context;
    SetDeadline(&finish_context, kRpcDeadlineMs);
    freed = absl::Now();
    if (stub_->FinishRun(&finish_context, finish, &finished).ok()) {
      slot_->stats.load()->runs_finished.fetch_add(1);
    } else {
      slot_->stats.load()->rpc_errors.fetch_add(1);
      freed.reset();
    }
  }
}

bool SimWorker::TrainRun(int64_t run_id, int attempt, int64_t* last_seq) {
  const absl::Time end = absl::Now() + absl::Milliseconds(options_.run_ms);
  int64_t step = 0;
  while (absl::Now() < end) {
    if (stop_.HasBeenNotified()) return false;
    const LoadPhase& phase = *slot_->phase.load();
    v1::ReportMetricsRequest request;
    request.set_worker_id(worker_id_);
    request.set_run_id(run_id);
    request.set_attempt(attempt);
    request.set_first_seq(*last_seq + 1);
    for (int i = 0; i < phase.points_per_report; ++i) {
      ++step;
      v1::MetricPoint* point = request.add_points();
      point->set_step(step);
      point->set_tokens(step * 512);
      point->set_flops(static_cast<double>(step) * 1.6e9);
      point->set_name(SeriesName(xmod::v1::SERIES_TRAIN_LOSS));
      point->set_value(4.0 / (1.0 + 0.01 * static_cast<double>(step)));
    }
    v1::ReportMetricsResponse response;
    grpc::ClientContext context;
    SetDeadline(&context, kRpcDeadlineMs);
    const grpc::Status status = stub_->ReportMetrics(&context, request, &response);
    LoadStats* stats = slot_->stats.load();
    if (!status.ok()) {
      stats->rpc_errors.fetch_add(1);
      return false;  // a real worker would resend; here the run is dropped
    }
    if (response.stale()) return false;
    const int64_t sent_last = *last_seq + phase.points_per_report;
    stats->points_acked.fetch_add(response.acked_seq() - *last_seq);
    *last_seq = response.acked_seq();
    if (*last_seq != sent_last) return false;
    if (phase.report_interval_ms > 0 &&
        stop_.WaitForNotificationWithTimeout(absl::Milliseconds(phase.report_interval_ms))) {
      return false;
    }
  }
  return true;
}

}  // namespace xmod::bench
