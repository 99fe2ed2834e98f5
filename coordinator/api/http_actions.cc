// The dashboard's changes and history. See http_actions.h.
#include "coordinator/api/http_actions.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator/api/http_auth.h"
#include "coordinator/api/user_actions.h"
#include "coordinator/api/user_queries.h"

namespace xmod {
namespace {

// The caller of a change, allowed to make changes (Access::kWrite) and, without a bearer
// token, sending kActionHeader.
absl::StatusOr<Principal> ChangingCaller(const HttpContext& context,
                                         const httplib::Request& request,
                                         const std::string& route) {
  if (!request.has_header("Authorization") && !request.has_header(kActionHeader)) {
    return absl::PermissionDeniedError(
        absl::StrCat(route, ": a change without a bearer token must send the header ",
                     kActionHeader, " (the dashboard does; another site's page cannot)"));
  }
  absl::StatusOr<Principal> caller = ApiCaller(context, request, Access::kWrite, route);
  if (!caller.ok()) return caller.status();
  if (context.actions == nullptr) {
    return absl::UnavailableError(absl::StrCat(route, ": this server makes no changes"));
  }
  return caller;
}

// One of UserActions' changes of the work with id {id}.
template <typename Answer>
using Action = absl::StatusOr<Answer> (UserActions::*)(absl::string_view method,
                                                       const Principal& caller, int64_t id);

// Makes change `act` for the {id} of the path and sends its answer.
template <typename Answer>
void Change(const HttpContext& context, const httplib::Request& request,
            httplib::Response& response, Action<Answer> act) {
  const std::string route = absl::StrCat(request.method, " ", request.path);
  absl::StatusOr<Principal> caller = ChangingCaller(context, request, route);
  if (!caller.ok()) {
    SendError(caller.status(), response);
    return;
  }
  SendAnswer((context.actions->*act)(route, *caller, PathId(request)), response);
}

// The history query's paging parameters (limit, before_id) into `out`; INVALID_ARGUMENT
// naming the one that is not a number. Their caps are ListEvents'.
absl::Status ParsePaging(const httplib::Request& request, xmod::v1::ListEventsRequest* out) {
  if (request.has_param("limit")) {
    int limit = 0;
    if (!absl::SimpleAtoi(request.get_param_value("limit"), &limit)) {
      return absl::InvalidArgumentError("limit: not a number");
    }
    out->set_limit(limit);
  }
  if (request.has_param("before_id")) {
    int64_t before = 0;
    if (!absl::SimpleAtoi(request.get_param_value("before_id"), &before)) {
      return absl::InvalidArgumentError("before_id: not a number");
    }
    out->set_before_id(before);
  }
  return absl::OkStatus();
}

void SendHistory(const HttpContext& context, const httplib::Request& request,
                 xmod::v1::ListEventsRequest query, httplib::Response& response) {
  if (absl::Status s = ParsePaging(request, &query); !s.ok()) {
    SendError(s, response);
    return;
  }
  SendAnswer(ListEvents(*context.store, query), response);
}

}  // namespace

void PostCancelSweep(const HttpContext& context, const httplib::Request& request,
                     httplib::Response& response) {
  Change(context, request, response, &UserActions::CancelSweep);
}

void PostRetrySweep(const HttpContext& context, const httplib::Request& request,
                    httplib::Response& response) {
  Change(context, request, response, &UserActions::RetryFailed);
}

void PostCancelRun(const HttpContext& context, const httplib::Request& request,
                   httplib::Response& response) {
  Change(context, request, response, &UserActions::CancelRun);
}

void PostResumeRun(const HttpContext& context, const httplib::Request& request,
                   httplib::Response& response) {
  Change(context, request, response, &UserActions::ResumeRun);
}

void GetSweepHistory(const HttpContext& context, const httplib::Request& request,
                     httplib::Response& response) {
  xmod::v1::ListEventsRequest query;
  query.set_sweep_id(PathId(request));
  SendHistory(context, request, std::move(query), response);
}

void GetRunHistory(const HttpContext& context, const httplib::Request& request,
                   httplib::Response& response) {
  xmod::v1::ListEventsRequest query;
  query.set_run_id(PathId(request));
  SendHistory(context, request, std::move(query), response);
}

}  // namespace xmod
