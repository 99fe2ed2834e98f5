// bench_load: 200 simulated workers (sim_worker.h) against one running xmod-coordinator,
// in three phases after a warm-up, each measured on its own:
//   steady     every worker reports `steady_points` metric points a second (a training step
//              a second), heartbeats every second, and finishes a run every `run_ms`;
//   saturate   the same, but each worker sends its next report as soon as the last is
//              acknowledged: the coordinator's durable ingest rate under 200 reporters;
//   raw        the rows the coordinator stored, inserted again by one thread straight into
//              SQLite with the same schema, pragmas and statement (raw_insert.h), twice:
//              sorted by run (the fastest order), and in arrival order (as `workers`
//              reporters of `saturate_points` points deliver them, the coordinator's order).
// Per phase: acknowledged (durable) points/s, heartbeat round trip p50/p99, hand-off
// (FinishRun sent -> AcquireRun returned the next run on the freed slot) p50/p99, and the
// coordinator's CPU (cores, from /proc/PID/stat) and resident memory, and its database
// writer thread's CPU per durable point, to set against the raw insert's CPU per row: that
// ratio says what the writer adds per point, whatever else shares the machine's cores. The
// saturate phase is compared with both raw inserts.
// Prints one JSON object.
// bench/load/run_bench.sh starts the coordinator and runs this; traffic is to --addr only.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/load/proc_stats.h"
#include "bench/load/raw_insert.h"
#include "bench/load/sim_worker.h"
#include "common/command_line.h"
#include "coordinator/store/store.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod::bench {
namespace {

// The command line (see main).
struct Flags {
  std::string addr;
  int coordinator_pid = 0;
  std::string db;
  std::string raw_db;
  std::string raw_arrival_db;
  int workers = 200;
  int heartbeat_ms = 1000;
  int run_ms = 6000;
  int warmup_s = 5;
  int steady_s = 25;
  int saturate_s = 25;
  int steady_points = 20;
  int saturate_points = 100;
  int raw_rows_per_transaction = 10000;
};

constexpr int kBudgetsPerSweep = 1000;  // the spec limit on a repeated field
constexpr int kKs[] = {2, 4};

// Sweep `index` of the benchmark: kBudgetsPerSweep x 2 tiny runs, budgets unlike other sweeps'.
v1::SweepSpec BenchSweep(int index) {
  v1::SweepSpec spec;
  spec.set_name(absl::StrCat("load-bench-", index));
  v1::GridSpec* grid = spec.add_grids();
  grid->set_label("load");
  grid->add_archs(v1::XMOD);
  grid->add_backbones("cpu-d64");
  grid->add_seq_lens(128);
  for (int k : kKs) grid->add_ks(k);
  grid->add_as(1);
  for (int i = 0; i < kBudgetsPerSweep; ++i) {
    grid->add_flop_budgets(1e11 + 1e7 * (index * kBudgetsPerSweep + i));
  }
  v1::TrainingSpec* training = spec.mutable_training();
  training->set_flop_budget(1e11);
  training->set_seq_len(128);
  training->set_batch_tokens(512);
  training->set_eval_marks(2);
  training->set_eval_tokens(4096);
  training->set_seed(1);
  spec.mutable_data()->set_train_glob("/nonexistent/load-bench/train_*.bin");
  spec.mutable_data()->set_val_glob("/nonexistent/load-bench/val_*.bin");
  spec.set_max_attempts(3);
  return spec;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * values.size()));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

std::string Number(double v) { return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "null"; }

struct PhaseResult {
  std::string json;  // the phase's summary
  double durable_points_per_s = 0;
  double writer_cpu_us_per_point = 0;  // 0 when the writer thread could not be read
};

// CPU seconds so far of the coordinator's database writer thread; 0 when unreadable.
double WriterCpuSeconds(pid_t coordinator) {
  absl::StatusOr<double> seconds = ThreadCpuSeconds(coordinator, Store::kWriterThreadName);
  return seconds.ok() ? *seconds : 0;
}

// Runs `phase` for `seconds` with its measurements in `stats`, then points the workers at
// `next` (calls still in flight finish into `stats`, which outlives the workers).
PhaseResult RunPhase(const LoadPhase& phase, int seconds, LoadStats& stats, LoadStats* next,
                     PhaseSlot* slot, pid_t coordinator) {
  slot->phase.store(&phase);
  slot->stats.store(&stats);
  const absl::StatusOr<ProcSample> before = SampleProcess(coordinator);
  const double writer_before = WriterCpuSeconds(coordinator);
  const int64_t points_before = stats.points_acked.load();
  const absl::Time start = absl::Now();
  absl::SleepFor(absl::Seconds(seconds));
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  const absl::StatusOr<ProcSample> after = SampleProcess(coordinator);
  const double writer_cpu = WriterCpuSeconds(coordinator) - writer_before;
  const int64_t points = stats.points_acked.load() - points_before;
  slot->stats.store(next);

  std::vector<double> heartbeats, handoffs;
  {
    absl::MutexLock lock(&stats.mu);
    heartbeats = stats.heartbeat_ms;
    handoffs = stats.handoff_ms;
  }
  std::string json = absl::StrCat(
      "{\"seconds\": ", Number(wall), ", \"points_per_report\": ", phase.points_per_report,
      ", \"report_interval_ms\": ", phase.report_interval_ms,
      ", \"durable_points\": ", stats.points_acked.load(),
      ", \"durable_points_per_s\": ", Number(stats.points_acked.load() / wall),
      ", \"heartbeats\": ", heartbeats.size(),
      ", \"heartbeat_ms_p50\": ", Number(Percentile(heartbeats, 50)),
      ", \"heartbeat_ms_p99\": ", Number(Percentile(heartbeats, 99)),
      ", \"heartbeat_ms_max\": ", Number(Percentile(heartbeats, 100)),
      ", \"runs_finished\": ", stats.runs_finished.load(), ", \"handoffs\": ", handoffs.size(),
      ", \"handoff_ms_p50\": ", Number(Percentile(handoffs, 50)),
      ", \"handoff_ms_p99\": ", Number(Percentile(handoffs, 99)),
      ", \"rpc_errors\": ", stats.rpc_errors.load());
  if (before.ok() && after.ok()) {
    absl::StrAppend(&json, ", \"coordinator_cpu_cores\": ",
                    Number((after->cpu_seconds - before->cpu_seconds) / wall),
                    ", \"coordinator_rss_mib\": ", Number(after->rss_bytes / 1048576.0),
                    ", \"coordinator_peak_rss_mib\": ", Number(after->peak_rss_bytes / 1048576.0));
  }
  const double writer_us = points > 0 ? writer_cpu * 1e6 / points : 0;
  absl::StrAppend(&json, ", \"writer_cpu_cores\": ", Number(writer_cpu / wall),
                  ", \"writer_cpu_us_per_point\": ", Number(writer_us));
  return {json + "}", stats.points_acked.load() / wall, writer_us};
}

// Submits benchmark sweeps until they queue enough runs for every worker through all phases;
// the runs queued, or nullopt (the error printed).
std::optional<int64_t> QueueRuns(v1::Coordinator::Stub& user, const Flags& flags) {
  const int seconds = flags.warmup_s + flags.steady_s + flags.saturate_s;
  const int64_t runs_needed =
      static_cast<int64_t>(flags.workers) * (seconds * 1000 / flags.run_ms + 3);
  int64_t runs = 0;
  for (int i = 0; runs < runs_needed; ++i) {
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = BenchSweep(i);
    v1::SubmitSweepResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    grpc::Status status = user.SubmitSweep(&context, request, &response);
    if (!status.ok()) {
      std::fprintf(stderr, "bench_load: SubmitSweep: %s\n", status.error_message().c_str());
      return std::nullopt;
    }
    runs += response.runs_size();
  }
  return runs;
}

// Starts and registers the simulated workers, each on its own connection; false (the error
// printed) when one could not register.
bool StartWorkers(const Flags& flags, PhaseSlot* slot,
                  std::vector<std::unique_ptr<SimWorker>>& workers) {
  const int n = flags.workers;
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per worker
    SimWorkerOptions options;
    options.name = absl::StrFormat("sim-%03d", i);
    options.heartbeat_ms = flags.heartbeat_ms;
    options.run_ms = flags.run_ms;
    options.first_heartbeat_delay_ms = options.heartbeat_ms * i / n;
    workers.push_back(std::make_unique<SimWorker>(
        grpc::CreateCustomChannel(flags.addr, grpc::InsecureChannelCredentials(), args), options,
        slot));
    if (!workers.back()->Start()) {
      std::fprintf(stderr, "bench_load: %s could not register\n", options.name.c_str());
      return false;
    }
  }
  return true;
}

// One raw phase's summary, and how the saturate phase compares with it: durable_vs_raw
// (rates) and raw_vs_writer_cpu (the raw insert's CPU per row over the writer thread's CPU
// per durable point: 1 = the writer adds no cost to the insert; it bounds the rate when the
// other threads have cores of their own).
std::string RawJson(const RawInsertResult& raw, const RawInsertOrder& order,
                    int rows_per_transaction, const PhaseResult& saturate) {
  const double raw_rate = raw.rows / raw.seconds;
  const double raw_cpu_us_per_row = raw.cpu_seconds * 1e6 / raw.rows;
  const double writer_us = saturate.writer_cpu_us_per_point;
  return absl::StrCat(
      "{\"rows\": ", raw.rows, ", \"seconds\": ", Number(raw.seconds),
      ", \"rows_per_transaction\": ", rows_per_transaction,
      ", \"concurrent_attempts\": ", order.concurrent_attempts,
      ", \"rows_per_report\": ", order.concurrent_attempts > 0 ? order.rows_per_report : 0,
      ", \"points_per_s\": ", Number(raw_rate),
      ", \"cpu_us_per_row\": ", Number(raw_cpu_us_per_row),
      ", \"durable_vs_raw\": ", Number(saturate.durable_points_per_s / raw_rate),
      ", \"raw_vs_writer_cpu\": ", Number(writer_us > 0 ? raw_cpu_us_per_row / writer_us : 0), "}");
}

// The JSON object on stdout: the settings, both phases, and both raw inserts of the same rows
// (sorted, and in the order the workers delivered them), each compared with the saturate
// phase.
void PrintReport(const Flags& flags, int64_t runs, const PhaseResult& steady,
                 const PhaseResult& saturate, const std::string& raw_sorted,
                 const std::string& raw_arrival) {
  std::printf(
      "{\"workers\": %d, \"heartbeat_ms\": %d, \"run_ms\": %d, \"queued_runs\": %lld,\n"
      " \"steady\": %s,\n \"saturate\": %s,\n \"raw_sqlite\": %s,\n"
      " \"raw_sqlite_arrival_order\": %s}\n",
      flags.workers, flags.heartbeat_ms, flags.run_ms, static_cast<long long>(runs),
      steady.json.c_str(), saturate.json.c_str(), raw_sorted.c_str(), raw_arrival.c_str());
}

// Inserts the coordinator's rows again in `order` into `target`, summarized against
// `saturate`; nullopt when it failed (the error printed).
std::optional<std::string> RawPhase(const Flags& flags, const std::string& target,
                                    const RawInsertOrder& order, const PhaseResult& saturate) {
  absl::StatusOr<RawInsertResult> raw =
      RawInsertMetrics(flags.db, target, flags.raw_rows_per_transaction, order);
  if (!raw.ok()) {
    std::fprintf(stderr, "bench_load: raw insert into %s: %s\n", target.c_str(),
                 raw.status().ToString().c_str());
    return std::nullopt;
  }
  return RawJson(*raw, order, flags.raw_rows_per_transaction, saturate);
}

int Main(const Flags& flags) {
  const pid_t pid = flags.coordinator_pid;
  if (flags.addr.empty() || pid <= 0 || flags.db.empty() || flags.raw_db.empty() ||
      flags.raw_arrival_db.empty()) {
    std::fprintf(stderr,
                 "bench_load: --addr, --coordinator_pid, --db, --raw_db and --raw_arrival_db are "
                 "needed\n");
    return 2;
  }
  const absl::Time start = absl::Now();
  auto user =
      v1::Coordinator::NewStub(grpc::CreateChannel(flags.addr, grpc::InsecureChannelCredentials()));
  const std::optional<int64_t> runs = QueueRuns(*user, flags);
  if (!runs) return 1;

  std::fprintf(stderr, "bench_load: %lld runs queued, %.0f s since start\n",
               static_cast<long long>(*runs), absl::ToDoubleSeconds(absl::Now() - start));
  const LoadPhase steady_phase{"steady", flags.steady_points, 1000};
  const LoadPhase saturate_phase{"saturate", flags.saturate_points, 0};
  PhaseSlot slot;
  LoadStats warmup_stats, steady_stats, saturate_stats, tail_stats;
  slot.phase.store(&steady_phase);
  slot.stats.store(&warmup_stats);
  std::vector<std::unique_ptr<SimWorker>> workers;
  if (!StartWorkers(flags, &slot, workers)) return 1;
  std::fprintf(stderr, "bench_load: %d workers registered, %.0f s since start\n", flags.workers,
               absl::ToDoubleSeconds(absl::Now() - start));
  absl::SleepFor(absl::Seconds(flags.warmup_s));
  const PhaseResult steady =
      RunPhase(steady_phase, flags.steady_s, steady_stats, &warmup_stats, &slot, pid);
  const PhaseResult saturate =
      RunPhase(saturate_phase, flags.saturate_s, saturate_stats, &tail_stats, &slot, pid);
  for (auto& worker : workers) worker->RequestStop();  // all at once: no reporter outlives
  for (auto& worker : workers) worker->Stop();         // the measured phases by much
  std::fprintf(stderr, "bench_load: phases done, %.0f s since start\n",
               absl::ToDoubleSeconds(absl::Now() - start));

  const std::optional<std::string> raw_sorted =
      RawPhase(flags, flags.raw_db, RawInsertOrder{}, saturate);
  const std::optional<std::string> raw_arrival =
      RawPhase(flags, flags.raw_arrival_db, {flags.workers, flags.saturate_points}, saturate);
  if (!raw_sorted || !raw_arrival) return 1;
  PrintReport(flags, *runs, steady, saturate, *raw_sorted, *raw_arrival);
  return 0;
}

}  // namespace
}  // namespace xmod::bench

int main(int argc, char** argv) {
  xmod::bench::Flags flags;
  CLI::App app{"bench_load: simulated workers against one running xmod-coordinator"};
  xmod::AddVersionFlag(app, "bench_load");
  app.option_defaults()->always_capture_default();
  app.add_option("--addr", flags.addr, "the coordinator's gRPC address (127.0.0.1:PORT)");
  app.add_option("--coordinator_pid", flags.coordinator_pid,
                 "the coordinator's process id, for CPU and memory");
  app.add_option("--db", flags.db, "the coordinator's database (source rows of the raw phase)");
  app.add_option("--raw_db", flags.raw_db,
                 "where the raw phase writes its database (must not exist)");
  app.add_option("--raw_arrival_db", flags.raw_arrival_db,
                 "where the raw phase in arrival order writes its database (must not exist)");
  app.add_option("--workers", flags.workers, "simulated workers, one slot each");
  app.add_option("--heartbeat_ms", flags.heartbeat_ms, "heartbeat period of each worker");
  app.add_option("--run_ms", flags.run_ms,
                 "how long each simulated run reports metrics before finishing");
  app.add_option("--warmup_s", flags.warmup_s, "seconds of steady load before measuring");
  app.add_option("--steady_s", flags.steady_s, "seconds of the steady phase");
  app.add_option("--saturate_s", flags.saturate_s, "seconds of the saturate phase");
  app.add_option("--steady_points", flags.steady_points,
                 "points per report (one report a second) when steady");
  app.add_option("--saturate_points", flags.saturate_points, "points per report when saturating");
  app.add_option("--raw_rows_per_transaction", flags.raw_rows_per_transaction,
                 "rows per commit of the raw phase");
  if (std::optional<int> exit = xmod::ParseCommandLine(app, argc, argv)) return *exit;
  return xmod::bench::Main(flags);
}
