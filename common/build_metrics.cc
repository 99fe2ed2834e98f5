// xmod_build_info (see build_metrics.h).
#include "common/build_metrics.h"

#include <string>

#include "common/build_info.h"
#include "prometheus/gauge.h"

namespace xmod {

void AddBuildInfoGauge(prometheus::Registry& registry) {
  prometheus::BuildGauge()
      .Name("xmod_build_info")
      .Help("Build of this process: 1, labelled with its version and git commit")
      .Register(registry)
      .Add({{"version", std::string(BuildVersion())}, {"git_sha", std::string(BuildGitSha())}})
      .Set(1);
}

}  // namespace xmod
