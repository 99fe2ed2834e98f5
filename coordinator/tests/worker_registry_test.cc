// WorkerRegistry (coordinator/scheduling/worker_registry.h): registrations and their epochs,
// liveness, polling, the slots and ports a lease takes, and the refusals of
// CheckRegistration.
#include "coordinator/scheduling/worker_registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod::scheduling {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;

xmod::v1::RegisterRequest Registration(const std::string& name, int slots,
                                       xmod::v1::SlotKind kind = xmod::v1::CPU) {
  xmod::v1::RegisterRequest request;
  request.set_worker_name(name);
  request.set_advertise_host(name + ".lab");
  for (int i = 0; i < slots; ++i) {
    xmod::v1::Slot* slot = request.add_slots();
    slot->set_index(i);
    slot->set_kind(kind);
    slot->set_cores(2);
  }
  return request;
}

TEST(WorkerRegistryTest, EachRegistrationAdvancesTheEpochAndForgetsFreeSlots) {
  WorkerRegistry registry(/*lease_ttl_ms=*/1000);
  registry.Register(7, Registration("w", 2), /*mono=*/100);
  ASSERT_NE(registry.Find(7), nullptr);
  EXPECT_EQ(registry.Find(7)->epoch, 1);
  EXPECT_EQ(registry.Find(7)->host, "w.lab");
  registry.BeginPoll(7, {0, 1});
  registry.EndPoll(7, 150);
  EXPECT_THAT(registry.Find(7)->free_slots, ElementsAre(0, 1));
  registry.Register(7, Registration("w", 3), 200);
  EXPECT_EQ(registry.Find(7)->epoch, 2);
  EXPECT_EQ(registry.Find(7)->slots.size(), 3u);
  EXPECT_TRUE(registry.Find(7)->free_slots.empty());
  EXPECT_EQ(registry.Find(8), nullptr);
}

TEST(WorkerRegistryTest, AWorkerIsLiveForOneLeaseTtlAfterItWasLastSeen) {
  WorkerRegistry registry(1000);
  registry.Register(1, Registration("a", 1), 0);
  registry.Register(2, Registration("b", 1), 0);
  registry.Seen(2, 900, false);
  registry.Seen(2, 500, false);  // an older reading changes nothing
  EXPECT_EQ(registry.CountLive(1000), 2);
  EXPECT_EQ(registry.CountLive(1001), 1);
  EXPECT_EQ(registry.CountLive(1901), 0);
  EXPECT_TRUE(registry.IsLive(*registry.Find(2), 1900));
}

TEST(WorkerRegistryTest, AWorkerThatSaysItLeavesStaysLeavingUntilItRegistersAgain) {
  WorkerRegistry registry(1000);
  registry.Register(1, Registration("a", 1), 0);
  EXPECT_FALSE(registry.Find(1)->leaving);
  registry.Seen(1, 100, true);
  EXPECT_TRUE(registry.Find(1)->leaving);
  registry.Seen(1, 50, false);  // a heartbeat sent before the drain, arriving late
  registry.Seen(1, 200, false);
  EXPECT_TRUE(registry.Find(1)->leaving);
  EXPECT_TRUE(registry.IsLive(*registry.Find(1), 1200));  // live until its TTL passes
  registry.Register(1, Registration("a", 1), 300);
  EXPECT_FALSE(registry.Find(1)->leaving);
}

TEST(WorkerRegistryTest, RestoreTurnsStoredWallClockTimesMonotonic) {
  WorkerRegistry registry(1000);
  WorkerRow row;
  row.id = 4;
  row.name = "r";
  row.last_seen_ms = 50'000;  // wall clock: 700 ms before the restart
  row.rendezvous_port_first = 29500;
  row.rendezvous_port_last = 29501;
  registry.Restore({row}, /*now=*/50'700, /*mono=*/10'000);
  ASSERT_NE(registry.Find(4), nullptr);
  EXPECT_EQ(registry.Find(4)->last_seen_ms, 9'300);
  EXPECT_EQ(registry.Find(4)->port_last, 29501);
}

TEST(WorkerRegistryTest, LeasesTakeSlotsAndPortsRoundRobin) {
  WorkerRegistry registry(1000);
  xmod::v1::RegisterRequest request = Registration("g", 4);
  request.set_rendezvous_port_first(29500);
  request.set_rendezvous_port_last(29502);
  registry.Register(1, request, 0);
  registry.BeginPoll(1, {0, 1, 2, 3});
  registry.TakeSlots(1, {1, 3});
  EXPECT_THAT(registry.Find(1)->free_slots, ElementsAre(0, 2));
  EXPECT_EQ(registry.TakePort(1, 29502), "tcp://g.lab:29502");
  EXPECT_EQ(registry.Find(1)->next_port, 0);  // wraps to the first port
  EXPECT_EQ(registry.TakePort(1, 29500), "tcp://g.lab:29500");
  EXPECT_EQ(registry.Find(1)->next_port, 1);
  // A new port range starts its round robin again; the same range keeps it.
  registry.Register(1, request, 10);
  EXPECT_EQ(registry.Find(1)->next_port, 1);
  request.set_rendezvous_port_last(29510);
  registry.Register(1, request, 20);
  EXPECT_EQ(registry.Find(1)->next_port, 0);
}

TEST(WorkerRegistryTest, KindAndCoresComeFromTheDeclaredSlots) {
  WorkerRegistry registry(1000);
  registry.Register(1, Registration("gpu", 2, xmod::v1::CUDA), 0);
  registry.Register(2, Registration("cpu", 3), 0);
  registry.Register(3, Registration("none", 0), 0);
  EXPECT_EQ(registry.KindOf(1), xmod::v1::CUDA);
  EXPECT_EQ(registry.KindOf(2), xmod::v1::CPU);
  EXPECT_EQ(registry.KindOf(3), xmod::v1::CPU);
  EXPECT_EQ(registry.KindOf(99), xmod::v1::CPU);
  EXPECT_EQ(registry.CoresOf(2, {0, 2}), 4);
  EXPECT_EQ(registry.CoresOf(2, {5}), 0);
  EXPECT_EQ(registry.CoresOf(99, {0}), 0);
}

TEST(WorkerRegistryTest, CheckRegistrationNamesTheFieldItRefuses) {
  EXPECT_TRUE(CheckRegistration(Registration("ok", 2)).ok());
  absl::Status s = CheckRegistration(Registration("", 1));
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("worker_name"));
  EXPECT_THAT(CheckRegistration(Registration("a,b", 1)).message(), HasSubstr("','"));
  xmod::v1::RegisterRequest repeated = Registration("r", 2);
  repeated.mutable_slots(1)->set_index(0);
  EXPECT_THAT(CheckRegistration(repeated).message(), HasSubstr("slots[1].index"));
  xmod::v1::RegisterRequest ports = Registration("p", 1);
  ports.set_rendezvous_port_first(29500);
  ports.set_rendezvous_port_last(29499);
  EXPECT_THAT(CheckRegistration(ports).message(), HasSubstr("rendezvous_port_first"));
  ports.set_rendezvous_port_first(0);
  ports.set_rendezvous_port_last(5);
  EXPECT_TRUE(absl::IsInvalidArgument(CheckRegistration(ports)));
}

}  // namespace
}  // namespace xmod::scheduling
