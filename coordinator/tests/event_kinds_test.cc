// Event kinds (coordinator/store/event_kinds.h): each EventKind value has one stored name,
// an attempt's end is named by its outcome, and InsertEvent stores the name and refuses a
// kind without one.
#include "coordinator/store/event_kinds.h"

#include <cctype>
#include <set>
#include <string>

#include "coordinator/store/event_rows.h"
#include "coordinator/tests/test_util.h"
#include "gtest/gtest.h"
#include "trainer_contract/outcome.h"

namespace xmod {
namespace {

TEST(EventKindsTest, EveryKindHasOneDistinctStoredName) {
  const google::protobuf::EnumDescriptor* kinds = xmod::v1::EventKind_descriptor();
  std::set<std::string> names;
  for (int i = 0; i < kinds->value_count(); ++i) {
    const auto kind = static_cast<xmod::v1::EventKind>(kinds->value(i)->number());
    const std::string& name = EventKindName(kind);
    if (kind == xmod::v1::EVENT_KIND_UNSPECIFIED) {
      EXPECT_EQ(name, "");
      continue;
    }
    EXPECT_FALSE(name.empty()) << kinds->value(i)->name();
    EXPECT_TRUE(names.insert(name).second) << name << " names two kinds";
    // The value's name spells the stored one: EVENT_RUN_PREEMPT_ORDERED, run_preempt_ordered.
    std::string upper = name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(kinds->value(i)->name(), "EVENT_" + upper);
  }
  EXPECT_EQ(EventKindName(static_cast<xmod::v1::EventKind>(999)), "");
}

TEST(EventKindsTest, AnAttemptsEndIsNamedAttemptThenItsStoredOutcome) {
  for (xmod::v1::Outcome outcome : {xmod::v1::OUTCOME_SUCCEEDED, xmod::v1::OUTCOME_FAILED,
                                    xmod::v1::OUTCOME_CANCELLED, xmod::v1::OUTCOME_PREEMPTED}) {
    const std::string stored(StoredOutcomeName(outcome));
    EXPECT_EQ(EventKindName(AttemptEndedKind(stored)), "attempt_" + stored);
  }
  EXPECT_EQ(EventKindName(AttemptEndedKind("lost")), "attempt_lost");
  EXPECT_EQ(AttemptEndedKind("vanished"), xmod::v1::EVENT_KIND_UNSPECIFIED);
}

TEST(EventKindsTest, InsertEventStoresTheNameAndRefusesAKindWithout) {
  std::unique_ptr<Store> store = OpenStore(NewTestDir("event_kinds") + "/x.db");
  ASSERT_NE(store, nullptr);
  absl::Status refused = store->WriteAndWait(
      [](Db& db) { return InsertEvent(db, 1, xmod::v1::EVENT_KIND_UNSPECIFIED, 0, 0, "x"); });
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  ASSERT_TRUE(store
                  ->WriteAndWait([](Db& db) {
                    return InsertEvent(db, 2, xmod::v1::EVENT_RUN_PREEMPT_ORDERED, 0, 0, "y");
                  })
                  .ok());
  absl::StatusOr<std::vector<xmod::v1::Event>> events =
      store->ReadValue([](Db& db) { return LoadEvents(db, EventQuery{}); });
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(events->front().kind(), "run_preempt_ordered");
}

}  // namespace
}  // namespace xmod
