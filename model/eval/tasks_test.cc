// Task readers on the hand-written fixtures in model/eval/testdata (one small file in each
// public format) and on malformed lines.
#include "model/eval/tasks.h"

#include <cstdlib>
#include <filesystem>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using ::testing::HasSubstr;

std::string Fixture(const std::string& name) {
  const char* root = std::getenv("XMOD_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/model/eval/testdata/" + name;
}

// A file of `text` in the test's temporary directory.
std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(WriteFileAtomic(path, text).ok());
  return path;
}

TEST(EvalTasks, HellaSwag) {
  absl::StatusOr<std::vector<TaskExample>> examples =
      ReadTask("hellaswag", Fixture("hellaswag.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 5u);
  const TaskExample& first = (*examples)[0];
  ASSERT_EQ(first.choices.size(), 4u);
  EXPECT_EQ(first.choices[0].context, "A man cracks two eggs into a bowl. He");
  EXPECT_EQ(first.choices[0].continuation, " whisks them with a fork until they are smooth.");
  EXPECT_EQ(first.label, 0);
  EXPECT_EQ((*examples)[2].label, 2);  // given as the string "2"
}

TEST(EvalTasks, ArcWithLetterAndDigitKeys) {
  absl::StatusOr<std::vector<TaskExample>> examples = ReadTask("arc_easy", Fixture("arc.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 5u);
  EXPECT_EQ((*examples)[0].label, 1);  // "B"
  EXPECT_EQ((*examples)[0].choices[1].context,
            "Question: Which object is the best conductor of heat?\nAnswer:");
  EXPECT_EQ((*examples)[0].choices[1].continuation, " a metal pan");
  EXPECT_EQ((*examples)[1].choices.size(), 3u);
  EXPECT_EQ((*examples)[2].label, 3);  // "4"
  EXPECT_EQ((*examples)[3].choices.size(), 5u);
  EXPECT_TRUE(ReadTask("arc_challenge", Fixture("arc.jsonl")).ok());
}

TEST(EvalTasks, PiqaLabelsFromTheSiblingFileOrAField) {
  absl::StatusOr<std::vector<TaskExample>> examples = ReadTask("piqa", Fixture("piqa.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 5u);
  EXPECT_EQ((*examples)[1].label, 1);
  EXPECT_EQ((*examples)[1].choices[0].context, "Question: Loosen a stuck jar lid.\nAnswer:");
  examples = ReadTask("piqa", Fixture("piqa_with_labels.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  EXPECT_EQ((*examples)[1].label, 1);
  // An explicit labels file with too few labels.
  const std::string labels = TempFile("two-labels.lst", "0\n1\n");
  absl::Status status = ReadTask("piqa", Fixture("piqa.jsonl"), labels).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("piqa.jsonl:3"));
}

TEST(EvalTasks, BoolQ) {
  absl::StatusOr<std::vector<TaskExample>> examples = ReadTask("boolq", Fixture("boolq.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 5u);
  const TaskExample& first = (*examples)[0];
  EXPECT_EQ(first.choices[0].context,
            "The moon is a natural satellite that orbits the earth. Its diameter is about a "
            "quarter of the earth's.\nQuestion: is the moon larger than the earth?\nAnswer:");
  EXPECT_EQ(first.choices[0].continuation, " yes");
  EXPECT_EQ(first.choices[1].continuation, " no");
  EXPECT_EQ(first.label, 1);           // false
  EXPECT_EQ((*examples)[1].label, 0);  // true
}

TEST(EvalTasks, LambadaSplitsOffTheLastWord) {
  absl::StatusOr<std::vector<TaskExample>> examples = ReadTask("lambada", Fixture("lambada.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 5u);
  ASSERT_EQ((*examples)[0].choices.size(), 1u);
  EXPECT_EQ((*examples)[0].choices[0].continuation, " tea");
  EXPECT_THAT((*examples)[0].choices[0].context, ::testing::EndsWith("She liked her"));
  EXPECT_TRUE(IsLastWordTask("lambada"));
  EXPECT_FALSE(IsLastWordTask("boolq"));
}

TEST(EvalTasks, GcideHeadwordsAreContexts) {
  absl::StatusOr<std::vector<TaskExample>> examples = ReadTask("gcide", Fixture("gcide.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 5u);
  const TaskExample& first = (*examples)[0];
  ASSERT_EQ(first.choices.size(), 4u);
  EXPECT_EQ(first.choices[2].context, "thimble");
  EXPECT_EQ(first.choices[2].continuation, ", n. A small boat driven by oars.");
}

TEST(EvalTasks, MalformedLineNamesFileAndLine) {
  absl::Status status = ReadTask("boolq", Fixture("malformed.jsonl")).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("malformed.jsonl:2: not a JSON object"));
}

TEST(EvalTasks, FieldErrorsNameFileLineAndField) {
  struct Case {
    std::string task, text, message;
  };
  const Case cases[] = {
      {"hellaswag", R"({"ctx": "x", "endings": ["a", "b"], "label": 2})", ":1: \"label\" 2"},
      {"hellaswag", R"({"ctx": "x", "endings": "a", "label": 0})", "\"endings\" is not"},
      {"arc_easy",
       "\n"
       R"({"question": {"stem": "q", "choices": [{"text": "a", "label": "A"}]}, )"
       R"("answerKey": "C"})",
       ":2: \"answerKey\" \"C\""},
      {"boolq", R"({"question": "q", "passage": "p", "answer": "yes"})", "\"answer\" is not"},
      {"lambada", R"({"text": "oneword"})", "no context"},
      {"gcide", R"({"definition": "d", "choices": ["a", "b"]})", "no \"label\" field"},
      {"piqa", R"({"goal": "g", "sol1": "a", "sol2": "b"})", "no \"label\" field"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string path = TempFile("bad.jsonl", c.text);
    absl::Status status = ReadTask(c.task, path).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr(path));
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
}

TEST(EvalTasks, UnknownTaskMissingFileAndEmptyFile) {
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTask("mmlu", Fixture("boolq.jsonl")).status()));
  EXPECT_TRUE(absl::IsNotFound(ReadTask("boolq", Fixture("nope.jsonl")).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTask("boolq", TempFile("empty.jsonl", "\n")).status()));
  EXPECT_TRUE(IsEvalTask("gcide"));
  EXPECT_FALSE(IsEvalTask("mmlu"));
}

}  // namespace
}  // namespace xmod
