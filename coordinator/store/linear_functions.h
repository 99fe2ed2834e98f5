// RegisterLinearFunctions: trim(X, Y), ltrim(X, Y), rtrim(X, Y), instr(X, Y) and
// replace(X, Y, Z) for a user query's connection, with the results of SQLite's built-ins in
// time linear in their arguments. The built-ins compare every position of X with all of Y
// inside one virtual-machine step, where neither the progress handler nor sqlite3_interrupt
// can stop them: a trim of 1 MiB by a set of 0.5 M characters ran for minutes, an instr of
// 1 MiB and 0.5 MiB for 5 s of CPU.
#ifndef XMOD_COORDINATOR_STORE_LINEAR_FUNCTIONS_H_
#define XMOD_COORDINATOR_STORE_LINEAR_FUNCTIONS_H_

#include <sqlite3.h>

#include "absl/status/status.h"

namespace xmod {

// Overrides those functions of `db` (the one-argument trims stay built-in). A trim character
// set with a character of more than 4 bytes (malformed UTF-8) is an error ("trim: ...").
// INTERNAL when SQLite refuses a registration.
absl::Status RegisterLinearFunctions(sqlite3* db);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_LINEAR_FUNCTIONS_H_
