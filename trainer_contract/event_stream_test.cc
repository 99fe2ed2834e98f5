// Tests of the delimited streams: what EventWriter writes, EventReader and ParseEvents read.
#include "trainer_contract/event_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "gtest/gtest.h"

namespace xmod {
namespace {

TEST(EventStreamTest, RoundTripThroughAPipe) {
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

TEST(EventStreamTest, DisabledWriterAndClosedPipe) {
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

TEST(EventStreamTest, ReaderSeesEventsThenACleanEnd) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  EventWriter writer(fds[1]);
  ASSERT_TRUE(writer.Metric(1, 64, 1e6, "train/loss", 3.5).ok());
  ASSERT_TRUE(writer.Metric(2, 0, 2e6, "train/loss", 3.25).ok());  // no tokens
  ::close(fds[1]);

  EventReader reader(fds[0]);
  xmod::v1::TrainerEvent event;
  ASSERT_EQ(reader.Next(&event).value_or(false), true);
  EXPECT_EQ(event.metric().step(), 1);
  ASSERT_EQ(reader.Next(&event).value_or(false), true);
  EXPECT_DOUBLE_EQ(event.metric().value(), 3.25);
  EXPECT_EQ(event.metric().tokens(), 0);  // not the first event's, merged into the second
  absl::StatusOr<bool> end = reader.Next(&event);
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(*end);
  ::close(fds[0]);
}

TEST(EventStreamTest, ReaderReportsATruncatedMessageOnce) {
  xmod::v1::TrainerEvent started;
  started.mutable_started()->set_steps_planned(7);
  const std::string bytes = DelimitedBytes(started);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], bytes.data(), bytes.size() - 1),
            static_cast<ssize_t>(bytes.size() - 1));
  ::close(fds[1]);

  EventReader reader(fds[0]);
  xmod::v1::TrainerEvent event;
  absl::StatusOr<bool> cut = reader.Next(&event);
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  absl::StatusOr<bool> after = reader.Next(&event);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(*after);
  ::close(fds[0]);
}

TEST(EventStreamTest, DelimitedBytesIsTheLengthThenTheMessage) {
  xmod::v1::TrainerControl control;
  control.set_lease_deadline_ms(123456789);
  const std::string bytes = DelimitedBytes(control);
  const std::string body = control.SerializeAsString();
  ASSERT_LT(body.size(), 128u);  // a one-byte varint
  EXPECT_EQ(bytes, std::string(1, static_cast<char>(body.size())) + body);
}

}  // namespace
}  // namespace xmod
