// MoE baseline configuration (paper B.1 "MoE routing", Table 6 "Experts" and d_e): parsing
// the "active:total+shared" notation and validating it against a backbone. Pure functions;
// thread-safe.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/field_path.h"
#include "model/accounting/accounting.h"

namespace xmod {

absl::Status ParseExperts(const std::string& text, xmod::v1::MoESpec* moe) {
  const absl::string_view view(text);
  const auto bad = [&text](const std::string& why) {
    return InvalidField(
        "experts",
        absl::StrCat("\"", text, "\" is not active:total[+shared] (e.g. 6:64+2): ", why));
  };
  const size_t colon = view.find(':');
  if (colon == absl::string_view::npos) return bad("missing ':'");
  const size_t plus = view.find('+', colon + 1);
  const absl::string_view active_text = view.substr(0, colon);
  const absl::string_view total_text = plus == absl::string_view::npos
                                           ? view.substr(colon + 1)
                                           : view.substr(colon + 1, plus - colon - 1);
  int active = 0, total = 0, shared = 0;
  // SimpleAtoi accepts a leading '+' or '-': require plain digits.
  const auto digits = [](absl::string_view s) {
    if (s.empty()) return false;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
    }
    return true;
  };
  if (!digits(active_text) || !absl::SimpleAtoi(active_text, &active)) {
    return bad("active experts must be a whole number");
  }
  if (!digits(total_text) || !absl::SimpleAtoi(total_text, &total)) {
    return bad("total experts must be a whole number");
  }
  if (plus != absl::string_view::npos) {
    const absl::string_view shared_text = view.substr(plus + 1);
    if (!digits(shared_text) || !absl::SimpleAtoi(shared_text, &shared)) {
      return bad("shared experts must be a whole number");
    }
  }
  moe->set_active_experts(active);
  moe->set_total_experts(total);
  moe->set_shared_experts(shared);
  return absl::OkStatus();
}

absl::StatusOr<Experts> ResolveExperts(const xmod::v1::MoESpec& moe, const Backbone& backbone) {
  Experts e;
  e.active = moe.active_experts();
  e.total = moe.total_experts();
  e.shared = moe.shared_experts();
  if (e.active < 1) {
    return InvalidField("moe.active_experts", absl::StrCat("must be >= 1, got ", e.active));
  }
  if (e.total < e.active) {
    return InvalidField("moe.total_experts",
                        absl::StrCat(e.total, " routed experts are fewer than the ", e.active,
                                     " active experts per token"));
  }
  if (e.shared < 0) {
    return InvalidField("moe.shared_experts", absl::StrCat("must be >= 0, got ", e.shared));
  }
  if (moe.expert_dim() < 0) {
    return InvalidField("moe.expert_dim", absl::StrCat("must be >= 0, got ", moe.expert_dim()));
  }
  if (moe.expert_dim() > 0) {
    e.expert_dim = moe.expert_dim();
  } else {
    // Table 6: d_e = ffn_dim / (active + shared) (384, 480, 768 for 556M, 936M, 1.65B),
    // so active computation equals the dense FFN's.
    const int per_token = e.active + e.shared;
    if (backbone.ffn_dim % per_token != 0) {
      return InvalidField("moe.expert_dim",
                          absl::StrCat("not given and ffn_dim ", backbone.ffn_dim,
                                       " is not divisible by active + shared = ", per_token));
    }
    e.expert_dim = backbone.ffn_dim / per_token;
  }
  if (moe.balance_loss_weight() < 0) {
    return InvalidField("moe.balance_loss_weight", "must be >= 0");
  }
  if (moe.bias_update_rate() < 0) {
    return InvalidField("moe.bias_update_rate", "must be >= 0");
  }
  return e;
}

}  // namespace xmod
