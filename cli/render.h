// Tables of xmod.v1 records as xmodctl prints them: sweeps, runs, attempts, checkpoints,
// metrics, query results, fits, predictions and plans. Every function is pure; the tables
// are rendered by format.h in the user's --output format.
#ifndef XMOD_CLI_RENDER_H_
#define XMOD_CLI_RENDER_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/format.h"
#include "google/protobuf/message.h"
#include "xmod/v1/coordinator.pb.h"
#include "xmod/v1/types.pb.h"

namespace xmod::cli {

// Lower-case names without prefixes: "running", "active", "xmod".
std::string RunStateName(xmod::v1::RunState state);
std::string SweepStateName(xmod::v1::SweepState state);
std::string ArchName(xmod::v1::Architecture arch);

// Training FLOPs budget of a run: its progress' budget, else its spec's.
double RunBudget(const xmod::v1::Run& run);

// Why a SUCCEEDED run spent less than its budget ("ended at step 399 of 399: budget
// reached in the last whole step (9.98e11 of 1.00e12 FLOPs)"); "" for any other run. The
// progress shown is the coordinator's Progress.fraction (1 once SUCCEEDED).
std::string EndedShortNote(const xmod::v1::Run& run);

// -o json: the response message as the API prints it everywhere (common/proto_json.h),
// indented, to `out`. INTERNAL if protobuf cannot print it (then nothing is written).
absl::Status PrintJson(std::ostream& out, const google::protobuf::Message& message);

Table SweepsTable(const std::vector<xmod::v1::Sweep>& sweeps);
// Key/value table of one sweep (id, name, state, counts, created).
Table SweepSummaryTable(const xmod::v1::Sweep& sweep);
// Queue and progress view: id, name, state, arch, K, A, L, backbone, progress, step, losses.
Table RunsTable(const std::vector<xmod::v1::Run>& runs);
// Replicate groups (ListRuns with group): one row a configuration, its first run's columns,
// the runs' states, and val loss and live Δ as "mean ± sd" with their counts.
Table RunGroupsTable(const std::vector<xmod::v1::RunGroup>& groups);
// As planned by SubmitSweep: name, arch, K, A, L, backbone, params, FLOPs/token, budget,
// tokens the budget buys (budget / (train_flops_multiplier x FLOPs/token)) and those tokens
// per active-equivalent parameter (N_act, embeddings included).
Table PlannedRunsTable(const std::vector<xmod::v1::Run>& runs);
// A dry run's forecast (docs/operations.md, "Forecasts"): one row per run, its totals and wall
// time in the title.
Table ForecastTable(const xmod::v1::SweepForecast& forecast);
// Key/value table of one run; "waiting" is why a queued run is not placed, where known.
Table RunSummaryTable(const xmod::v1::GetRunResponse& response);
Table AttemptsTable(const xmod::v1::GetRunResponse& response);
Table CheckpointsTable(const xmod::v1::GetRunResponse& response);
// Long format: one row per point (name, step, tokens, flops, value).
Table MetricsTable(const xmod::v1::GetMetricsResponse& response);
// Query results: numeric-looking values are right-aligned numbers, NULL is missing.
Table QueryTable(const xmod::v1::QueryResponse& response);
Table FitParamsTable(const xmod::v1::Fit& fit);
Table FitSummaryTable(const xmod::v1::Fit& fit);
Table FitCvTable(const xmod::v1::Fit& fit);
Table StudiesTable(const std::vector<xmod::v1::Study>& studies);
Table StudySummaryTable(const xmod::v1::Study& study);
// The member sweeps with their names and roles.
Table StudyMembersTable(const xmod::v1::Study& study);
Table PredictionsTable(const std::vector<xmod::v1::Prediction>& predictions);

}  // namespace xmod::cli

#endif  // XMOD_CLI_RENDER_H_
