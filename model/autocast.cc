// Autocast scopes: see autocast.h.
#include "model/autocast.h"

#include <ATen/autocast_mode.h>
#include <ATen/cpu/Utils.h>

namespace xmod {
namespace {

void SetAutocast(torch::DeviceType device, const AutocastState& state) {
  at::autocast::set_autocast_enabled(device, state.enabled);
  at::autocast::set_autocast_dtype(device, state.dtype);
}

}  // namespace

AutocastState CurrentAutocast(torch::DeviceType device) {
  return {at::autocast::is_autocast_enabled(device), at::autocast::get_autocast_dtype(device)};
}

bool CpuHasNativeBf16() {
  static const bool has = [] {
    const auto capabilities = at::cpu::get_cpu_capabilities();
    auto flag = [&](const char* name) {
      auto it = capabilities.find(name);
      return it != capabilities.end() && it->second.isBool() && it->second.toBool();
    };
    return flag("avx512_bf16") || flag("amx_bf16");
  }();
  return has;
}

AutocastState AutocastForPrecision(const std::string& precision, torch::Device device,
                                   int64_t d_model) {
  const bool bf16 = precision == "bf16" || (precision == "auto" && device.is_cpu() &&
                                            d_model >= kMinBf16AutoWidth && CpuHasNativeBf16());
  return {bf16, torch::kBFloat16};
}

AutocastGuard::AutocastGuard(torch::DeviceType device, AutocastState state)
    : device_(device), previous_(CurrentAutocast(device)), active_(state.enabled) {
  if (!active_) return;
  at::autocast::increment_nesting();
  SetAutocast(device_, state);
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  SetAutocast(device_, previous_);
  // The cache of casted weights lives until the outermost autocast region ends.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
}

}  // namespace xmod
