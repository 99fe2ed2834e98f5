// The standard gRPC services of a real xmod-coordinator process, checked with clients built
// from gRPC's own protocol definitions (Debian's grpc-proto), as grpc_health_probe, the
// Kubernetes grpc probe and grpcurl call them: grpc.health.v1.Health answers SERVING without
// a token while every Coordinator call needs one, the plaintext --health_listen port serves
// only the health service, a Watch sees NOT_SERVING when the coordinator starts shutting
// down; server reflection lists the services with --grpc_reflection and is UNIMPLEMENTED
// without it.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster.h"

namespace xmod {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::grpc::reflection::v1alpha::ServerReflection;
using ::grpc::reflection::v1alpha::ServerReflectionRequest;
using ::grpc::reflection::v1alpha::ServerReflectionResponse;
using ::testing::IsSupersetOf;

std::shared_ptr<grpc::Channel> Plaintext(int port) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
}

void SetDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
}

// Check("") on `port` without a token: the status, or the RPC's error code.
struct CheckResult {
  grpc::StatusCode code;
  HealthCheckResponse::ServingStatus status;
};
CheckResult Check(int port) {
  grpc::ClientContext context;
  SetDeadline(&context);
  HealthCheckResponse response;
  const grpc::Status status =
      Health::NewStub(Plaintext(port))->Check(&context, HealthCheckRequest(), &response);
  return {status.error_code(), response.status()};
}

// The services that reflection on `port` lists, or the stream's error code.
struct ListResult {
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::vector<std::string> services;
};
ListResult ListServices(int port) {
  grpc::ClientContext context;
  SetDeadline(&context);
  auto stream = ServerReflection::NewStub(Plaintext(port))->ServerReflectionInfo(&context);
  ServerReflectionRequest request;
  request.set_list_services("");
  stream->Write(request);
  stream->WritesDone();
  ListResult result;
  ServerReflectionResponse response;
  while (stream->Read(&response)) {
    for (const auto& service : response.list_services_response().service()) {
      result.services.push_back(service.name());
    }
  }
  result.code = stream->Finish().error_code();
  return result;
}

class StandardServicesTest : public testing::Test {
 protected:
  // Flags for a coordinator that asks every Coordinator and WorkerGateway call for a token.
  std::vector<std::string> WithCredentials(std::vector<std::string> flags) {
    const std::string file = cluster_.dir() + "/credentials";
    EXPECT_TRUE(WriteFileAtomic(file, "user tester tester-secret-0123456789\n").ok());
    flags.push_back("--credentials_file=" + file);
    return flags;
  }

  Cluster cluster_;
};

TEST_F(StandardServicesTest, HealthAnswersWithoutATokenAndTurnsNotServingOnShutdown) {
  ASSERT_TRUE(cluster_.StartCoordinator(WithCredentials({"--health_listen=127.0.0.1:0"})).ok())
      << cluster_.Logs();
  const int grpc_port = *cluster_.CoordinatorPort("grpc");
  const int health_port = *cluster_.CoordinatorPort("health");
  ASSERT_GT(health_port, 0);

  // The API itself needs a token; the health service on the same port does not.
  grpc::ClientContext list_context;
  SetDeadline(&list_context);
  v1::ListSweepsResponse sweeps;
  EXPECT_EQ(cluster_.stub().ListSweeps(&list_context, {}, &sweeps).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  for (int port : {grpc_port, health_port}) {
    const CheckResult check = Check(port);
    EXPECT_EQ(check.code, grpc::StatusCode::OK) << "port " << port;
    EXPECT_EQ(check.status, HealthCheckResponse::SERVING) << "port " << port;
  }
  // The health port serves nothing else: no API, no reflection.
  grpc::ClientContext health_list_context;
  SetDeadline(&health_list_context);
  EXPECT_EQ(v1::Coordinator::NewStub(Plaintext(health_port))
                ->ListSweeps(&health_list_context, {}, &sweeps)
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(ListServices(health_port).code, grpc::StatusCode::UNIMPLEMENTED);

  // A watcher sees SERVING, then NOT_SERVING as soon as the coordinator begins to shut down.
  grpc::ClientContext watch_context;
  auto watch = Health::NewStub(Plaintext(health_port))->Watch(&watch_context, HealthCheckRequest());
  HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVING);
  std::thread stop([this] { cluster_.Stop(); });
  const bool got_update = watch->Read(&update);
  watch_context.TryCancel();
  stop.join();
  ASSERT_TRUE(got_update) << cluster_.Logs();
  EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING);
}

TEST_F(StandardServicesTest, ReflectionListsTheServicesOnlyWhenEnabled) {
  ASSERT_TRUE(cluster_.StartCoordinator(WithCredentials({})).ok()) << cluster_.Logs();
  EXPECT_EQ(ListServices(*cluster_.CoordinatorPort("grpc")).code, grpc::StatusCode::UNIMPLEMENTED);
  cluster_.Stop();

  ASSERT_TRUE(cluster_.StartCoordinator(WithCredentials({"--grpc_reflection"})).ok())
      << cluster_.Logs();
  const int port = *cluster_.CoordinatorPort("grpc");
  const ListResult listed = ListServices(port);
  EXPECT_EQ(listed.code, grpc::StatusCode::OK);
  EXPECT_THAT(listed.services, IsSupersetOf({"xmod.v1.Coordinator", "xmod.v1.WorkerGateway",
                                             "grpc.health.v1.Health"}));
  // A client can fetch the API's schema by symbol, as grpcurl describe does, without a token.
  grpc::ClientContext context;
  SetDeadline(&context);
  auto stream = ServerReflection::NewStub(Plaintext(port))->ServerReflectionInfo(&context);
  ServerReflectionRequest request;
  request.set_file_containing_symbol("xmod.v1.Coordinator");
  stream->Write(request);
  stream->WritesDone();
  ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_GT(response.file_descriptor_response().file_descriptor_proto_size(), 0)
      << response.DebugString();
  while (stream->Read(&response)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
  cluster_.Stop();
}

}  // namespace
}  // namespace xmod
