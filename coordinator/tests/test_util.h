// Helpers for the coordinator tests: fresh temporary directories, a small valid sweep, the
// stored state of a run, and a coordinator on loopback with its clients and bearer-token calls.
#ifndef XMOD_COORDINATOR_TESTS_TEST_UTIL_H_
#define XMOD_COORDINATOR_TESTS_TEST_UTIL_H_

#include <grpcpp/client_context.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/coordinator.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/store/store.h"
#include "xmod/v1/coordinator.grpc.pb.h"
#include "xmod/v1/coordinator.pb.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/types.pb.h"
#include "xmod/v1/worker.grpc.pb.h"

namespace xmod {

// The credential the tests name as the actor of the scheduler's user actions they call directly.
inline const std::optional<std::string> kTestActor = std::string("tester");

// A new empty directory under the test's temporary directory.
std::string NewTestDir(const std::string& name);

// The store of the database at `path` with default options; a failed open fails the test and
// gives nullptr.
std::unique_ptr<Store> OpenStore(const std::string& path);

// A coordinator's options for a test: gRPC and HTTP on free loopback ports, no metrics
// listener, database and checkpoints in `dir`, no credentials.
CoordinatorOptions LoopbackOptions(const std::string& dir);

// A sweep over the "tiny-test" backbone with data files created in `dir`:
// archs [DENSE, XMOD], L = [64], K = [1, 2, 4], A = [1], one budget -> 3 runs
// (DENSE, XMOD K=1 folded into DENSE, XMOD K=2, XMOD K=4).
xmod::v1::SweepSpec TinySweep(const std::string& dir);

// TinySweep as an adaptive design's candidate space: XMOD over L = [64, 128, 256],
// K = [1, 2, 4, 8], A = [0.5, 1, 2], one target at L = 256, an ensemble of 8.
xmod::v1::SweepSpec AdaptiveTinySweep(const std::string& dir);

// The run / its attempts as the store holds them; a failed read fails the test (and gives
// an empty message).
xmod::v1::Run StoredRun(Store& store, int64_t run_id);
std::vector<xmod::v1::Attempt> StoredAttempts(Store& store, int64_t run_id);

// Every row of every table (the event log too when `with_events`), one sorted text dump a
// table, read after every write queued so far committed; a failed read fails the test.
std::map<std::string, std::string> TableRows(Store& store, bool with_events);

// A registration of worker `name` with `slots` one-core CPU slots, indexes 0 .. slots - 1.
xmod::v1::RegisterRequest CpuWorker(const std::string& name, int slots);

// Scheduler::Acquire for `worker` with `free_slots`, without waiting; a failed call fails the
// test and gives nullopt.
std::optional<xmod::v1::Assignment> AcquireNow(Scheduler& scheduler, int64_t worker,
                                               const std::vector<int32_t>& free_slots);

// A client context that sends `token` as its bearer token, with a 30 s deadline, waiting for
// the channel to connect within it.
std::unique_ptr<grpc::ClientContext> BearerContext(const std::string& token);

// A started coordinator and clients of both its gRPC APIs over one loopback channel.
struct LoopbackCoordinator {
  std::unique_ptr<Coordinator> coordinator;
  std::unique_ptr<xmod::v1::Coordinator::Stub> user;
  std::unique_ptr<xmod::v1::WorkerGateway::Stub> worker;
};

// Starts a coordinator with `options` and, unless `credentials` is empty, those credentials
// (the credentials file's lines, common/credentials.h).
absl::StatusOr<LoopbackCoordinator> StartLoopbackCoordinator(CoordinatorOptions options,
                                                             const std::string& credentials = "");

}  // namespace xmod

#endif  // XMOD_COORDINATOR_TESTS_TEST_UTIL_H_
