// The "Sharing" section of `xmodctl run show` (usage_commands.cc): the run's user, whether it
// may be preempted, and one row per PREEMPT order with its reason; and the event tables
// (event_commands.cc): who made each change.
#include <string>

#include "cli/commands.h"
#include "gtest/gtest.h"

namespace xmod::cli {
namespace {

TEST(RunSharingTableTest, NamesTheUserAndListsEveryPreemption) {
  xmod::v1::GetRunResponse response;
  xmod::v1::RunSharing* sharing = response.mutable_sharing();
  sharing->set_submitter("alice");
  sharing->set_preemptible(true);
  xmod::v1::Preemption* p = sharing->add_preemptions();
  p->set_time_unix_ms(1);
  p->set_attempt(2);
  p->set_reason("preempted for run 41 (priority 5, user \"bob\"): this run's priority 0 is lower");
  const Table table = RunSharingTable(response);
  EXPECT_EQ(table.title, "Sharing: user alice, preemptible");
  ASSERT_EQ(table.rows.size(), 1u);
  EXPECT_EQ(table.rows[0][1].text, "2");
  EXPECT_EQ(table.rows[0][2].text, p->reason());
  const std::string text = RenderText(table);
  EXPECT_NE(text.find("this run's priority 0 is lower"), std::string::npos) << text;
}

TEST(RunSharingTableTest, AnonymousAndNotPreemptibleRunsSaySo) {
  xmod::v1::GetRunResponse response;
  response.mutable_sharing()->set_preemptible(false);
  const Table table = RunSharingTable(response);
  EXPECT_EQ(table.title, "Sharing: user (anonymous), not preemptible");
  EXPECT_TRUE(table.rows.empty());
}

TEST(EventsTableTest, NamesTheActorAnonymousOrTheCoordinator) {
  xmod::v1::ListEventsResponse response;
  for (const char* actor : {"alice", "", "none"}) {
    xmod::v1::Event* e = response.add_events();
    e->set_kind("run_cancelled");
    e->set_run_id(3);
    if (std::string(actor) != "none") e->set_actor(actor);
  }
  const Table table = EventsTable("Events", response.events());
  ASSERT_EQ(table.rows.size(), 3u);
  EXPECT_EQ(table.columns[4], "by");
  EXPECT_EQ(table.rows[0][4].text, "alice");
  EXPECT_EQ(table.rows[1][4].text, "(anonymous)");
  EXPECT_EQ(table.rows[2][4].text, "coordinator");
  EXPECT_EQ(table.rows[0][2].text, "-");  // no sweep
  EXPECT_EQ(table.rows[0][3].text, "3");
}

}  // namespace
}  // namespace xmod::cli
