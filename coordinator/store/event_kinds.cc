// See event_kinds.h.
#include "coordinator/store/event_kinds.h"

#include <map>

#include "common/enum_option_names.h"

namespace xmod {

const std::string& EventKindName(xmod::v1::EventKind kind) {
  static const std::map<int, std::string>* const names = new std::map<int, std::string>(
      EnumOptionNames(xmod::v1::EventKind_descriptor(), xmod::v1::event_kind_name));
  return EnumOptionName(*names, kind);
}

xmod::v1::EventKind AttemptEndedKind(std::string_view outcome) {
  static const std::map<std::string_view, xmod::v1::EventKind>* const kinds =
      new std::map<std::string_view, xmod::v1::EventKind>{
          {"succeeded", xmod::v1::EVENT_ATTEMPT_SUCCEEDED},
          {"failed", xmod::v1::EVENT_ATTEMPT_FAILED},
          {"cancelled", xmod::v1::EVENT_ATTEMPT_CANCELLED},
          {"preempted", xmod::v1::EVENT_ATTEMPT_PREEMPTED},
          {"lost", xmod::v1::EVENT_ATTEMPT_LOST}};
  auto it = kinds->find(outcome);
  return it == kinds->end() ? xmod::v1::EVENT_KIND_UNSPECIFIED : it->second;
}

}  // namespace xmod
