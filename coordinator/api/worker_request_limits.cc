// See worker_request_limits.h.
#include "coordinator/api/worker_request_limits.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

absl::Status CheckBytes(absl::string_view field, const std::string& value, size_t limit) {
  if (value.size() <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", value.size(), " bytes, at most ", limit));
}

absl::Status CheckCount(absl::string_view field, int count, int limit) {
  if (count <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", count, " entries, at most ", limit));
}

bool IsSha256Hex(const std::string& digest) {
  if (digest.size() != 64) return false;
  for (char c : digest) {
    if (!absl::ascii_isdigit(c) && (c < 'a' || c > 'f')) return false;
  }
  return true;
}

}  // namespace

absl::Status CheckLimits(const xmod::v1::RegisterRequest& request) {
  absl::Status status = CheckBytes("worker_name", request.worker_name(), kMaxWorkerNameBytes);
  status.Update(CheckBytes("hostname", request.hostname(), kMaxHostBytes));
  status.Update(CheckBytes("version", request.version(), kMaxVersionBytes));
  status.Update(CheckBytes("advertise_host", request.advertise_host(), kMaxHostBytes));
  status.Update(CheckCount("slots", request.slots_size(), kMaxSlots));
  for (int i = 0; i < request.slots_size() && status.ok(); ++i) {
    status = CheckBytes(absl::StrCat("slots[", i, "].description"), request.slots(i).description(),
                        kMaxSlotDescriptionBytes);
  }
  return status;
}

absl::Status CheckLimits(const xmod::v1::HeartbeatRequest& request) {
  return CheckCount("running", request.running_size(), kMaxSlots);
}

absl::Status CheckLimits(const xmod::v1::AcquireRunRequest& request) {
  return CheckCount("free_slots", request.free_slots_size(), kMaxSlots);
}

absl::Status CheckLimits(const xmod::v1::ReportMetricsRequest& request) {
  absl::Status status = CheckCount("points", request.points_size(), kMaxMetricPoints);
  for (int i = 0; i < request.points_size() && status.ok(); ++i) {
    status = CheckBytes(absl::StrCat("points[", i, "].name"), request.points(i).name(),
                        kMaxMetricNameBytes);
  }
  return status;
}

absl::Status CheckLimits(const xmod::v1::ReportCheckpointRequest& request) {
  absl::Status status = CheckBytes("path", request.path(), kMaxPathBytes);
  status.Update(CheckBytes("rejected", request.rejected(), kMaxReasonBytes));
  if (!status.ok()) return status;
  const bool refusal = !request.rejected().empty();
  if (!IsSha256Hex(request.sha256()) && !(refusal && request.sha256().empty())) {
    return absl::InvalidArgumentError(absl::StrCat("sha256: must be 64 lower-case hex digits, got ",
                                                   request.sha256().size(), " bytes"));
  }
  if (!refusal && request.bytes() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("bytes: must be >= 1, got ", request.bytes()));
  }
  return absl::OkStatus();
}

xmod::v1::FinishRunRequest WithinLimits(xmod::v1::FinishRunRequest request) {
  const std::string& error = request.error();
  if (error.size() <= kMaxErrorBytes) return request;
  size_t start = error.size() - kMaxErrorBytes;
  while (start < error.size() && (static_cast<unsigned char>(error[start]) & 0xC0) == 0x80) {
    ++start;  // not inside a UTF-8 character
  }
  request.set_error(absl::StrCat("(cut) ", absl::string_view(error).substr(start)));
  return request;
}

}  // namespace xmod
