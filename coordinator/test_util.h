// Helpers for the coordinator tests: fresh temporary directories and a small valid sweep.
#ifndef XMOD_COORDINATOR_TEST_UTIL_H_
#define XMOD_COORDINATOR_TEST_UTIL_H_

#include <string>

#include "xmod/v1/spec.pb.h"

namespace xmod {

// A new empty directory under the test's temporary directory.
std::string NewTestDir(const std::string& name);

// A sweep over the "tiny-test" backbone with data files created in `dir`:
// archs [DENSE, XMOD], L = [64], K = [1, 2, 4], A = [1], one budget -> 3 runs
// (DENSE, XMOD K=1 folded into DENSE, XMOD K=2, XMOD K=4).
xmod::v1::SweepSpec TinySweep(const std::string& dir);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_TEST_UTIL_H_
