// Autocast scopes: see autocast.h.
#include "model/autocast.h"

#include <ATen/autocast_mode.h>

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
