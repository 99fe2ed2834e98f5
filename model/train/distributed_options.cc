// Validation of the data-parallel flags.
#include "model/train/distributed_options.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace xmod {

TcpRendezvous ParseTcpRendezvous(const std::string& rendezvous) {
  TcpRendezvous result;
  constexpr absl::string_view kScheme = "tcp://";
  if (!absl::StartsWith(rendezvous, kScheme)) return result;
  const std::string rest = rendezvous.substr(kScheme.size());
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) return result;
  uint32_t port = 0;
  if (!absl::SimpleAtoi(rest.substr(colon + 1), &port) || port == 0 || port > 65535) {
    return result;
  }
  result.host = rest.substr(0, colon);
  result.port = static_cast<uint16_t>(port);
  result.ok = true;
  return result;
}

absl::Status ValidateDistributedOptions(const DistributedOptions& options) {
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--world_size: ", options.world_size, " must be >= 1"));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank: ", options.rank, " is not in [0, ", options.world_size, ")"));
  }
  if (options.backend != "gloo" && options.backend != "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend: \"", options.backend, "\" is not \"gloo\" or \"nccl\""));
  }
  if (options.timeout_s < 1) {
    return absl::InvalidArgumentError("--dist_timeout_s: must be >= 1");
  }
  if (options.world_size > 1) {
    if (options.rendezvous.empty()) {
      return absl::InvalidArgumentError(
          "--rendezvous: needed when --world_size > 1 (a FileStore path every rank sees, or "
          "tcp://HOST:PORT)");
    }
    if (absl::StartsWith(options.rendezvous, "tcp://") &&
        !ParseTcpRendezvous(options.rendezvous).ok) {
      return absl::InvalidArgumentError(absl::StrCat("--rendezvous: \"", options.rendezvous,
                                                     "\" is not tcp://HOST:PORT (port 1..65535)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace xmod
