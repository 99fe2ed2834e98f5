// Law parameters (paper Table 8) from JSON, as xmod-fit prints them in "params": the truth of
// the design simulator (xmod-design-sim) and of the fake trainer's law mode. Pure,
// thread-safe.
#ifndef XMOD_FITTER_LAW_JSON_H_
#define XMOD_FITTER_LAW_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "fitter/law.h"

namespace xmod::fitter {

// Law parameters from a JSON object with the keys of xmod-fit's "params" (e, u, eta_n,
// rho_n, w, eta_l, rho_l, z, rho_k, rho_a, each required; v, eta_d, rho_d of Eq. 24's
// exposure term optional, 0 when absent), each a finite number. INVALID_ARGUMENT naming the
// key that is missing, unknown or not a number.
absl::StatusOr<LawParams> LawParamsFromJson(const std::string& json);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_LAW_JSON_H_
