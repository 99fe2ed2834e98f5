// Zero-shot task readers: each JSONL line is parsed into a google.protobuf.Struct by
// protobuf's JSON parser (the tree's one JSON implementation), then picked apart by field.
#include "model/eval/tasks.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "model/eval/python_text.h"

namespace xmod {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;

// One line of a file, for errors that name "path:line".
struct Line {
  const std::string& path;
  int number;
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": ", what));
  }
};

absl::StatusOr<const Value*> Field(const Struct& object, absl::string_view name, const Line& line) {
  auto it = object.fields().find(std::string(name));
  if (it == object.fields().end()) return line.Error(absl::StrCat("no \"", name, "\" field"));
  return &it->second;
}

absl::StatusOr<std::string> StringField(const Struct& object, absl::string_view name,
                                        const Line& line) {
  absl::StatusOr<const Value*> value = Field(object, name, line);
  if (!value.ok()) return value.status();
  if ((*value)->kind_case() != Value::kStringValue) {
    return line.Error(absl::StrCat("\"", name, "\" is not a string"));
  }
  return (*value)->string_value();
}

// An integer given as a JSON number or a string of digits (both occur in the public files).
absl::StatusOr<int> IntField(const Struct& object, absl::string_view name, const Line& line) {
  absl::StatusOr<const Value*> value = Field(object, name, line);
  if (!value.ok()) return value.status();
  int out = 0;
  if ((*value)->kind_case() == Value::kNumberValue) {
    const double number = (*value)->number_value();
    if (number == std::floor(number) && std::abs(number) < 1e9) return static_cast<int>(number);
  } else if ((*value)->kind_case() == Value::kStringValue &&
             absl::SimpleAtoi((*value)->string_value(), &out)) {
    return out;
  }
  return line.Error(absl::StrCat("\"", name, "\" is not an integer"));
}

absl::StatusOr<std::vector<std::string>> StringListField(const Struct& object,
                                                         absl::string_view name, const Line& line) {
  absl::StatusOr<const Value*> value = Field(object, name, line);
  if (!value.ok()) return value.status();
  if ((*value)->kind_case() != Value::kListValue || (*value)->list_value().values().empty()) {
    return line.Error(absl::StrCat("\"", name, "\" is not a non-empty list"));
  }
  std::vector<std::string> out;
  for (const Value& item : (*value)->list_value().values()) {
    if (item.kind_case() != Value::kStringValue) {
      return line.Error(absl::StrCat("\"", name, "\" holds a non-string"));
    }
    out.push_back(item.string_value());
  }
  return out;
}

absl::Status CheckLabel(int label, size_t choices, absl::string_view name, const Line& line) {
  if (label < 0 || static_cast<size_t>(label) >= choices) {
    return line.Error(
        absl::StrCat("\"", name, "\" ", label, " is outside 0..", static_cast<int>(choices) - 1));
  }
  return absl::OkStatus();
}

// The harness's target_delimiter: what a multiple-choice continuation starts with.
constexpr absl::string_view kTargetDelimiter = " ";

// The choice of `answer` after `context`, as the harness's request (context,
// target_delimiter + answer).
Choice AnswerChoice(const std::string& context, absl::string_view answer) {
  return {context, absl::StrCat(kTargetDelimiter, answer), CodePoints(answer)};
}

// Choices sharing one context.
std::vector<Choice> SharedContext(const std::string& context,
                                  const std::vector<std::string>& answers) {
  std::vector<Choice> out;
  for (const std::string& answer : answers) out.push_back(AnswerChoice(context, answer));
  return out;
}

std::string QuestionAnswer(absl::string_view question) {
  return absl::StrCat("Question: ", question, "\nAnswer:");
}

// The harness's hellaswag process_docs: query and choices preprocessed (python_text.h).
absl::StatusOr<TaskExample> HellaSwag(const Struct& o, const Line& line) {
  std::string parts[3];  // activity_label, ctx_a, ctx_b
  const char* names[3] = {"activity_label", "ctx_a", "ctx_b"};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::string> part = StringField(o, names[i], line);
    if (!part.ok()) return part.status();
    parts[i] = *std::move(part);
  }
  absl::StatusOr<std::vector<std::string>> endings = StringListField(o, "endings", line);
  if (!endings.ok()) return endings.status();
  absl::StatusOr<int> label = IntField(o, "label", line);
  if (!label.ok()) return label.status();
  if (absl::Status s = CheckLabel(*label, endings->size(), "label", line); !s.ok()) return s;
  const std::string query =
      HellaSwagPreprocess(absl::StrCat(parts[0], ": ", parts[1], " ", PythonCapitalize(parts[2])));
  std::vector<std::string> answers;
  for (const std::string& ending : *endings) answers.push_back(HellaSwagPreprocess(ending));
  return TaskExample{SharedContext(query, answers), *label};
}

// An ARC question in either published schema: its stem, and the choices' texts and labels.
struct ArcQuestion {
  std::string stem;
  std::vector<std::string> texts, labels;
};

// allenai/ai2_arc (the harness's): "question" a string, "choices" {"text": [..], "label": [..]}.
absl::StatusOr<ArcQuestion> HubArcQuestion(const Struct& o, const Line& line) {
  ArcQuestion out;
  absl::StatusOr<std::string> stem = StringField(o, "question", line);
  if (!stem.ok()) return stem.status();
  out.stem = *std::move(stem);
  absl::StatusOr<const Value*> choices = Field(o, "choices", line);
  if (!choices.ok()) return choices.status();
  if ((*choices)->kind_case() != Value::kStructValue) {
    return line.Error("\"choices\" is not an object");
  }
  absl::StatusOr<std::vector<std::string>> texts =
      StringListField((*choices)->struct_value(), "text", line);
  if (!texts.ok()) return texts.status();
  absl::StatusOr<std::vector<std::string>> labels =
      StringListField((*choices)->struct_value(), "label", line);
  if (!labels.ok()) return labels.status();
  if (texts->size() != labels->size()) {
    return line.Error(
        absl::StrCat("\"choices\" has ", texts->size(), " texts but ", labels->size(), " labels"));
  }
  out.texts = *std::move(texts);
  out.labels = *std::move(labels);
  return out;
}

// The original ARC JSONL: "question" {"stem", "choices": [{"text", "label"}]}.
absl::StatusOr<ArcQuestion> OriginalArcQuestion(const Struct& q, const Line& line) {
  ArcQuestion out;
  absl::StatusOr<std::string> stem = StringField(q, "stem", line);
  if (!stem.ok()) return stem.status();
  out.stem = *std::move(stem);
  absl::StatusOr<const Value*> choices = Field(q, "choices", line);
  if (!choices.ok()) return choices.status();
  if ((*choices)->kind_case() != Value::kListValue || (*choices)->list_value().values().empty()) {
    return line.Error("\"question.choices\" is not a non-empty list");
  }
  for (const Value& choice : (*choices)->list_value().values()) {
    if (choice.kind_case() != Value::kStructValue) {
      return line.Error("\"question.choices\" holds a non-object");
    }
    absl::StatusOr<std::string> text = StringField(choice.struct_value(), "text", line);
    if (!text.ok()) return text.status();
    absl::StatusOr<std::string> label = StringField(choice.struct_value(), "label", line);
    if (!label.ok()) return label.status();
    out.texts.push_back(*std::move(text));
    out.labels.push_back(*std::move(label));
  }
  return out;
}

// The label is the first choice labelled answerKey (the harness's
// choices.label.index(answerKey)).
absl::StatusOr<TaskExample> Arc(const Struct& o, const Line& line) {
  absl::StatusOr<const Value*> question = Field(o, "question", line);
  if (!question.ok()) return question.status();
  absl::StatusOr<ArcQuestion> q = (*question)->kind_case() == Value::kStructValue
                                      ? OriginalArcQuestion((*question)->struct_value(), line)
                                      : HubArcQuestion(o, line);
  if (!q.ok()) return q.status();
  absl::StatusOr<std::string> key = StringField(o, "answerKey", line);
  if (!key.ok()) return key.status();
  const auto found = std::find(q->labels.begin(), q->labels.end(), *key);
  if (found == q->labels.end()) {
    return line.Error(absl::StrCat("\"answerKey\" \"", *key, "\" labels none of the choices"));
  }
  return TaskExample{SharedContext(QuestionAnswer(q->stem), q->texts),
                     static_cast<int>(found - q->labels.begin())};
}

// `label` < 0: take it from the line's "label" field.
absl::StatusOr<TaskExample> Piqa(const Struct& o, const Line& line, int label) {
  absl::StatusOr<std::string> goal = StringField(o, "goal", line);
  if (!goal.ok()) return goal.status();
  std::vector<std::string> answers;
  for (const char* name : {"sol1", "sol2"}) {
    absl::StatusOr<std::string> sol = StringField(o, name, line);
    if (!sol.ok()) return sol.status();
    answers.push_back(*std::move(sol));
  }
  if (label < 0) {
    absl::StatusOr<int> field = IntField(o, "label", line);
    if (!field.ok()) return field.status();
    label = *field;
  }
  if (absl::Status s = CheckLabel(label, 2, "label", line); !s.ok()) return s;
  return TaskExample{SharedContext(QuestionAnswer(*goal), answers), label};
}

// Choices "no", "yes" (the harness's order): label 1 = the answer is yes. super_glue's
// "label" 0/1, or the original file's "answer" bool.
absl::StatusOr<TaskExample> BoolQ(const Struct& o, const Line& line) {
  absl::StatusOr<std::string> question = StringField(o, "question", line);
  if (!question.ok()) return question.status();
  absl::StatusOr<std::string> passage = StringField(o, "passage", line);
  if (!passage.ok()) return passage.status();
  int label = 0;
  if (o.fields().count("label") > 0) {
    absl::StatusOr<int> field = IntField(o, "label", line);
    if (!field.ok()) return field.status();
    if (absl::Status s = CheckLabel(*field, 2, "label", line); !s.ok()) return s;
    label = *field;
  } else {
    absl::StatusOr<const Value*> answer = Field(o, "answer", line);
    if (!answer.ok()) return line.Error("neither a \"label\" nor an \"answer\" field");
    if ((*answer)->kind_case() != Value::kBoolValue) return line.Error("\"answer\" is not a bool");
    label = (*answer)->bool_value() ? 1 : 0;
  }
  const std::string context = absl::StrCat(*passage, "\nQuestion: ", *question, "?\nAnswer:");
  return TaskExample{SharedContext(context, {"no", "yes"}), label};
}

// lambada_openai's doc_to_text / doc_to_target: text.split(' ')[:-1] joined by ' ', and ' '
// + text.split(' ')[-1] — the split is at the last space, nothing stripped.
absl::StatusOr<TaskExample> Lambada(const Struct& o, const Line& line) {
  absl::StatusOr<std::string> text = StringField(o, "text", line);
  if (!text.ok()) return text.status();
  const size_t space = text->rfind(' ');
  if (space == std::string::npos || space == 0) {
    return line.Error("\"text\" has no context before its last word");
  }
  const std::string word = text->substr(space + 1);
  return TaskExample{{{text->substr(0, space), absl::StrCat(" ", word), CodePoints(word)}}, 0};
}

absl::StatusOr<TaskExample> Gcide(const Struct& o, const Line& line) {
  absl::StatusOr<std::string> definition = StringField(o, "definition", line);
  if (!definition.ok()) return definition.status();
  absl::StatusOr<std::vector<std::string>> headwords = StringListField(o, "choices", line);
  if (!headwords.ok()) return headwords.status();
  absl::StatusOr<int> label = IntField(o, "label", line);
  if (!label.ok()) return label.status();
  if (absl::Status s = CheckLabel(*label, headwords->size(), "label", line); !s.ok()) return s;
  TaskExample example;
  example.label = *label;
  for (const std::string& headword : *headwords) {
    const std::string continuation = absl::StrCat(", ", *definition);
    example.choices.push_back({headword, continuation, CodePoints(continuation)});
  }
  return example;
}

// PIQA's labels file: one 0 or 1 a line.
absl::StatusOr<std::vector<int>> ReadLabels(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::vector<int> labels;
  int number = 0;
  for (absl::string_view row : absl::StrSplit(*text, '\n')) {
    ++number;
    row = absl::StripAsciiWhitespace(row);
    if (row.empty()) continue;
    int label = 0;
    if (!absl::SimpleAtoi(row, &label)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": \"", row, "\" is not a label"));
    }
    labels.push_back(label);
  }
  return labels;
}

// PIQA's labels: labels_path's, else the "-labels.lst" file beside path if there is one,
// else none.
absl::StatusOr<std::vector<int>> PiqaLabels(const std::string& path,
                                            const std::string& labels_path) {
  std::string labels_file = labels_path;
  if (labels_file.empty()) {
    const std::string sibling = absl::StrCat(absl::StripSuffix(path, ".jsonl"), "-labels.lst");
    if (ReadFile(sibling).ok()) labels_file = sibling;
  }
  if (labels_file.empty()) return std::vector<int>();
  return ReadLabels(labels_file);
}

absl::StatusOr<Struct> ParseRow(absl::string_view row, const Line& line) {
  Struct object;
  auto parsed = google::protobuf::util::JsonStringToMessage(std::string(row), &object);
  if (!parsed.ok()) {
    // protobuf's message: what went wrong, then lines pointing into the text.
    const std::string message(parsed.message().data(), parsed.message().size());
    return line.Error(absl::StrCat("not a JSON object: ", message.substr(0, message.find('\n'))));
  }
  return object;
}

// The task's example of one parsed line, the index-th of the file; PIQA's label is
// labels[index] when labels are given.
absl::StatusOr<TaskExample> ParseExample(const std::string& task, const Struct& object,
                                         const Line& line, const std::vector<int>& labels,
                                         size_t index) {
  if (task == "hellaswag") return HellaSwag(object, line);
  if (absl::StartsWith(task, "arc_")) return Arc(object, line);
  if (task == "piqa") {
    int label = -1;
    if (!labels.empty()) {
      if (index >= labels.size()) {
        return line.Error(absl::StrCat("more examples than the ", labels.size(), " labels"));
      }
      label = labels[index];
    }
    return Piqa(object, line, label);
  }
  if (task == "boolq") return BoolQ(object, line);
  if (task == "lambada") return Lambada(object, line);
  return Gcide(object, line);
}

}  // namespace

const std::vector<std::string>& EvalTaskNames() {
  static const auto* names = new std::vector<std::string>{
      "hellaswag", "arc_easy", "arc_challenge", "piqa", "boolq", "lambada", "gcide"};
  return *names;
}

bool IsEvalTask(absl::string_view task) {
  const auto& names = EvalTaskNames();
  return std::find(names.begin(), names.end(), task) != names.end();
}

bool IsLastWordTask(absl::string_view task) { return task == "lambada"; }

absl::StatusOr<std::vector<TaskExample>> ReadTask(const std::string& task, const std::string& path,
                                                  const std::string& labels_path) {
  if (!IsEvalTask(task)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown task \"", task, "\"; known: ", absl::StrJoin(EvalTaskNames(), ", ")));
  }
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::vector<int> labels;
  if (task == "piqa") {
    absl::StatusOr<std::vector<int>> read = PiqaLabels(path, labels_path);
    if (!read.ok()) return read.status();
    labels = *std::move(read);
  }
  std::vector<TaskExample> examples;
  int number = 0;
  for (absl::string_view row : absl::StrSplit(*text, '\n')) {
    const Line line{path, ++number};
    if (absl::StripAsciiWhitespace(row).empty()) continue;
    absl::StatusOr<Struct> object = ParseRow(row, line);
    if (!object.ok()) return object.status();
    absl::StatusOr<TaskExample> example =
        ParseExample(task, *object, line, labels, examples.size());
    if (!example.ok()) return example.status();
    examples.push_back(*std::move(example));
  }
  if (examples.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no examples"));
  if (!labels.empty() && labels.size() != examples.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", examples.size(), " examples but ", labels.size(), " labels"));
  }
  return examples;
}

}  // namespace xmod
