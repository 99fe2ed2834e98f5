// RegisterLinearTrim: trim(X, Y), ltrim(X, Y) and rtrim(X, Y) for a user query's connection,
// the same results as SQLite's built-ins in time linear in X and Y. The built-ins compare each
// character of X with every character of Y inside one virtual-machine step, where neither the
// progress handler nor sqlite3_interrupt can stop them: 1 MiB against 1 MiB ran for minutes.
#ifndef XMOD_COORDINATOR_LINEAR_TRIM_H_
#define XMOD_COORDINATOR_LINEAR_TRIM_H_

#include <sqlite3.h>

#include "absl/status/status.h"

namespace xmod {

// Overrides the two-argument trim, ltrim and rtrim of `db` (one-argument calls stay
// built-in). A character set with a character of more than 4 bytes (malformed UTF-8) is an
// error ("trim: ..."). INTERNAL when SQLite refuses the registration.
absl::Status RegisterLinearTrim(sqlite3* db);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_LINEAR_TRIM_H_
