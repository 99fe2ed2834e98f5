// See proc_stats.h.
#include "bench/load/proc_stats.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace xmod::bench {

absl::StatusOr<ProcSample> SampleProcess(pid_t pid) {
  absl::StatusOr<std::string> stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  absl::StatusOr<std::string> status = ReadFile(absl::StrCat("/proc/", pid, "/status"));
  if (!stat.ok()) return stat.status();
  if (!status.ok()) return status.status();
  // Fields after "(comm)": state is field 3, utime 14 and stime 15 (proc(5)).
  const size_t paren = stat->rfind(')');
  if (paren == std::string::npos) return absl::DataLossError("unreadable /proc stat");
  std::istringstream fields(stat->substr(paren + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  ProcSample sample;
  sample.cpu_seconds =
      static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  std::istringstream lines(*status);
  std::string line;
  while (std::getline(lines, line)) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %lld kB", &kib) == 1) sample.rss_bytes = kib * 1024;
    if (std::sscanf(line.c_str(), "VmHWM: %lld kB", &kib) == 1) sample.peak_rss_bytes = kib * 1024;
  }
  return sample;
}

}  // namespace xmod::bench
