// The string an enum's values carry in a custom option (e.g. xmod.v1.Series' series_name,
// xmod.v1.EventKind's event_kind_name): the one definition of a wire or stored string,
// read from the enum's descriptor. Header-only; thread-safe.
#ifndef XMOD_COMMON_ENUM_OPTION_NAMES_H_
#define XMOD_COMMON_ENUM_OPTION_NAMES_H_

#include <map>
#include <string>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"

namespace xmod {

// By value number, the non-empty `option` string of each value of `descriptor`.
template <typename Option>
std::map<int, std::string> EnumOptionNames(const google::protobuf::EnumDescriptor* descriptor,
                                           const Option& option) {
  std::map<int, std::string> names;
  for (int i = 0; i < descriptor->value_count(); ++i) {
    const google::protobuf::EnumValueDescriptor* value = descriptor->value(i);
    const std::string& name = value->options().GetExtension(option);
    if (!name.empty()) names[value->number()] = name;
  }
  return names;
}

// The name of `number` in `names` (EnumOptionNames); empty when it has none.
inline const std::string& EnumOptionName(const std::map<int, std::string>& names, int number) {
  static const std::string* const kNone = new std::string;
  auto it = names.find(number);
  return it == names.end() ? *kNone : it->second;
}

}  // namespace xmod

#endif  // XMOD_COMMON_ENUM_OPTION_NAMES_H_
