// See lease.h.
#include "model/train/lease.h"

#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>

#include "google/protobuf/io/coded_stream.h"
#include "trainer_contract/exit_codes.h"
#include "xmod/v1/trainer.pb.h"

namespace xmod {
namespace {

// The longest the watchdog sleeps before reading the clock again.
constexpr int64_t kMaxSleepMs = 1000;

// The message and exit of a lapsed lease; async-signal-safe calls only after formatting.
[[noreturn]] void ExitLapsed(int64_t deadline_ms) {
  char line[160];
  const int n = std::snprintf(line, sizeof(line),
                              "xmod-train: the attempt's lease lapsed (deadline %lld ms on "
                              "CLOCK_MONOTONIC): stopping without a checkpoint\n",
                              static_cast<long long>(deadline_ms));
  if (n > 0) {
    ssize_t ignored = ::write(2, line, std::min<size_t>(static_cast<size_t>(n), sizeof(line)));
    (void)ignored;
  }
  ::_exit(kExitLeaseExpired);
}

std::unique_ptr<LeaseWatchdog>& ProcessLease() {
  static std::unique_ptr<LeaseWatchdog>* lease = new std::unique_ptr<LeaseWatchdog>();
  return *lease;
}

}  // namespace

int64_t MonotonicNowMillis() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

LeaseWatchdog::LeaseWatchdog(int64_t deadline_ms, int control_fd, std::function<int64_t()> now_ms,
                             std::function<void(int64_t deadline_ms)> on_lapse)
    : control_fd_(control_fd),
      now_ms_(std::move(now_ms)),
      on_lapse_(std::move(on_lapse)),
      deadline_ms_(deadline_ms) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread([this] { Run(); });
}

LeaseWatchdog::~LeaseWatchdog() {
  if (wake_[1] >= 0) {
    const char byte = 0;
    ssize_t ignored = ::write(wake_[1], &byte, 1);
    (void)ignored;
  }
  thread_.join();
  if (wake_[0] >= 0) ::close(wake_[0]);
  if (wake_[1] >= 0) ::close(wake_[1]);
}

int64_t LeaseWatchdog::deadline_ms() const {
  absl::MutexLock lock(&mu_);
  return deadline_ms_;
}

bool LeaseWatchdog::Lapsed() const { return now_ms_() >= deadline_ms(); }

void LeaseWatchdog::ConsumeMessages() {
  size_t used = 0;
  while (used < buffer_.size()) {
    google::protobuf::io::CodedInputStream input(
        reinterpret_cast<const uint8_t*>(buffer_.data() + used),
        static_cast<int>(buffer_.size() - used));
    uint32_t size = 0;
    if (!input.ReadVarint32(&size)) break;  // the length is not complete yet
    const size_t header = static_cast<size_t>(input.CurrentPosition());
    if (buffer_.size() - used - header < size) break;  // the body is not complete yet
    v1::TrainerControl control;
    if (control.ParseFromArray(buffer_.data() + used + header, static_cast<int>(size))) {
      absl::MutexLock lock(&mu_);
      deadline_ms_ = std::max(deadline_ms_, control.lease_deadline_ms());
    }
    used += header + size;
  }
  buffer_.erase(0, used);
}

void LeaseWatchdog::Run() {
  int control = control_fd_;
  while (true) {
    const int64_t wait = deadline_ms() - now_ms_();
    if (wait <= 0) {
      on_lapse_(deadline_ms());
      return;
    }
    pollfd fds[2] = {{wake_[0], POLLIN, 0}, {control, POLLIN, 0}};
    const int n = ::poll(fds, control >= 0 ? 2 : 1, static_cast<int>(std::min(wait, kMaxSleepMs)));
    if (n < 0 && errno != EINTR) return;  // cannot watch: the checks between steps remain
    if (n <= 0) continue;
    if (fds[0].revents != 0) return;  // the destructor
    if (control >= 0 && fds[1].revents != 0) {
      char chunk[512];
      const ssize_t got = ::read(control, chunk, sizeof(chunk));
      if (got > 0) {
        buffer_.append(chunk, static_cast<size_t>(got));
        ConsumeMessages();
      } else if (got == 0 || errno != EINTR) {
        control = -1;  // the worker is gone: the deadline can no longer move
      }
    }
  }
}

void InstallLease(int64_t deadline_ms, int control_fd) {
  std::unique_ptr<LeaseWatchdog>& lease = ProcessLease();
  if (lease != nullptr) return;
  lease =
      std::make_unique<LeaseWatchdog>(deadline_ms, control_fd, &MonotonicNowMillis, &ExitLapsed);
}

void ExitIfLeaseLapsed() {
  const std::unique_ptr<LeaseWatchdog>& lease = ProcessLease();
  if (lease != nullptr && lease->Lapsed()) ExitLapsed(lease->deadline_ms());
}

}  // namespace xmod
