// CPU time and memory of another process, read from /proc/PID/stat and /proc/PID/status,
// and CPU time of its threads of one name, from /proc/PID/task/TID (Linux). Thread-compatible
// free functions.
#ifndef XMOD_BENCH_LOAD_PROC_STATS_H_
#define XMOD_BENCH_LOAD_PROC_STATS_H_

#include <sys/types.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xmod::bench {

struct ProcSample {
  double cpu_seconds = 0;      // user + system time so far
  int64_t rss_bytes = 0;       // resident set now (VmRSS)
  int64_t peak_rss_bytes = 0;  // high-water mark of the resident set (VmHWM)
};

// NOT_FOUND when the process is gone.
absl::StatusOr<ProcSample> SampleProcess(pid_t pid);

// User + system time so far of the threads of `pid` whose name (/proc/PID/task/TID/comm) is
// `thread_name`, summed. NOT_FOUND when the process has no such thread.
absl::StatusOr<double> ThreadCpuSeconds(pid_t pid, absl::string_view thread_name);

}  // namespace xmod::bench

#endif  // XMOD_BENCH_LOAD_PROC_STATS_H_
