// Tests of field_path.h: the path travels as a payload and the message reads as before.
#include "common/field_path.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(FieldPathTest, InvalidFieldNamesThePathInMessageAndPayload) {
  absl::Status status = InvalidField("grids[0].ks[2]", "K must be >= 1, got 0");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "grids[0].ks[2]: K must be >= 1, got 0");
  EXPECT_EQ(FieldPathOf(status), "grids[0].ks[2]");
}

TEST(FieldPathTest, StatusesWithoutAPathHaveNone) {
  EXPECT_EQ(FieldPathOf(absl::OkStatus()), std::nullopt);
  EXPECT_EQ(FieldPathOf(absl::InvalidArgumentError("ks: K must be >= 1")), std::nullopt);
}

TEST(FieldPathTest, RerootPrefixesPayloadAndMessage) {
  absl::Status status = Reroot(InvalidField("ks[2]", "K must be >= 1, got 0"), "grids[0].");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "grids[0].ks[2]: K must be >= 1, got 0");
  EXPECT_EQ(FieldPathOf(status), "grids[0].ks[2]");
  EXPECT_EQ(FieldPathOf(Reroot(status, "spec.")), "spec.grids[0].ks[2]");
}

TEST(FieldPathTest, RerootLeavesStatusesWithoutAPathAlone) {
  const absl::Status plain = absl::NotFoundError("sweep 3 not found");
  EXPECT_EQ(Reroot(plain, "grids[0]."), plain);
  EXPECT_TRUE(Reroot(absl::OkStatus(), "grids[0].").ok());
}

TEST(FieldPathTest, WithFieldPathReplacesThePathAndKeepsTheRest) {
  absl::Status status = WithFieldPath(InvalidField("k", "K must be >= 1, got 0"), "grids[1].ks[0]");
  EXPECT_EQ(status.message(), "grids[1].ks[0]: K must be >= 1, got 0");
  EXPECT_EQ(FieldPathOf(status), "grids[1].ks[0]");
}

TEST(FieldPathTest, OtherPayloadsSurviveRerooting) {
  absl::Status status = InvalidField("k", "bad");
  status.SetPayload("type.test/other", absl::Cord("kept"));
  EXPECT_EQ(Reroot(status, "model.").GetPayload("type.test/other"), absl::Cord("kept"));
}

}  // namespace
}  // namespace xmod
