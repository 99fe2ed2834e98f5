// See gpu_monitor.h.
#include "worker/gpu_monitor.h"

#include <algorithm>
#include <string>
#include <utility>

#include "glog/logging.h"

namespace xmod {
namespace {

prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& registry, const char* name,
                                                   const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

}  // namespace

GpuMonitor::GpuMonitor(std::unique_ptr<GpuTelemetry> telemetry, prometheus::Registry& registry,
                       absl::Duration interval)
    : telemetry_(std::move(telemetry)),
      utilization_(GaugeFamily(registry, "xmod_worker_gpu_utilization_ratio",
                               "Fraction of NVML's last sample period a kernel ran, per GPU.")),
      memory_used_(GaugeFamily(registry, "xmod_worker_gpu_memory_used_bytes",
                               "Device memory in use, per GPU.")),
      memory_total_(
          GaugeFamily(registry, "xmod_worker_gpu_memory_total_bytes", "Device memory, per GPU.")),
      power_(GaugeFamily(registry, "xmod_worker_gpu_power_watts",
                         "Board power draw, per GPU (where the GPU reports it).")),
      temperature_(GaugeFamily(registry, "xmod_worker_gpu_temperature_celsius",
                               "GPU core temperature, per GPU.")) {
  if (interval > absl::ZeroDuration()) thread_ = std::thread([this, interval] { Loop(interval); });
}

GpuMonitor::~GpuMonitor() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void GpuMonitor::Track(AttemptKey key, std::vector<int> gpus, std::vector<int> pids) {
  absl::MutexLock lock(&mu_);
  tracked_[key] = Tracked{std::move(gpus), std::move(pids), 0};
}

int64_t GpuMonitor::Untrack(AttemptKey key) {
  absl::MutexLock lock(&mu_);
  auto it = tracked_.find(key);
  if (it == tracked_.end()) return 0;
  const int64_t peak = it->second.peak_bytes;
  tracked_.erase(it);
  return peak;
}

void GpuMonitor::Loop(absl::Duration interval) {
  do {
    if (absl::Status s = SampleOnce(); !s.ok()) {
      absl::MutexLock lock(&mu_);
      if (!failing_) LOG(WARNING) << "GPU telemetry: " << s << " (retried every sample)";
      failing_ = true;
    }
  } while (!stop_.WaitForNotificationWithTimeout(interval));
}

absl::Status GpuMonitor::SampleOnce() {
  absl::StatusOr<std::vector<GpuReading>> readings = telemetry_->Sample();  // unlocked
  if (!readings.ok()) return readings.status();
  absl::MutexLock lock(&mu_);
  failing_ = false;
  for (const GpuReading& reading : *readings) SetGauges(reading);
  for (auto& [key, tracked] : tracked_) {
    tracked.peak_bytes = std::max(tracked.peak_bytes, HeldBy(tracked, *readings));
  }
  return absl::OkStatus();
}

void GpuMonitor::SetGauges(const GpuReading& reading) {
  auto it = gauges_.find(reading.index);
  if (it == gauges_.end()) {
    const prometheus::Labels labels = {{"gpu", std::to_string(reading.index)},
                                       {"name", reading.name}};
    it = gauges_
             .emplace(reading.index,
                      Gauges{&utilization_.Add(labels), &memory_used_.Add(labels),
                             &memory_total_.Add(labels), nullptr, &temperature_.Add(labels)})
             .first;
    if (reading.power_watts >= 0) it->second.power = &power_.Add(labels);
  }
  Gauges& g = it->second;
  if (reading.utilization >= 0) g.utilization->Set(reading.utilization);
  g.memory_used->Set(static_cast<double>(reading.memory_used_bytes));
  g.memory_total->Set(static_cast<double>(reading.memory_total_bytes));
  if (g.power != nullptr && reading.power_watts >= 0) g.power->Set(reading.power_watts);
  if (reading.temperature_celsius >= 0) g.temperature->Set(reading.temperature_celsius);
}

int64_t GpuMonitor::HeldBy(const Tracked& tracked, const std::vector<GpuReading>& readings) {
  int64_t peak = 0;
  for (const GpuReading& reading : readings) {
    if (std::find(tracked.gpus.begin(), tracked.gpus.end(), reading.index) == tracked.gpus.end()) {
      continue;
    }
    int64_t by_pid = 0;
    bool listed = false;
    for (const GpuReading::Process& p : reading.processes) {
      if (std::find(tracked.pids.begin(), tracked.pids.end(), p.pid) == tracked.pids.end()) {
        continue;
      }
      listed = true;
      by_pid += p.memory_bytes;
    }
    peak = std::max(peak, listed ? by_pid : reading.memory_used_bytes);
  }
  return peak;
}

}  // namespace xmod
