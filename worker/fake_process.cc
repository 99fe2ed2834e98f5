#include "worker/fake_process.h"

#include <signal.h>

namespace xmod {
namespace {

class FakeChildHandle : public ChildProcess {
 public:
  explicit FakeChildHandle(std::shared_ptr<FakeChild> child) : child_(std::move(child)) {}
  ~FakeChildHandle() override {
    if (!child_->Poll().has_value()) child_->Kill(SIGKILL);
  }
  int pid() const override { return child_->pid(); }
  absl::StatusOr<bool> ReadEvent(v1::TrainerEvent* event) override {
    return child_->ReadEvent(event);
  }
  ExitStatus Wait() override { return child_->Wait(); }
  std::optional<ExitStatus> Poll() override { return child_->Poll(); }
  void Signal(int signo) override { child_->Signal(signo); }
  std::string StderrTail() override { return child_->StderrTail(); }
  void ExtendLease(int64_t deadline_ms) override { child_->ExtendLease(deadline_ms); }

 private:
  std::shared_ptr<FakeChild> child_;
};

}  // namespace

FakeChild::FakeChild(LaunchOptions options, int pid) : options_(std::move(options)), pid_(pid) {}

void FakeChild::Emit(const v1::TrainerEvent& event) {
  absl::MutexLock lock(&mu_);
  if (!events_closed_) events_.push_back(event);
}

void FakeChild::EmitMetric(int64_t step, const std::string& name, double value) {
  v1::TrainerEvent event;
  v1::MetricPoint* point = event.mutable_metric();
  point->set_step(step);
  point->set_tokens(step * 1024);
  point->set_flops(static_cast<double>(step) * 1e9);
  point->set_name(name);
  point->set_value(value);
  Emit(event);
}

void FakeChild::EmitCheckpoint(int64_t step, const std::string& path) {
  v1::TrainerEvent event;
  event.mutable_checkpoint()->set_step(step);
  event.mutable_checkpoint()->set_path(path);
  Emit(event);
}

void FakeChild::Exit(int code, const std::string& stderr_text) {
  absl::MutexLock lock(&mu_);
  EndLocked({code, 0}, stderr_text);
}

void FakeChild::Kill(int signal) {
  absl::MutexLock lock(&mu_);
  EndLocked({0, signal}, "");
}

void FakeChild::EndLocked(ExitStatus status, const std::string& stderr_text) {
  if (exit_.has_value()) return;
  stderr_ += stderr_text;
  if (stderr_.size() > kStderrTailBytes) stderr_.erase(0, stderr_.size() - kStderrTailBytes);
  events_closed_ = true;
  exit_ = status;
}

void FakeChild::set_on_signal(std::function<void(FakeChild&, int)> on_signal) {
  absl::MutexLock lock(&mu_);
  on_signal_ = std::move(on_signal);
}

std::vector<int> FakeChild::signals() const {
  absl::MutexLock lock(&mu_);
  return signals_;
}

bool FakeChild::exited() const {
  absl::MutexLock lock(&mu_);
  return exit_.has_value();
}

absl::StatusOr<bool> FakeChild::ReadEvent(v1::TrainerEvent* event) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](FakeChild* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !self->events_.empty() || self->events_closed_;
      },
      this));
  if (events_.empty()) return false;
  *event = std::move(events_.front());
  events_.pop_front();
  return true;
}

ExitStatus FakeChild::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](FakeChild* self) ABSL_NO_THREAD_SAFETY_ANALYSIS { return self->exit_.has_value(); },
      this));
  return *exit_;
}

std::optional<ExitStatus> FakeChild::Poll() {
  absl::MutexLock lock(&mu_);
  return exit_;
}

void FakeChild::Signal(int signo) {
  std::function<void(FakeChild&, int)> on_signal;
  {
    absl::MutexLock lock(&mu_);
    if (exit_.has_value()) return;
    signals_.push_back(signo);
    on_signal = on_signal_;
  }
  if (signo == SIGKILL || !on_signal) {
    Kill(signo);
  } else {
    on_signal(*this, signo);
  }
}

std::string FakeChild::StderrTail() {
  absl::MutexLock lock(&mu_);
  return stderr_;
}

void FakeChild::ExtendLease(int64_t deadline_ms) {
  absl::MutexLock lock(&mu_);
  if (!exit_.has_value()) lease_deadlines_.push_back(deadline_ms);
}

std::vector<int64_t> FakeChild::lease_deadlines() const {
  absl::MutexLock lock(&mu_);
  return lease_deadlines_;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> FakeLauncher::Start(const LaunchOptions& options) {
  std::function<void(FakeChild&)> on_start;
  std::shared_ptr<FakeChild> child;
  {
    absl::MutexLock lock(&mu_);
    if (!next_error_.ok()) {
      absl::Status error = next_error_;
      next_error_ = absl::OkStatus();
      return error;
    }
    child = std::make_shared<FakeChild>(options, 1000 + static_cast<int>(children_.size()));
    on_start = on_start_;
  }
  if (on_start) on_start(*child);
  {
    absl::MutexLock lock(&mu_);
    children_.push_back(child);
  }
  return std::unique_ptr<ChildProcess>(std::make_unique<FakeChildHandle>(child));
}

void FakeLauncher::FailNextStart(absl::Status status) {
  absl::MutexLock lock(&mu_);
  next_error_ = std::move(status);
}

void FakeLauncher::set_on_start(std::function<void(FakeChild&)> on_start) {
  absl::MutexLock lock(&mu_);
  on_start_ = std::move(on_start);
}

std::shared_ptr<FakeChild> FakeLauncher::WaitForChild(size_t index, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, index]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return children_.size() > index; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) return nullptr;
  return children_[index];
}

size_t FakeLauncher::started() const {
  absl::MutexLock lock(&mu_);
  return children_.size();
}

}  // namespace xmod
