// The `studies` and `study_members` tables (schema version 2; coordinator/fitting/studies.h
// validates what goes in): a study's stored spec, its member sweeps, and the sweeps a member
// may name. Each function runs inside a Store::Read or Store::Write closure.
#ifndef XMOD_COORDINATOR_STORE_STUDY_ROWS_H_
#define XMOD_COORDINATOR_STORE_STUDY_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "resultsdb/sqlite_db.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {

// The ids of the sweeps named `name`, ascending (names need not be unique).
absl::StatusOr<std::vector<int64_t>> SweepIdsNamed(Db& db, absl::string_view name);

// Stores a validated study — `spec` with every member's sweep_id resolved — created by
// credential `owner` ("" = anonymous), and one study_members row per member, in order.
// Returns the study with its new id.
absl::StatusOr<xmod::v1::Study> InsertStudyRows(Db& db, xmod::v1::StudySpec spec,
                                                const std::string& owner, int64_t now_ms);

// NOT_FOUND "study 'NAME' not found".
absl::StatusOr<xmod::v1::Study> LoadStudy(Db& db, absl::string_view name);
// NOT_FOUND "study ID not found".
absl::StatusOr<xmod::v1::Study> LoadStudyById(Db& db, int64_t study_id);
// Newest first.
absl::StatusOr<std::vector<xmod::v1::Study>> LoadStudies(Db& db);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_STUDY_ROWS_H_
