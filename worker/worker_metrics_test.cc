// The worker's Prometheus registry carries the build identity (common/build_metrics.h).
#include "worker/worker_metrics.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace xmod {
namespace {

TEST(WorkerMetricsTest, ExportsBuildInfo) {
  prometheus::Registry registry;
  WorkerMetrics metrics(registry);
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_THAT(text, ::testing::HasSubstr(absl::StrCat("xmod_build_info{git_sha=\"", BuildGitSha(),
                                                      "\",version=\"", BuildVersion(), "\"} 1")));
}

}  // namespace
}  // namespace xmod
