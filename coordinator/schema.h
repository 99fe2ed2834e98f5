// The coordinator's database schema: tables, views and versioned migrations
// (PRAGMA user_version). Migrate() brings a database at any older version up to
// kSchemaVersion inside one transaction; a newer database is refused.
#ifndef XMOD_COORDINATOR_SCHEMA_H_
#define XMOD_COORDINATOR_SCHEMA_H_

#include "absl/status/status.h"
#include "coordinator/sqlite_db.h"

namespace xmod {

inline constexpr int kSchemaVersion = 2;

// Applies every migration the database lacks. FAILED_PRECONDITION when the database was
// written by a newer coordinator.
absl::Status Migrate(Db& db);

// The version stored in the database (0 for a fresh file).
absl::StatusOr<int> SchemaVersion(Db& db);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_SCHEMA_H_
