// Task readers on the hand-written fixtures in model/eval/testdata (one small file in each
// public format) and on malformed lines; and on testdata/harness, whose documents must give
// exactly the requests lm-evaluation-harness 0.4.13 sends for them (testdata/harness/
// requests.jsonl, recorded from the harness by tests/eval/harness_parity.py, which checks
// the harness still sends them).
#include "model/eval/tasks.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "absl/strings/str_split.h"
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

// The harness's requests for the documents of testdata/harness, task by task in order.
TEST(EvalTasks, RequestsAreTheHarnessOnes) {
  absl::StatusOr<std::string> recorded = ReadFile(Fixture("harness/requests.jsonl"));
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> harness;
  for (absl::string_view line : absl::StrSplit(*recorded, '\n', absl::SkipEmpty())) {
    google::protobuf::Struct request;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(line), &request).ok());
    harness[request.fields().at("task").string_value()].push_back(
        {request.fields().at("context").string_value(),
         request.fields().at("continuation").string_value()});
  }
  const std::pair<std::string, std::string> tasks[] = {
      {"hellaswag", "hellaswag"}, {"arc_easy", "arc_easy"}, {"arc_challenge", "arc_challenge"},
      {"piqa", "piqa"},           {"boolq", "boolq"},       {"lambada_openai", "lambada"}};
  for (const auto& [harness_task, task] : tasks) {
    SCOPED_TRACE(harness_task);
    absl::StatusOr<std::vector<TaskExample>> examples =
        ReadTask(task, Fixture("harness/" + harness_task + ".jsonl"));
    ASSERT_TRUE(examples.ok()) << examples.status();
    std::vector<std::pair<std::string, std::string>> ours;
    for (const TaskExample& example : *examples) {
      for (const Choice& choice : example.choices)
        ours.push_back({choice.context, choice.continuation});
    }
    ASSERT_EQ(ours.size(), harness[harness_task].size());
    for (size_t i = 0; i < ours.size(); ++i) {
      EXPECT_EQ(ours[i].first, harness[harness_task][i].first) << "request " << i;
      EXPECT_EQ(ours[i].second, harness[harness_task][i].second) << "request " << i;
    }
  }
}

TEST(EvalTasks, HellaSwag) {
  absl::StatusOr<std::vector<TaskExample>> examples =
      ReadTask("hellaswag", Fixture("hellaswag.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 5u);
  const TaskExample& first = (*examples)[0];
  ASSERT_EQ(first.choices.size(), 4u);
  // The harness's query: activity_label + ": " + ctx_a + " " + ctx_b.capitalize() — not "ctx".
  EXPECT_EQ(first.choices[0].context, "Cooking: A man cracks two eggs into a bowl. He");
  EXPECT_EQ(first.choices[0].continuation, " whisks them with a fork until they are smooth.");
  EXPECT_EQ(first.label, 0);
  EXPECT_EQ((*examples)[2].label, 2);  // given as the string "2"
}

// WikiHow documents, as the harness's preprocess() leaves them: " [title]" -> ". ", the
// "[header]" / "[step]" / "[substeps]" markers gone, double spaces halved, ends stripped;
// ctx_b capitalized (the rest lower-cased: "ÉTIENNE" -> "Étienne").
TEST(EvalTasks, HellaSwagPreprocessesWikiHowMarkup) {
  absl::StatusOr<std::vector<TaskExample>> examples =
      ReadTask("hellaswag", Fixture("harness/hellaswag.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 6u);
  const TaskExample& bread = (*examples)[1];
  EXPECT_EQ(bread.choices[0].context,
            "Home and Garden: How to keep bread fresh. Store it in a bread box. A bread box "
            "keeps the air moist");
  EXPECT_EQ(bread.choices[0].continuation,
            " but not wet, so the crust stays crisp. Keep the box away from the oven.");
  EXPECT_EQ(bread.choices[1].continuation, " and the bread goes stale within an hour.");
  // Stripped before "[step]" goes, so its space stays after the delimiter's.
  EXPECT_EQ(bread.choices[2].continuation, "  Freeze the box overnight before using it.");
  EXPECT_EQ((*examples)[2].choices[0].context,
            "Food and Entertaining: How to make crème brûlée. Heat the cream. Étienne whisks "
            "the yolks with sugar");
  // "[" with no "]" before the end of its line stays.
  EXPECT_EQ((*examples)[4].choices[0].continuation, " [ by about a foot.");
  EXPECT_EQ((*examples)[4].choices[1].continuation, " by about a foot. Adjust later.");
}

// acc_norm divides by len(answer) in characters, without the " " the continuation starts
// with (the harness's completion_len), not by the continuation's UTF-8 bytes.
TEST(EvalTasks, AnswerLengthIsInCharactersWithoutTheDelimiter) {
  absl::StatusOr<std::vector<TaskExample>> examples =
      ReadTask("arc_easy", Fixture("harness/arc_easy.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  const Choice& angstrom = (*examples)[3].choices[2];
  EXPECT_EQ(angstrom.continuation, " ångström");  // 10 bytes
  EXPECT_EQ(angstrom.answer_chars, 8);
  EXPECT_EQ((*examples)[3].choices[0].answer_chars, 6);  // "kelvin"
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
  // The harness's doc_to_choice: ["no", "yes"].
  EXPECT_EQ(first.choices[0].continuation, " no");
  EXPECT_EQ(first.choices[1].continuation, " yes");
  EXPECT_EQ(first.label, 0);           // false
  EXPECT_EQ((*examples)[1].label, 1);  // true
  // super_glue's schema: "label" 1 = yes.
  examples = ReadTask("boolq", Fixture("harness/boolq.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  EXPECT_EQ((*examples)[0].label, 0);
  EXPECT_EQ((*examples)[1].label, 1);
}

TEST(EvalTasks, ArcInTheHubSchema) {
  absl::StatusOr<std::vector<TaskExample>> examples =
      ReadTask("arc_challenge", Fixture("harness/arc_challenge.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 3u);
  EXPECT_EQ((*examples)[1].label, 1);  // answerKey "2" of labels "1".."4"
  EXPECT_EQ((*examples)[1].choices[1].context,
            "Question: A scientist mixes two clear liquids and the mixture turns cloudy. What "
            "most likely formed?\nAnswer:");
  EXPECT_EQ((*examples)[1].choices[1].continuation, " a precipitate");
}

TEST(EvalTasks, LambadaSplitsOffTheLastWord) {
  absl::StatusOr<std::vector<TaskExample>> examples = ReadTask("lambada", Fixture("lambada.jsonl"));
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 5u);
  ASSERT_EQ((*examples)[0].choices.size(), 1u);
  EXPECT_EQ((*examples)[0].choices[0].continuation, " tea");
  EXPECT_THAT((*examples)[0].choices[0].context, ::testing::EndsWith("She liked her"));
  // Split at the last space exactly, as text.split(' '): nothing stripped, double spaces kept.
  const std::string path = TempFile("lambada-spaces.jsonl", R"({"text": "one  two three."})"
                                                            "\n"
                                                            R"({"text": "a b "})");
  examples = ReadTask("lambada", path);
  ASSERT_TRUE(examples.ok()) << examples.status();
  EXPECT_EQ((*examples)[0].choices[0].context, "one  two");
  EXPECT_EQ((*examples)[0].choices[0].continuation, " three.");
  EXPECT_EQ((*examples)[1].choices[0].context, "a b");
  EXPECT_EQ((*examples)[1].choices[0].continuation, " ");
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
      {"hellaswag",
       R"({"activity_label": "l", "ctx_a": "x", "ctx_b": "y", "endings": ["a", "b"], )"
       R"("label": 2})",
       ":1: \"label\" 2"},
      {"hellaswag",
       R"({"activity_label": "l", "ctx_a": "x", "ctx_b": "y", "endings": "a", "label": 0})",
       "\"endings\" is not"},
      {"hellaswag", R"({"ctx": "x", "endings": ["a"], "label": 0})", "no \"activity_label\""},
      {"arc_easy",
       R"({"question": "q", "choices": {"text": ["a", "b"], "label": ["A"]}, "answerKey": "A"})",
       "2 texts but 1 labels"},
      {"arc_easy",
       "\n"
       R"({"question": {"stem": "q", "choices": [{"text": "a", "label": "A"}]}, )"
       R"("answerKey": "C"})",
       ":2: \"answerKey\" \"C\""},
      {"boolq", R"({"question": "q", "passage": "p", "answer": "yes"})", "\"answer\" is not"},
      {"boolq", R"({"question": "q", "passage": "p", "label": 2})", "\"label\" 2 is outside"},
      {"boolq", R"({"question": "q", "passage": "p"})", "neither a \"label\""},
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
