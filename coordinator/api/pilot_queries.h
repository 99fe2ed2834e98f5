// The SelectPilot read (paper B.3, Fig. 4): a pilot sweep's runs from the store
// (store/pilot_rows.h) through the selection rule (fitter/pilot_selection.h). One function
// serves the gRPC method and the HTTP route GET /api/sweeps/{id}/pilot, so they cannot
// drift apart. Thread-safe.
#ifndef XMOD_COORDINATOR_API_PILOT_QUERIES_H_
#define XMOD_COORDINATOR_API_PILOT_QUERIES_H_

#include "absl/status/statusor.h"
#include "coordinator/store/store.h"
#include "xmod/v1/pilot.pb.h"

namespace xmod {

// INVALID_ARGUMENT naming sweep_id when it is not positive; NOT_FOUND for an unknown sweep;
// FAILED_PRECONDITION when the sweep is not a pilot (no MoE or no X-MoD runs) or has no
// finished run yet.
absl::StatusOr<xmod::v1::SelectPilotResponse> SelectPilot(
    Store& store, const xmod::v1::SelectPilotRequest& request);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_PILOT_QUERIES_H_
