// See law_json.h.
#include "fitter/law_json.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace xmod::fitter {

absl::StatusOr<LawParams> LawParamsFromJson(const std::string& json) {
  google::protobuf::Struct object;
  if (auto s = google::protobuf::util::JsonStringToMessage(json, &object); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("law parameters: not a JSON object: ", std::string(s.message())));
  }
  // Table 8's keys are required; the exposure term's (Eq. 24) optional.
  auto index_of = [](const std::string& key) {
    for (int i = 0; i < kAllParamCount; ++i) {
      const int n = static_cast<int>(kLawParamNames.size());
      if (key == (i < n ? kLawParamNames[i] : kExposureParamNames[i - n])) return i;
    }
    return -1;
  };
  LawParams p;
  for (const auto& [key, value] : object.fields()) {
    const int i = index_of(key);
    if (i < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "law parameters: unknown key \"", key,
          "\"; expected e, u, eta_n, rho_n, w, eta_l, rho_l, z, rho_k, rho_a (and optionally v, "
          "eta_d, rho_d)"));
    }
    if (value.kind_case() != google::protobuf::Value::kNumberValue ||
        !std::isfinite(value.number_value())) {
      return absl::InvalidArgumentError(
          absl::StrCat("law parameters: \"", key, "\" must be a finite number"));
    }
    ParamAt(p, i) = value.number_value();
  }
  for (const char* name : kLawParamNames) {
    if (object.fields().count(name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("law parameters: missing key \"", name, "\""));
    }
  }
  return p;
}

}  // namespace xmod::fitter
