// The rows of a pilot sweep that the B.3 pilot selection reads (fitter/pilot_selection.h):
// every run of the sweep with its configuration, state, total parameters and final
// validation loss (the run_summary view's final_val_loss). Rows only: which runs replicate
// each other is decided above the store. Runs inside a Store::Read closure.
#ifndef XMOD_COORDINATOR_STORE_PILOT_ROWS_H_
#define XMOD_COORDINATOR_STORE_PILOT_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/types.pb.h"

namespace xmod {

// A run of a pilot sweep (the runs row, with run_summary's final_val_loss).
struct PilotRunRow {
  int64_t run_id = 0;
  xmod::v1::RunState state = xmod::v1::RUN_STATE_UNSPECIFIED;
  xmod::v1::Architecture arch = xmod::v1::ARCHITECTURE_UNSPECIFIED;
  std::string backbone;
  int seq_len = 0;
  double flop_budget = 0;
  int k = 1;
  std::optional<double> a;
  std::string moe;  // "" when NULL
  double total_params = 0;
  std::optional<double> final_val_loss;   // nullopt: none yet
  std::optional<xmod::v1::RunSpec> spec;  // nullopt: runs.spec does not parse
};

// Every run of sweep `sweep_id`, by id. NOT_FOUND naming the sweep when it does not exist.
absl::StatusOr<std::vector<PilotRunRow>> ReadPilotRuns(Db& db, int64_t sweep_id);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_PILOT_ROWS_H_
