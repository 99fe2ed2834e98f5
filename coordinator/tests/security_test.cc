// Transport security of a coordinator in-process on loopback: gRPC over TLS with required
// client certificates (mTLS) and the HTTP API over HTTPS, with certificates made by the
// `openssl` command for this test (a CA, a server certificate for 127.0.0.1 / localhost, a
// client certificate, and a second CA nobody trusts); the Prometheus endpoint over HTTPS
// behind a bearer token; and the loopback-only rule without credentials.
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/test_certs.h"
#include "common/transport.h"
#include "coordinator/coordinator.h"
#include "coordinator/tests/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xmod/v1/coordinator.grpc.pb.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

class SecurityTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("tls");
    ASSERT_TRUE(MakeTestCa(dir_, "ca").ok());
    ASSERT_TRUE(MakeTestCa(dir_, "rogue").ok());
    ASSERT_TRUE(MakeTestCert(dir_, "ca", "server", "IP:127.0.0.1,DNS:localhost").ok());
    ASSERT_TRUE(MakeTestCert(dir_, "ca", "client", "").ok());
    ASSERT_TRUE(MakeTestCert(dir_, "rogue", "intruder", "").ok());
  }

  CoordinatorOptions Options() { return LoopbackOptions(dir_); }

  // ListSweeps over a channel with `tls`; the call's status code.
  grpc::StatusCode Call(int port, const ClientTlsFiles& tls) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        NewChannel(absl::StrCat("127.0.0.1:", port), tls);
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (!channel.ok()) return grpc::StatusCode::INTERNAL;
    auto stub = xmod::v1::Coordinator::NewStub(*channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    xmod::v1::ListSweepsResponse sweeps;
    return stub->ListSweeps(&context, {}, &sweeps).error_code();
  }

  std::string dir_;
};

TEST_F(SecurityTest, MutualTlsAdmitsOnlyClientsWithTheRightCertificates) {
  CoordinatorOptions options = Options();
  options.tls.cert_file = dir_ + "/server.pem";
  options.tls.key_file = dir_ + "/server.key";
  options.tls.client_ca_file = dir_ + "/ca.pem";
  absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
  ASSERT_TRUE(c.ok()) << c.status();
  const int port = (*c)->ports().grpc;

  ClientTlsFiles good;
  good.ca_file = dir_ + "/ca.pem";
  good.cert_file = dir_ + "/client.pem";
  good.key_file = dir_ + "/client.key";
  EXPECT_EQ(Call(port, good), grpc::StatusCode::OK);
  // Plaintext to a TLS port.
  EXPECT_EQ(Call(port, ClientTlsFiles()), grpc::StatusCode::UNAVAILABLE);
  // TLS without a client certificate.
  ClientTlsFiles anonymous;
  anonymous.ca_file = dir_ + "/ca.pem";
  EXPECT_EQ(Call(port, anonymous), grpc::StatusCode::UNAVAILABLE);
  // A client certificate from a CA the server does not trust.
  ClientTlsFiles intruder = good;
  intruder.cert_file = dir_ + "/intruder.pem";
  intruder.key_file = dir_ + "/intruder.key";
  EXPECT_EQ(Call(port, intruder), grpc::StatusCode::UNAVAILABLE);
  // A client that does not trust the server's CA.
  ClientTlsFiles distrustful = good;
  distrustful.ca_file = dir_ + "/rogue.pem";
  EXPECT_EQ(Call(port, distrustful), grpc::StatusCode::UNAVAILABLE);

  // The HTTP API speaks HTTPS with the same certificate.
  httplib::SSLClient https("127.0.0.1", (*c)->ports().http);
  https.set_ca_cert_path((dir_ + "/ca.pem").c_str());
  https.enable_server_certificate_verification(true);
  auto res = https.Get("/api/session");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  httplib::Client plain("127.0.0.1", (*c)->ports().http);
  res = plain.Get("/api/session");
  EXPECT_TRUE(!res || res->status != 200);
}

TEST_F(SecurityTest, ServerTlsWithoutClientCertificates) {
  CoordinatorOptions options = Options();
  options.tls.cert_file = dir_ + "/server.pem";
  options.tls.key_file = dir_ + "/server.key";
  absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
  ASSERT_TRUE(c.ok()) << c.status();
  ClientTlsFiles tls;
  tls.ca_file = dir_ + "/ca.pem";
  EXPECT_EQ(Call((*c)->ports().grpc, tls), grpc::StatusCode::OK);
  EXPECT_EQ(Call((*c)->ports().grpc, ClientTlsFiles()), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecurityTest, BadTlsFilesNameTheFlag) {
  CoordinatorOptions options = Options();
  options.tls.cert_file = dir_ + "/server.pem";
  absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  options.tls.key_file = dir_ + "/missing.key";
  c = Coordinator::Start(options);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--tls_key: cannot read"));
  ClientTlsFiles client;
  client.cert_file = dir_ + "/client.pem";
  EXPECT_THAT(NewChannel("127.0.0.1:1", client).status().message(),
              HasSubstr("--tls_cert and --tls_key must be given together"));
}

TEST_F(SecurityTest, MetricsOverHttpsOnlyWithTheBearerToken) {
  CoordinatorOptions options = Options();
  options.metrics_listen = "127.0.0.1:0";
  options.metrics_access.tls_cert_file = dir_ + "/server.pem";
  options.metrics_access.tls_key_file = dir_ + "/server.key";
  options.metrics_access.token_file = dir_ + "/scrape.token";
  const std::string token = "scrape-token-0123456789";
  ASSERT_TRUE(WriteFileAtomic(options.metrics_access.token_file, token + "\n").ok());
  absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
  ASSERT_TRUE(c.ok()) << c.status();
  const int port = (*c)->ports().metrics;

  httplib::SSLClient https("127.0.0.1", port);
  https.set_ca_cert_path((dir_ + "/ca.pem").c_str());
  https.enable_server_certificate_verification(true);
  auto res = https.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 401);
  EXPECT_THAT(res->get_header_value("WWW-Authenticate"), HasSubstr("Bearer"));
  EXPECT_EQ(res->body.find("xmod_"), std::string::npos);
  for (const std::string& wrong : {token + "x", token.substr(1), std::string("")}) {
    res = https.Get("/metrics", {{"Authorization", "Bearer " + wrong}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401) << wrong;
  }
  res = https.Get("/metrics", {{"Authorization", "Bearer " + token}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_THAT(res->body, HasSubstr("xmod_build_info{"));
  EXPECT_THAT(res->get_header_value("Content-Type"), HasSubstr("version=0.0.4"));
  // Plaintext to the HTTPS port gets nothing.
  httplib::Client plain("127.0.0.1", port);
  res = plain.Get("/metrics", {{"Authorization", "Bearer " + token}});
  EXPECT_TRUE(!res || res->status != 200);
}

TEST_F(SecurityTest, BadMetricsTlsOrTokenFilesNameTheFlag) {
  CoordinatorOptions options = Options();
  options.metrics_listen = "127.0.0.1:0";
  options.metrics_access.token_file = dir_ + "/short.token";
  ASSERT_TRUE(WriteFileAtomic(options.metrics_access.token_file, "too-short\n").ok());
  absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--metrics_token_file"));
  EXPECT_THAT(c.status().message(), HasSubstr("shorter than 16 characters"));
  options.metrics_access.token_file = dir_ + "/missing.token";
  c = Coordinator::Start(options);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--metrics_token_file"));
  options.metrics_access.token_file = "";
  options.metrics_access.tls_cert_file = dir_ + "/server.pem";
  c = Coordinator::Start(options);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(),
              HasSubstr("--metrics_tls_cert and --metrics_tls_key must be given together"));
  options.metrics_access.tls_key_file = dir_ + "/ca.pem";  // not the certificate's key
  c = Coordinator::Start(options);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--metrics_tls_cert/--metrics_tls_key"));
}

TEST_F(SecurityTest, WithoutCredentialsOnlyLoopbackUnlessInsecure) {
  CoordinatorOptions options = Options();
  options.listen = "0.0.0.0:0";
  absl::StatusOr<std::unique_ptr<Coordinator>> c = Coordinator::Start(options);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(),
              HasSubstr("--listen: 0.0.0.0:0 is not a loopback address and no credentials"));
  EXPECT_THAT(c.status().message(), HasSubstr("--insecure"));
  options.listen = "127.0.0.1:0";
  options.http_listen = ":0";
  c = Coordinator::Start(options);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--http_listen"));
  options.http_listen = "localhost:0";
  c = Coordinator::Start(options);
  EXPECT_TRUE(c.ok()) << c.status();
}

}  // namespace
}  // namespace xmod
