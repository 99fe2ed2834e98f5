// The training speed finished runs reached, and the slots the cluster has: what forecasts
// (coordinator/spec/forecast.h) go by. Reads only.
#ifndef XMOD_COORDINATOR_STORE_RUN_THROUGHPUT_H_
#define XMOD_COORDINATOR_STORE_RUN_THROUGHPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

// One SUCCEEDED run's speed: runs.tokens_per_second (the rate its trainer last reported, all
// ranks together) and the slot kind its rank 0 ran on ("cuda" or "cpu").
struct ThroughputSample {
  xmod::v1::RunSpec spec;
  double tokens_per_second = 0;
  std::string slot_kind;
};

// The `limit` most recently finished SUCCEEDED runs with a speed and a recorded slot kind.
absl::StatusOr<std::vector<ThroughputSample>> LoadThroughputSamples(Db& db, int limit);

struct SlotCounts {
  int gpu = 0;
  int cpu = 0;
};
// Slots of the workers last heard from at or after `seen_since_ms` (wall clock), by kind.
absl::StatusOr<SlotCounts> LoadRecentSlots(Db& db, int64_t seen_since_ms);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_RUN_THROUGHPUT_H_
