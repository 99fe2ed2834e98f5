#include "worker/process_supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <thread>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "trainer_contract/event_stream.h"

extern char** environ;

namespace xmod {

std::string ExitStatus::ToString() const {
  if (signal != 0) return absl::StrCat("killed by signal ", signal);
  return absl::StrCat("exit code ", code);
}

namespace {

absl::Status ErrnoStatus(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", strerror(errno)));
}

void CloseIfOpen(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

class PosixChild : public ChildProcess {
 public:
  // Takes ownership of the descriptors (`control_write` may be -1).
  PosixChild(pid_t pid, int events_read, int stderr_read, int log_fd, int control_write)
      : pid_(pid), events_read_(events_read), control_write_(control_write), events_(events_read) {
    tee_ = std::thread([this, stderr_read, log_fd] { TeeStderr(stderr_read, log_fd); });
  }

  ~PosixChild() override {
    Signal(SIGKILL);
    Wait();
    close(events_read_);
    if (control_write_ >= 0) close(control_write_);
  }

  int pid() const override { return pid_; }

  absl::StatusOr<bool> ReadEvent(v1::TrainerEvent* event) override {
    absl::StatusOr<bool> read = events_.Next(event);
    if (!read.ok()) {
      return absl::DataLossError(absl::StrCat("pid ", pid_, ": ", read.status().message()));
    }
    return read;
  }

  ExitStatus Wait() override {
    // Wait without reaping, so that Signal never reaches a recycled pid.
    siginfo_t info;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (reaped_) break;
      }
      int rc = waitid(P_PID, pid_, &info, WEXITED | WNOWAIT);
      if (rc == 0 || errno == ECHILD) {
        absl::MutexLock lock(&mu_);
        ReapLocked(/*block=*/true);
        break;
      }
      if (errno != EINTR) PLOG(FATAL) << "waitid " << pid_;
    }
    absl::call_once(tee_joined_, [this] { tee_.join(); });
    absl::MutexLock lock(&mu_);
    return status_;
  }

  std::optional<ExitStatus> Poll() override {
    absl::MutexLock lock(&mu_);
    if (!reaped_) ReapLocked(/*block=*/false);
    if (!reaped_) return std::nullopt;
    return status_;
  }

  void Signal(int signo) override {
    absl::MutexLock lock(&mu_);
    if (!reaped_) kill(-pid_, signo);
  }

  std::string StderrTail() override {
    absl::MutexLock lock(&mu_);
    return tail_;
  }

  void ExtendLease(int64_t deadline_ms) override {
    if (control_write_ < 0) return;
    v1::TrainerControl control;
    control.set_lease_deadline_ms(deadline_ms);
    const std::string bytes = DelimitedBytes(control);
    absl::MutexLock lock(&mu_);
    if (reaped_) return;
    // One packet per message: it arrives whole or not at all. A full buffer (EAGAIN) or a
    // closed peer (EPIPE, no SIGPIPE) leaves the child with its earlier deadline.
    if (send(control_write_, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
      VLOG(1) << "pid " << pid_ << ": lease extension not delivered: " << strerror(errno);
    }
  }

 private:
  void ReapLocked(bool block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reaped_) return;
    int status = 0;
    pid_t rc;
    do {
      rc = waitpid(pid_, &status, block ? 0 : WNOHANG);
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) return;  // still running
    reaped_ = true;
    if (rc < 0) {
      // Reaped elsewhere (should not happen): report it as lost.
      status_.signal = SIGKILL;
      return;
    }
    if (WIFSIGNALED(status)) {
      status_.signal = WTERMSIG(status);
    } else {
      status_.code = WEXITSTATUS(status);
    }
  }

  // Copies the child's stderr into its log file and keeps the last kStderrTailBytes.
  void TeeStderr(int stderr_read, int log_fd) {
    char buffer[4096];
    while (true) {
      ssize_t n = read(stderr_read, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      for (ssize_t done = 0; done < n;) {
        ssize_t w = write(log_fd, buffer + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += w;
      }
      absl::MutexLock lock(&mu_);
      tail_.append(buffer, n);
      if (tail_.size() > kStderrTailBytes) tail_.erase(0, tail_.size() - kStderrTailBytes);
    }
    close(stderr_read);
    close(log_fd);
  }

  const pid_t pid_;
  const int events_read_;
  const int control_write_;
  EventReader events_;  // used by the reading thread only
  std::thread tee_;
  absl::once_flag tee_joined_;

  absl::Mutex mu_;
  bool reaped_ ABSL_GUARDED_BY(mu_) = false;
  ExitStatus status_ ABSL_GUARDED_BY(mu_);
  std::string tail_ ABSL_GUARDED_BY(mu_);
};

// What execve gets, prepared before fork: after it, only async-signal-safe calls are allowed
// (the worker is multi-threaded). argv points into the LaunchOptions, envp into `env`.
struct ExecImage {
  std::vector<char*> argv;
  std::vector<std::string> env;  // NAME=value: the worker's environment with options.env over it
  std::vector<char*> envp;
  std::string exec_error;  // written before the reason when execve fails
};

void PrepareExec(const LaunchOptions& options, ExecImage* image) {
  for (const std::string& arg : options.argv) {
    image->argv.push_back(const_cast<char*>(arg.c_str()));
  }
  image->argv.push_back(nullptr);
  std::map<std::string, std::string> env_map;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env_map[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : options.env) env_map[key] = value;
  for (const auto& [key, value] : env_map) image->env.push_back(absl::StrCat(key, "=", value));
  for (const std::string& entry : image->env) {
    image->envp.push_back(const_cast<char*>(entry.c_str()));
  }
  image->envp.push_back(nullptr);
  image->exec_error = absl::StrCat("xmod-worker: cannot execute ", options.argv[0], ": ");
}

// The descriptors a child is started with; -1 where not open.
struct ChildFds {
  int events[2] = {-1, -1};
  int control[2] = {-1, -1};  // [0] the child's end, [1] the worker's
  int err[2] = {-1, -1};
  int log_fd = -1;
  int devnull = -1;

  void CloseAll() {
    for (int* fd :
         {&events[0], &events[1], &control[0], &control[1], &err[0], &err[1], &log_fd, &devnull}) {
      CloseIfOpen(*fd);
    }
  }
};

// Opens the pipes, the control socket (if any), the log file and /dev/null; on an error
// closes what it opened.
absl::Status OpenChildFds(const LaunchOptions& options, ChildFds* fds) {
  absl::Status status;
  if (pipe2(fds->events, O_CLOEXEC) != 0 || pipe2(fds->err, O_CLOEXEC) != 0) {
    status = ErrnoStatus("pipe2");
  } else if (options.control_fd != -1 &&
             socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds->control) != 0) {
    status = ErrnoStatus("socketpair");
  } else if (fds->log_fd =
                 open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
             fds->log_fd < 0) {
    status = ErrnoStatus(absl::StrCat("open ", options.log_path));
  } else if (fds->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC); fds->devnull < 0) {
    status = ErrnoStatus("open /dev/null");
  }
  if (!status.ok()) fds->CloseAll();
  return status;
}

// The child's side of fork: async-signal-safe calls only. Descriptors 0..2 are taken first;
// the event and control sources are then moved above every target number, so placing one
// cannot overwrite the other.
[[noreturn]] void ExecChild(const LaunchOptions& options, const ExecImage& image,
                            const ChildFds& fds) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, nullptr);
  setpgid(0, 0);
  dup2(fds.devnull, 0);
  dup2(fds.log_fd, 1);
  dup2(fds.err[1], 2);
  const int high = std::max(options.events_fd, options.control_fd) + 1;
  const int events_src = fcntl(fds.events[1], F_DUPFD_CLOEXEC, high);
  dup2(events_src, options.events_fd);
  if (options.control_fd != -1) {
    const int control_src = fcntl(fds.control[0], F_DUPFD_CLOEXEC, high);
    dup2(control_src, options.control_fd);
  }
  execve(image.argv[0], image.argv.data(), image.envp.data());
  const char* reason = strerror(errno);
  ssize_t ignored = write(2, image.exec_error.data(), image.exec_error.size());
  ignored = write(2, reason, strlen(reason));
  ignored = write(2, "\n", 1);
  (void)ignored;
  _exit(127);
}

class PosixLauncher : public ProcessLauncher {
 public:
  absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const LaunchOptions& options) override {
    if (options.argv.empty()) return absl::InvalidArgumentError("argv: empty");
    if (options.events_fd < 3) return absl::InvalidArgumentError("events_fd: must be >= 3");
    if (options.control_fd != -1 &&
        (options.control_fd < 3 || options.control_fd == options.events_fd)) {
      return absl::InvalidArgumentError("control_fd: must be -1, or >= 3 and not events_fd");
    }
    ExecImage image;
    PrepareExec(options, &image);
    ChildFds fds;
    if (absl::Status status = OpenChildFds(options, &fds); !status.ok()) return status;

    pid_t pid = fork();
    if (pid < 0) {
      absl::Status status = ErrnoStatus("fork");
      fds.CloseAll();
      return status;
    }
    if (pid == 0) ExecChild(options, image, fds);
    setpgid(pid, pid);  // also here, so the group exists before Start returns
    CloseIfOpen(fds.events[1]);
    CloseIfOpen(fds.control[0]);
    CloseIfOpen(fds.err[1]);
    CloseIfOpen(fds.devnull);
    auto child =
        std::make_unique<PosixChild>(pid, fds.events[0], fds.err[0], fds.log_fd, fds.control[1]);
    VLOG(1) << "started pid " << pid << ": " << options.argv[0];
    return std::unique_ptr<ChildProcess>(std::move(child));
  }
};

}  // namespace

std::unique_ptr<ProcessLauncher> NewPosixLauncher() { return std::make_unique<PosixLauncher>(); }

}  // namespace xmod
