// Autocast scopes: see autocast.h.
#include "model/autocast.h"

#include <ATen/autocast_mode.h>
#include <ATen/cpu/Utils.h>

#include "model/device.h"

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

Bf16Support Bf16SupportOf(torch::Device device) {
  return {device.is_cpu() && CpuHasNativeBf16(), CudaComputeCapabilityMajor(device)};
}

AutocastState AutocastForPrecision(const std::string& precision, torch::Device device,
                                   const Bf16Support& support, int64_t d_model) {
  bool bf16 = precision == "bf16";
  if (precision == "auto") {
    bf16 = device.is_cuda() ? support.cuda_major >= kMinBf16CudaCapability
                            : device.is_cpu() && support.cpu_native && d_model >= kMinBf16AutoWidth;
  }
  return {bf16, torch::kBFloat16};
}

AutocastState AutocastForPrecision(const std::string& precision, torch::Device device,
                                   int64_t d_model) {
  return AutocastForPrecision(precision, device, Bf16SupportOf(device), d_model);
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
