// The build identity (build_info.h) as a Prometheus gauge, the usual *_build_info pattern:
// xmod_build_info{version="0.1.0", git_sha="..."} 1. The coordinator and the worker add it
// to their registries. Thread-safe (prometheus-cpp).
#ifndef XMOD_COMMON_BUILD_METRICS_H_
#define XMOD_COMMON_BUILD_METRICS_H_

#include "prometheus/registry.h"

namespace xmod {

// Registers xmod_build_info on `registry` and sets it to 1.
void AddBuildInfoGauge(prometheus::Registry& registry);

}  // namespace xmod

#endif  // XMOD_COMMON_BUILD_METRICS_H_
