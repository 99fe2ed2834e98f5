// Data roots: the directories of the coordinator's machine (--data_root) under which a sweep's
// data globs (data.train_glob, data.val_glob) must lie. SubmitSweep, dry runs included (a read
// scope may call those), looks up nothing outside them, so a caller cannot learn which files
// exist elsewhere: a glob outside every root is refused without being expanded, and a glob
// under a root counts only the matches whose real path (symbolic links resolved) is under a
// root. Errors name the caller's pattern and the roots, never a file outside them.
// Without roots the coordinator expands no data glob at all. Thread-safe.
#ifndef XMOD_COORDINATOR_SPEC_DATA_ROOTS_H_
#define XMOD_COORDINATOR_SPEC_DATA_ROOTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace xmod {

// OK when every root is an absolute path; else INVALID_ARGUMENT naming --data_root.
absl::Status ValidateDataRoots(const std::vector<std::string>& roots);

// The check of one data glob at `field` ("data.train_glob"); `roots` as ValidateDataRoots
// accepts them. Empty roots: OK without a look-up. Else INVALID_ARGUMENT "FIELD: ..." when the
// pattern is relative or, with "." and ".." resolved, not under a root; and, when
// `check_exists`, when no file under a root matches it.
absl::Status CheckDataGlob(const std::string& field, const std::string& pattern,
                           const std::vector<std::string>& roots, bool check_exists);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_SPEC_DATA_ROOTS_H_
