// CPU time and memory of another process, read from /proc/PID/stat and /proc/PID/status
// (Linux). Thread-compatible free function.
#ifndef XMOD_BENCH_LOAD_PROC_STATS_H_
#define XMOD_BENCH_LOAD_PROC_STATS_H_

#include <sys/types.h>

#include "absl/status/statusor.h"

namespace xmod::bench {

struct ProcSample {
  double cpu_seconds = 0;      // user + system time so far
  int64_t rss_bytes = 0;       // resident set now (VmRSS)
  int64_t peak_rss_bytes = 0;  // high-water mark of the resident set (VmHWM)
};

// NOT_FOUND when the process is gone.
absl::StatusOr<ProcSample> SampleProcess(pid_t pid);

}  // namespace xmod::bench

#endif  // XMOD_BENCH_LOAD_PROC_STATS_H_
