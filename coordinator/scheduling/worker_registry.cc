// See worker_registry.h.
#include "coordinator/scheduling/worker_registry.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace xmod::scheduling {

absl::Status CheckRegistration(const xmod::v1::RegisterRequest& request) {
  if (request.worker_name().empty()) {
    return absl::InvalidArgumentError("worker_name: must not be empty");
  }
  if (request.worker_name().find(',') != std::string::npos) {
    return absl::InvalidArgumentError("worker_name: must not contain ','");
  }
  std::set<int> indexes;
  for (int i = 0; i < request.slots_size(); ++i) {
    if (!indexes.insert(request.slots(i).index()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("slots[", i, "].index: slot ", request.slots(i).index(), " repeats"));
    }
  }
  const int32_t first = request.rendezvous_port_first();
  const int32_t last = request.rendezvous_port_last();
  if (first < 0 || first > 65535 || (first > 0 && (last < first || last > 65535)) ||
      (first == 0 && last != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous_port_first, rendezvous_port_last: ", first, "..", last,
                     " is not a port range within 1..65535 (or 0..0 for none)"));
  }
  return absl::OkStatus();
}

std::string RendezvousAddress(const std::string& host, int32_t port) {
  return absl::StrCat("tcp://", host, ":", port);
}

void WorkerRegistry::Register(int64_t id, const xmod::v1::RegisterRequest& registration,
                              int64_t mono) {
  WorkerEntry& worker = workers_[id];
  worker.name = registration.worker_name();
  worker.slots.assign(registration.slots().begin(), registration.slots().end());
  worker.last_seen_ms = mono;
  worker.host = registration.advertise_host();
  const int32_t first = registration.rendezvous_port_first();
  const int32_t last = registration.rendezvous_port_last();
  if (worker.port_first != first || worker.port_last != last) worker.next_port = 0;
  worker.port_first = first;
  worker.port_last = last;
  worker.free_slots.clear();  // known again from its next AcquireRun
  worker.leaving = false;
  worker.epoch += 1;
}

void WorkerRegistry::Restore(const std::vector<WorkerRow>& rows, int64_t now, int64_t mono) {
  for (const WorkerRow& row : rows) {
    WorkerEntry& worker = workers_[row.id];
    worker.name = row.name;
    worker.slots = row.slots;
    worker.last_seen_ms = mono - std::max<int64_t>(0, now - row.last_seen_ms);
    worker.host = row.advertise_host;
    worker.port_first = row.rendezvous_port_first;
    worker.port_last = row.rendezvous_port_last;
  }
}

const WorkerEntry* WorkerRegistry::Find(int64_t id) const {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

void WorkerRegistry::Seen(int64_t id, int64_t mono, bool leaving) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  it->second.last_seen_ms = std::max(it->second.last_seen_ms, mono);
  if (leaving) it->second.leaving = true;
}

int WorkerRegistry::CountLive(int64_t mono) const {
  return static_cast<int>(std::count_if(workers_.begin(), workers_.end(), [&](const auto& entry) {
    return IsLive(entry.second, mono);
  }));
}

void WorkerRegistry::BeginPoll(int64_t id, const std::vector<int32_t>& free_slots) {
  WorkerEntry& worker = workers_.at(id);
  worker.free_slots = free_slots;
  worker.polling += 1;
}

void WorkerRegistry::EndPoll(int64_t id, int64_t mono) {
  WorkerEntry& worker = workers_.at(id);
  worker.polling -= 1;
  worker.poll_ended_ms = mono;
}

void WorkerRegistry::TakeSlots(int64_t id, const std::vector<int32_t>& slots) {
  std::vector<int32_t>& free = workers_.at(id).free_slots;
  for (int32_t slot : slots) free.erase(std::remove(free.begin(), free.end(), slot), free.end());
}

std::string WorkerRegistry::TakePort(int64_t id, int32_t port) {
  WorkerEntry& host = workers_.at(id);
  host.next_port = (port - host.port_first + 1) % (host.port_last - host.port_first + 1);
  return RendezvousAddress(host.host, port);
}

xmod::v1::SlotKind WorkerRegistry::KindOf(int64_t id) const {
  const WorkerEntry* worker = Find(id);
  if (worker == nullptr || worker->slots.empty()) return xmod::v1::CPU;
  return worker->slots.front().kind() == xmod::v1::CUDA ? xmod::v1::CUDA : xmod::v1::CPU;
}

int WorkerRegistry::CoresOf(int64_t id, const std::vector<int32_t>& slots) const {
  const WorkerEntry* worker = Find(id);
  if (worker == nullptr) return 0;
  int cores = 0;
  for (int32_t index : slots) {
    for (const xmod::v1::Slot& slot : worker->slots) {
      if (slot.index() == index) cores += std::max(1, slot.cores());
    }
  }
  return cores;
}

}  // namespace xmod::scheduling
