// See pilot_fixture.h.
#include "coordinator/tests/pilot_fixture.h"

#include <grpcpp/client_context.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "coordinator/tests/test_util.h"

namespace xmod {
namespace {

absl::Status StatusOf(const grpc::Status& s, const char* call) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(call, ": ", s.error_message()));
}

// Leases, reports and finishes one run; its id.
absl::StatusOr<int64_t> FinishOne(xmod::v1::WorkerGateway::Stub& worker, int64_t worker_id,
                                  const std::function<double(int64_t)>& loss) {
  xmod::v1::AcquireRunRequest acquire;
  acquire.set_worker_id(worker_id);
  acquire.add_free_slots(0);
  acquire.set_wait_ms(5000);
  xmod::v1::AcquireRunResponse assignment;
  if (absl::Status s =
          StatusOf(worker.AcquireRun(BearerContext("").get(), acquire, &assignment), "AcquireRun");
      !s.ok()) {
    return s;
  }
  if (!assignment.has_assignment()) return absl::NotFoundError("AcquireRun: no queued run");
  const xmod::v1::Assignment& a = assignment.assignment();
  xmod::v1::ReportMetricsRequest metrics;
  metrics.set_worker_id(worker_id);
  metrics.set_run_id(a.run_id());
  metrics.set_attempt(a.attempt());
  metrics.set_first_seq(1);
  xmod::v1::MetricPoint* point = metrics.add_points();
  point->set_name("val/loss");
  point->set_step(10);
  point->set_tokens(1280);
  point->set_flops(a.spec().training().flop_budget());
  point->set_value(loss(a.run_id()));
  xmod::v1::ReportMetricsResponse ack;
  if (absl::Status s =
          StatusOf(worker.ReportMetrics(BearerContext("").get(), metrics, &ack), "ReportMetrics");
      !s.ok()) {
    return s;
  }
  xmod::v1::FinishRunRequest finish;
  finish.set_worker_id(worker_id);
  finish.set_run_id(a.run_id());
  finish.set_attempt(a.attempt());
  finish.set_outcome(xmod::v1::OUTCOME_SUCCEEDED);
  finish.set_last_acked_seq(ack.acked_seq());
  finish.set_last_seq(1);
  xmod::v1::FinishRunResponse finished;
  if (absl::Status s =
          StatusOf(worker.FinishRun(BearerContext("").get(), finish, &finished), "FinishRun");
      !s.ok()) {
    return s;
  }
  return a.run_id();
}

}  // namespace

xmod::v1::SweepSpec TinyPilotSweep(const std::string& dir) {
  xmod::v1::SweepSpec spec = TinySweep(dir);
  spec.set_name("tiny-pilot");
  spec.clear_grids();
  xmod::v1::GridSpec* moe = spec.add_grids();
  moe->set_label("pilot-moe");
  moe->add_archs(xmod::v1::MOE);
  moe->add_backbones("tiny-test");
  moe->add_moe_experts("2:4+0");
  moe->add_moe_experts("2:8+0");
  xmod::v1::GridSpec* xmod = spec.add_grids();
  xmod->set_label("pilot-xmod");
  xmod->add_archs(xmod::v1::XMOD);
  xmod->add_backbones("tiny-test");
  for (int k : {2, 4}) xmod->add_ks(k);
  for (double a : {1.0, 2.0}) xmod->add_as(a);
  for (uint64_t seed : {1, 2}) xmod->add_seeds(seed);
  return spec;
}

absl::StatusOr<std::vector<int64_t>> FinishRunsWithLoss(
    xmod::v1::WorkerGateway::Stub& worker, int count,
    const std::function<double(int64_t run_id)>& loss) {
  xmod::v1::RegisterResponse registered;
  if (absl::Status s = StatusOf(
          worker.Register(BearerContext("").get(), CpuWorker("pilot-worker", 1), &registered),
          "Register");
      !s.ok()) {
    return s;
  }
  std::vector<int64_t> finished;
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<int64_t> id = FinishOne(worker, registered.worker_id(), loss);
    if (!id.ok()) return id.status();
    finished.push_back(*id);
  }
  return finished;
}

}  // namespace xmod
