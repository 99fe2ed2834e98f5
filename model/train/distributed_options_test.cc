// Tests of the data-parallel flag validation and the tcp:// rendezvous parser.
#include "model/train/distributed_options.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

DistributedOptions Make(int rank, int world_size, const std::string& rendezvous,
                        const std::string& backend = "gloo", int timeout_s = 300) {
  DistributedOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.rendezvous = rendezvous;
  options.backend = backend;
  options.timeout_s = timeout_s;
  return options;
}

TEST(DistributedOptionsTest, SingleProcessNeedsNoRendezvous) {
  EXPECT_TRUE(ValidateDistributedOptions(DistributedOptions()).ok());
}

TEST(DistributedOptionsTest, BadFlagsAreNamed) {
  const std::pair<DistributedOptions, const char*> cases[] = {
      {Make(0, 0, ""), "--world_size"},
      {Make(2, 2, "/tmp/r"), "--rank"},
      {Make(-1, 2, "/tmp/r"), "--rank"},
      {Make(0, 2, ""), "--rendezvous"},
      {Make(0, 2, "tcp://host"), "--rendezvous"},
      {Make(0, 2, "tcp://host:70000"), "--rendezvous"},
      {Make(0, 2, "/tmp/r", "mpi"), "--backend"},
      {Make(0, 2, "/tmp/r", "gloo", 0), "--dist_timeout_s"},
  };
  for (const auto& [options, flag] : cases) {
    absl::Status status = ValidateDistributedOptions(options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_THAT(status.message(), HasSubstr(flag));
  }
  EXPECT_TRUE(ValidateDistributedOptions(Make(1, 2, "tcp://10.0.0.5:29500")).ok());
  EXPECT_TRUE(ValidateDistributedOptions(Make(1, 2, "/shared/job-7.rdzv", "nccl")).ok());
}

TEST(DistributedOptionsTest, ParsesTcpRendezvous) {
  TcpRendezvous tcp = ParseTcpRendezvous("tcp://node-3.cluster:29500");
  ASSERT_TRUE(tcp.ok);
  EXPECT_EQ(tcp.host, "node-3.cluster");
  EXPECT_EQ(tcp.port, 29500);
  EXPECT_FALSE(ParseTcpRendezvous("/shared/rdzv").ok);
  EXPECT_FALSE(ParseTcpRendezvous("tcp://:29500").ok);
  EXPECT_FALSE(ParseTcpRendezvous("tcp://host:0").ok);
  EXPECT_FALSE(ParseTcpRendezvous("tcp://host:x1").ok);
}

}  // namespace
}  // namespace xmod
