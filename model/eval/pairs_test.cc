// Pairs mode's input checks and output lines (pairs.h): another process's file is refused
// line by line with the reason, and every score prints so that Python's json reads it back.
#include "model/eval/pairs.h"

#include <cmath>
#include <limits>
#include <string>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(WriteFileAtomic(path, text).ok());
  return path;
}

TEST(ReadPairs, ReadsContextAndContinuationInOrder) {
  const std::string path =
      TempFile("pairs.jsonl",
               "{\"context\": \"Question: q\\nAnswer:\", \"continuation\": \" yes\"}\n\n"
               "{\"context\": \"caf\\u00e9\", \"continuation\": \" ok\", \"extra\": 1}\n");
  absl::StatusOr<std::vector<Choice>> pairs = ReadPairs(path);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 2u);
  EXPECT_EQ((*pairs)[0].context, "Question: q\nAnswer:");
  EXPECT_EQ((*pairs)[0].continuation, " yes");
  EXPECT_EQ((*pairs)[1].context, "café");
}

TEST(ReadPairs, RefusesBadLinesNamingFileAndLine) {
  struct Case {
    std::string text, message;
  };
  const Case cases[] = {
      {"{\"context\": \"a\"}", ":1: no \"continuation\" field"},
      {"{\"context\": \"a\", \"continuation\": 3}", ":1: \"continuation\" is not a string"},
      {"{\"context\": \"a\", \"continuation\": \"\"}", ":1: \"continuation\" is empty"},
      {"\n[1, 2]", ":2: not a JSON object"},
      {"{\"context\": \"" + std::string(kMaxPairTextBytes, 'x') + "\", \"continuation\": \"b\"}",
       "over the limit of 1048576"},
      {"\n\n", ": no pairs"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    const std::string path = TempFile("bad-pairs.jsonl", c.text);
    absl::Status status = ReadPairs(path).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr(path));
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
  EXPECT_TRUE(absl::IsNotFound(ReadPairs(::testing::TempDir() + "/none.jsonl").status()));
}

TEST(PairScoreJson, PrintsRoundTrippingNumbersAndPythonsNonFinite) {
  EXPECT_EQ(PairScoreJson({-0.1, true, 2}),
            "{\"loglikelihood\": -0.10000000000000001, \"is_greedy\": true, \"tokens\": 2}");
  EXPECT_EQ(PairScoreJson({-std::numeric_limits<double>::infinity(), false, 1}),
            "{\"loglikelihood\": -Infinity, \"is_greedy\": false, \"tokens\": 1}");
  EXPECT_THAT(PairScoreJson({std::nan(""), false, 1}), HasSubstr("NaN"));
}

}  // namespace
}  // namespace xmod
