// Tests of the delimited TrainerEvent stream: what EventWriter writes, ParseEvents reads.
#include "model/train/events.h"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(EventsTest, RoundTripThroughAPipe) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  EventWriter writer(fds[1]);
  xmod::v1::TrainerEvent started;
  started.mutable_started()->set_steps_planned(7);
  ASSERT_TRUE(writer.Write(started).ok());
  ASSERT_TRUE(writer.Metric(3, 768, 1.5e9, "train/loss", 2.25).ok());
  ::close(fds[1]);
  std::string bytes;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buffer, sizeof(buffer))) > 0) bytes.append(buffer, n);
  ::close(fds[0]);

  absl::StatusOr<std::vector<xmod::v1::TrainerEvent>> events = ParseEvents(bytes);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].started().steps_planned(), 7);
  const xmod::v1::MetricPoint& point = (*events)[1].metric();
  EXPECT_EQ(point.step(), 3);
  EXPECT_EQ(point.tokens(), 768);
  EXPECT_DOUBLE_EQ(point.flops(), 1.5e9);
  EXPECT_EQ(point.name(), "train/loss");
  EXPECT_DOUBLE_EQ(point.value(), 2.25);

  // A stream cut inside a message is reported, not silently shortened.
  EXPECT_FALSE(ParseEvents(bytes.substr(0, bytes.size() - 3)).ok());
}

TEST(EventsTest, DisabledWriterAndClosedPipe) {
  EventWriter disabled(-1);
  EXPECT_FALSE(disabled.enabled());
  EXPECT_TRUE(disabled.Metric(1, 1, 1, "train/loss", 1).ok());

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);
  ::signal(SIGPIPE, SIG_IGN);
  EventWriter writer(fds[1]);
  EXPECT_FALSE(writer.Metric(1, 1, 1, "train/loss", 1).ok());
  ::close(fds[1]);
}

}  // namespace
}  // namespace xmod
