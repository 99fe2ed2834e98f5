// See proc_stats.h.
#include "bench/load/proc_stats.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace xmod::bench {
namespace {

// utime + stime of a /proc stat file's text, in seconds.
absl::StatusOr<double> CpuSecondsOfStat(const std::string& stat) {
  // Fields after "(comm)": state is field 3, utime 14 and stime 15 (proc(5)).
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return absl::DataLossError("unreadable /proc stat");
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

absl::StatusOr<ProcSample> SampleProcess(pid_t pid) {
  absl::StatusOr<std::string> stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  absl::StatusOr<std::string> status = ReadFile(absl::StrCat("/proc/", pid, "/status"));
  if (!stat.ok()) return stat.status();
  if (!status.ok()) return status.status();
  absl::StatusOr<double> cpu = CpuSecondsOfStat(*stat);
  if (!cpu.ok()) return cpu.status();
  ProcSample sample;
  sample.cpu_seconds = *cpu;
  std::istringstream lines(*status);
  std::string line;
  while (std::getline(lines, line)) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %lld kB", &kib) == 1) sample.rss_bytes = kib * 1024;
    if (std::sscanf(line.c_str(), "VmHWM: %lld kB", &kib) == 1) sample.peak_rss_bytes = kib * 1024;
  }
  return sample;
}

absl::StatusOr<double> ThreadCpuSeconds(pid_t pid, absl::string_view thread_name) {
  std::error_code error;
  std::filesystem::directory_iterator tasks(absl::StrCat("/proc/", pid, "/task"), error);
  if (error) return absl::NotFoundError(absl::StrCat("no process ", pid));
  double seconds = 0;
  bool found = false;
  for (const std::filesystem::directory_entry& task : tasks) {
    absl::StatusOr<std::string> comm = ReadFile((task.path() / "comm").string());
    if (!comm.ok() || absl::StripAsciiWhitespace(*comm) != thread_name) continue;
    absl::StatusOr<std::string> stat = ReadFile((task.path() / "stat").string());
    if (!stat.ok()) continue;  // the thread ended
    absl::StatusOr<double> cpu = CpuSecondsOfStat(*stat);
    if (!cpu.ok()) return cpu.status();
    seconds += *cpu;
    found = true;
  }
  if (!found) return absl::NotFoundError(absl::StrCat("no thread ", thread_name, " in ", pid));
  return seconds;
}

}  // namespace xmod::bench
