// The training process's C heap: see heap.h.
#include "model/train/heap.h"

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace xmod {

void KeepFreedMemoryInProcess() {
#if defined(__GLIBC__)
  // Some glibc versions refuse a threshold above half their largest heap (32 MiB on 64-bit);
  // then the largest they accept.
  constexpr int kMmapThreshold = 1 << 30, kMmapThresholdFallback = 32 << 20;
  constexpr int kTrimThreshold = 1 << 30;
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr &&
      mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 0) {
    mallopt(M_MMAP_THRESHOLD, kMmapThresholdFallback);
  }
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
#endif
}

}  // namespace xmod
