// Who produced a failed call's status. The coordinator attaches kStatusOriginKey to every
// error it returns itself, so that a client can tell "the coordinator answered UNAVAILABLE"
// (its database cannot be written for now; the message says why) from "the coordinator could
// not be reached" (gRPC's own UNAVAILABLE, which carries no such metadata). The Python client
// reads the same key (clients/python/src/xmod/errors.py).
#ifndef XMOD_COMMON_STATUS_ORIGIN_H_
#define XMOD_COMMON_STATUS_ORIGIN_H_

namespace xmod {

inline constexpr char kStatusOriginKey[] = "xmod-status-origin";
inline constexpr char kStatusOriginCoordinator[] = "coordinator";

}  // namespace xmod

#endif  // XMOD_COMMON_STATUS_ORIGIN_H_
