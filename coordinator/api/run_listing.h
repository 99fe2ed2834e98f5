// ListRuns at scale (run_pages.proto): checks a listing request's filters, sort, page size and
// page token; answers one keyset page of runs or of replicate groups (one entry a
// configuration: a sweep's runs whose RunSpec differs only in training.seed, with mean, sd and
// n of their val loss and live Δ) and the token of the next page. Page tokens are opaque:
// base64url of a RunPageToken naming the query they belong to (a fingerprint of the request
// without its page fields) and the last entry's (sort key, run id). The gRPC method and the
// HTTP route answer through user_queries.h's ListRuns, which calls this. Thread-safe.
#ifndef XMOD_COORDINATOR_API_RUN_LISTING_H_
#define XMOD_COORDINATOR_API_RUN_LISTING_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod {

// Entries one page may hold (ListRunsRequest.page_size).
inline constexpr int kMaxRunPageSize = 1000;
// Entries of each repeated filter (archs, ks, as, seq_lens, backbones, labels).
inline constexpr int kMaxRunFilterValues = 100;
// Bytes of filters.name_contains and of each filters.backbones / filters.labels entry.
inline constexpr int kMaxRunFilterText = 256;
// Bytes of a page token (ours are well under 100).
inline constexpr int kMaxPageTokenBytes = 1024;

// INVALID_ARGUMENT naming the field (limit, states, page_size, sort, group, filters.*,
// page_token) of a request past its caps or with a malformed token or one from another query.
absl::Status CheckListRuns(const xmod::v1::ListRunsRequest& request);

// One page of the request's listing, read from `db` (a consistent snapshot); the request
// must have passed CheckListRuns.
absl::StatusOr<xmod::v1::ListRunsResponse> LoadListRunsPage(
    Db& db, const xmod::v1::ListRunsRequest& request);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_RUN_LISTING_H_
