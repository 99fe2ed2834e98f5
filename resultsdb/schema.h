// The results database's schema (docs/results-database.md): tables, views and versioned
// migrations (PRAGMA user_version). Migrate() brings a database at any older version up to
// kSchemaVersion inside one transaction; a newer database is refused. The coordinator
// migrates at start; readers (resultsdb/run_curves.h) check the version they find.
#ifndef XMOD_RESULTSDB_SCHEMA_H_
#define XMOD_RESULTSDB_SCHEMA_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

inline constexpr int kSchemaVersion = 12;

// Applies every migration the database lacks. FAILED_PRECONDITION when the database was
// written by a newer coordinator.
absl::Status Migrate(Db& db);

// Applies the migrations up to `version` only (1 <= version <= kSchemaVersion), e.g. to
// build a database as an older coordinator left it; INVALID_ARGUMENT for another version,
// FAILED_PRECONDITION when the database is newer than `version`.
absl::Status MigrateTo(Db& db, int version);

// The version stored in the database (0 for a fresh file).
absl::StatusOr<int> SchemaVersion(Db& db);

}  // namespace xmod

#endif  // XMOD_RESULTSDB_SCHEMA_H_
