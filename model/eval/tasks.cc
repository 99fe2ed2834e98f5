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

// Choices sharing one context.
std::vector<Choice> SharedContext(const std::string& context,
                                  const std::vector<std::string>& continuations) {
  std::vector<Choice> out;
  for (const std::string& c : continuations) out.push_back({context, c});
  return out;
}

std::string QuestionAnswer(absl::string_view question) {
  return absl::StrCat("Question: ", question, "\nAnswer:");
}

absl::StatusOr<TaskExample> HellaSwag(const Struct& o, const Line& line) {
  absl::StatusOr<std::string> ctx = StringField(o, "ctx", line);
  if (!ctx.ok()) return ctx.status();
  absl::StatusOr<std::vector<std::string>> endings = StringListField(o, "endings", line);
  if (!endings.ok()) return endings.status();
  absl::StatusOr<int> label = IntField(o, "label", line);
  if (!label.ok()) return label.status();
  if (absl::Status s = CheckLabel(*label, endings->size(), "label", line); !s.ok()) return s;
  std::vector<std::string> continuations;
  for (const std::string& e : *endings) continuations.push_back(absl::StrCat(" ", e));
  return TaskExample{SharedContext(*ctx, continuations), *label};
}

absl::StatusOr<TaskExample> Arc(const Struct& o, const Line& line) {
  absl::StatusOr<const Value*> question = Field(o, "question", line);
  if (!question.ok()) return question.status();
  if ((*question)->kind_case() != Value::kStructValue) {
    return line.Error("\"question\" is not an object");
  }
  const Struct& q = (*question)->struct_value();
  absl::StatusOr<std::string> stem = StringField(q, "stem", line);
  if (!stem.ok()) return stem.status();
  absl::StatusOr<const Value*> choices = Field(q, "choices", line);
  if (!choices.ok()) return choices.status();
  if ((*choices)->kind_case() != Value::kListValue || (*choices)->list_value().values().empty()) {
    return line.Error("\"question.choices\" is not a non-empty list");
  }
  absl::StatusOr<std::string> key = StringField(o, "answerKey", line);
  if (!key.ok()) return key.status();
  TaskExample example;
  example.label = -1;
  for (const Value& choice : (*choices)->list_value().values()) {
    if (choice.kind_case() != Value::kStructValue) {
      return line.Error("\"question.choices\" holds a non-object");
    }
    absl::StatusOr<std::string> text = StringField(choice.struct_value(), "text", line);
    if (!text.ok()) return text.status();
    absl::StatusOr<std::string> label = StringField(choice.struct_value(), "label", line);
    if (!label.ok()) return label.status();
    if (*label == *key) example.label = static_cast<int>(example.choices.size());
    example.choices.push_back({QuestionAnswer(*stem), absl::StrCat(" ", *text)});
  }
  if (example.label < 0) {
    return line.Error(absl::StrCat("\"answerKey\" \"", *key, "\" labels none of the choices"));
  }
  return example;
}

// `label` < 0: take it from the line's "label" field.
absl::StatusOr<TaskExample> Piqa(const Struct& o, const Line& line, int label) {
  absl::StatusOr<std::string> goal = StringField(o, "goal", line);
  if (!goal.ok()) return goal.status();
  std::vector<std::string> continuations;
  for (const char* name : {"sol1", "sol2"}) {
    absl::StatusOr<std::string> sol = StringField(o, name, line);
    if (!sol.ok()) return sol.status();
    continuations.push_back(absl::StrCat(" ", *sol));
  }
  if (label < 0) {
    absl::StatusOr<int> field = IntField(o, "label", line);
    if (!field.ok()) return field.status();
    label = *field;
  }
  if (absl::Status s = CheckLabel(label, 2, "label", line); !s.ok()) return s;
  return TaskExample{SharedContext(QuestionAnswer(*goal), continuations), label};
}

absl::StatusOr<TaskExample> BoolQ(const Struct& o, const Line& line) {
  absl::StatusOr<std::string> question = StringField(o, "question", line);
  if (!question.ok()) return question.status();
  absl::StatusOr<std::string> passage = StringField(o, "passage", line);
  if (!passage.ok()) return passage.status();
  absl::StatusOr<const Value*> answer = Field(o, "answer", line);
  if (!answer.ok()) return answer.status();
  if ((*answer)->kind_case() != Value::kBoolValue) return line.Error("\"answer\" is not a bool");
  const std::string context = absl::StrCat(*passage, "\nQuestion: ", *question, "?\nAnswer:");
  return TaskExample{SharedContext(context, {" yes", " no"}), (*answer)->bool_value() ? 0 : 1};
}

absl::StatusOr<TaskExample> Lambada(const Struct& o, const Line& line) {
  absl::StatusOr<std::string> text = StringField(o, "text", line);
  if (!text.ok()) return text.status();
  const absl::string_view trimmed = absl::StripTrailingAsciiWhitespace(*text);
  const size_t space = trimmed.find_last_of(' ');
  if (space == absl::string_view::npos || space == 0 || space + 1 == trimmed.size()) {
    return line.Error("\"text\" has no context before its last word");
  }
  return TaskExample{
      {{std::string(trimmed.substr(0, space)), std::string(trimmed.substr(space))}},  // " word"
      0};
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
    example.choices.push_back({headword, absl::StrCat(", ", *definition)});
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
    std::string labels_file = labels_path;
    if (labels_file.empty()) {
      const std::string sibling = absl::StrCat(absl::StripSuffix(path, ".jsonl"), "-labels.lst");
      if (ReadFile(sibling).ok()) labels_file = sibling;
    }
    if (!labels_file.empty()) {
      absl::StatusOr<std::vector<int>> read = ReadLabels(labels_file);
      if (!read.ok()) return read.status();
      labels = *std::move(read);
    }
  }
  std::vector<TaskExample> examples;
  int number = 0;
  for (absl::string_view row : absl::StrSplit(*text, '\n')) {
    const Line line{path, ++number};
    if (absl::StripAsciiWhitespace(row).empty()) continue;
    Struct object;
    auto parsed = google::protobuf::util::JsonStringToMessage(std::string(row), &object);
    if (!parsed.ok()) {
      // protobuf's message: what went wrong, then lines pointing into the text.
      const std::string message(parsed.message().data(), parsed.message().size());
      return line.Error(absl::StrCat("not a JSON object: ", message.substr(0, message.find('\n'))));
    }
    absl::StatusOr<TaskExample> example;
    if (task == "hellaswag") {
      example = HellaSwag(object, line);
    } else if (absl::StartsWith(task, "arc_")) {
      example = Arc(object, line);
    } else if (task == "piqa") {
      int label = -1;
      if (!labels.empty()) {
        if (examples.size() >= labels.size()) {
          return line.Error(absl::StrCat("more examples than the ", labels.size(), " labels"));
        }
        label = labels[examples.size()];
      }
      example = Piqa(object, line, label);
    } else if (task == "boolq") {
      example = BoolQ(object, line);
    } else if (task == "lambada") {
      example = Lambada(object, line);
    } else {
      example = Gcide(object, line);
    }
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
