// The dashboard's JSON API handlers. See http_routes.h.
#include "coordinator/api/http_routes.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/proto_json.h"
#include "coordinator/api/pilot_queries.h"
#include "coordinator/api/user_queries.h"
#include "coordinator/fitting/fit_queries.h"
#include "coordinator/store/store_reads.h"
#include "xmod/v1/http_api.pb.h"

namespace xmod {
namespace {

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
      return 404;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

// Appends each comma-separated entry of query parameter `name` to `out` as parsed by `parse`;
// INVALID_ARGUMENT "NAME[i]: WHAT" for one it cannot parse.
template <typename T, typename Field>
absl::Status ParseList(const httplib::Request& request, const char* name, const char* what,
                       bool (*parse)(absl::string_view, T*), Field* out) {
  if (!request.has_param(name)) return absl::OkStatus();
  for (absl::string_view entry :
       absl::StrSplit(request.get_param_value(name), ',', absl::SkipEmpty())) {
    T value{};
    if (!parse(entry, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(name, "[", out->size(), "]: ", what));
    }
    *out->Add() = std::move(value);
  }
  return absl::OkStatus();
}

bool ParseInt(absl::string_view text, int* out) { return absl::SimpleAtoi(text, out); }
bool ParseDouble(absl::string_view text, double* out) { return absl::SimpleAtod(text, out); }

// Query parameters of /api/sweeps/{id}/recommend as a RecommendRequest (sweep id unset):
// flops, seq_len, backbone (required); max_total_params; ks and as as comma-separated lists
// (their caps are RecommendWithLatestFit's, as for Recommend).
absl::StatusOr<xmod::v1::RecommendRequest> ParseRecommend(const httplib::Request& request) {
  xmod::v1::RecommendRequest out;
  for (const char* name : {"flops", "seq_len", "backbone"}) {
    if (!request.has_param(name)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": required query parameter"));
    }
  }
  double flops = 0;
  if (!absl::SimpleAtod(request.get_param_value("flops"), &flops)) {
    return absl::InvalidArgumentError("flops: must be a number (training FLOPs)");
  }
  out.set_flops(flops);
  int seq_len = 0;
  if (!absl::SimpleAtoi(request.get_param_value("seq_len"), &seq_len)) {
    return absl::InvalidArgumentError("seq_len: must be an integer (tokens)");
  }
  out.set_seq_len(seq_len);
  out.set_backbone(request.get_param_value("backbone"));
  if (request.has_param("max_total_params")) {
    double cap = 0;
    if (!absl::SimpleAtod(request.get_param_value("max_total_params"), &cap)) {
      return absl::InvalidArgumentError("max_total_params: must be a number");
    }
    out.set_max_total_params(cap);
  }
  if (absl::Status s = ParseList(request, "ks", "not an integer", ParseInt, out.mutable_ks());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ParseList(request, "as", "not a number", ParseDouble, out.mutable_as());
      !s.ok()) {
    return s;
  }
  return out;
}

bool ParseText(absl::string_view text, std::string* out) {
  *out = std::string(text);
  return true;
}

// An enum value from its name (any case, with the enum's prefix left off: "queued", "xmod",
// "val_loss" for RUN_SORT_VAL_LOSS).
template <typename Enum>
bool ParseEnum(bool (*parse)(const std::string&, Enum*), absl::string_view prefix,
               absl::string_view text, int* out) {
  Enum value{};
  if (!parse(absl::StrCat(prefix, absl::AsciiStrToUpper(text)), &value) || value == Enum{}) {
    return false;
  }
  *out = static_cast<int>(value);
  return true;
}
bool ParseState(absl::string_view text, int* out) {
  return ParseEnum(xmod::v1::RunState_Parse, "", text, out);
}
bool ParseArch(absl::string_view text, int* out) {
  return ParseEnum(xmod::v1::Architecture_Parse, "", text, out);
}

// The integer query parameter `name` into `set`, when present.
template <typename Set>
absl::Status ParseIntParam(const httplib::Request& request, const char* name, Set set) {
  if (!request.has_param(name)) return absl::OkStatus();
  int value = 0;
  if (!absl::SimpleAtoi(request.get_param_value(name), &value)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": must be an integer"));
  }
  set(value);
  return absl::OkStatus();
}

// /api/sweeps/{id}/runs as a ListRunsRequest (docs/architecture.md, "API shape"): state, arch,
// k, a, seq_len, backbone, label as comma-separated lists; name (a substring); sort (a
// RunSortKey without its prefix: id, name, state, arch, k, a, seq_len, backbone, val_loss,
// created) and order=desc; page_size, page_token, limit; group=replicates.
absl::StatusOr<xmod::v1::ListRunsRequest> ParseRuns(const httplib::Request& request) {
  xmod::v1::ListRunsRequest out;
  out.set_sweep_id(PathId(request));
  xmod::v1::RunFilters* f = out.mutable_filters();
  google::protobuf::RepeatedField<int> states, archs;
  for (absl::Status s : {
           ParseList(request, "state", "unknown run state", ParseState, &states),
           ParseList(request, "arch", "unknown architecture", ParseArch, &archs),
           ParseList(request, "k", "not an integer", ParseInt, f->mutable_ks()),
           ParseList(request, "a", "not a number", ParseDouble, f->mutable_as()),
           ParseList(request, "seq_len", "not an integer", ParseInt, f->mutable_seq_lens()),
           ParseList(request, "backbone", "", ParseText, f->mutable_backbones()),
           ParseList(request, "label", "", ParseText, f->mutable_labels()),
           ParseIntParam(request, "page_size", [&](int v) { out.set_page_size(v); }),
           ParseIntParam(request, "limit", [&](int v) { out.set_limit(v); }),
       }) {
    if (!s.ok()) return s;
  }
  for (int s : states) out.add_states(static_cast<xmod::v1::RunState>(s));
  for (int a : archs) f->add_archs(static_cast<xmod::v1::Architecture>(a));
  f->set_name_contains(request.get_param_value("name"));
  out.set_page_token(request.get_param_value("page_token"));
  if (request.has_param("sort")) {
    int sort = 0;
    const std::string key = request.get_param_value("sort");
    if (key != "id" && !ParseEnum(xmod::v1::RunSortKey_Parse, "RUN_SORT_", key, &sort)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sort: unknown sort key \"", key,
                       "\" (id, name, state, arch, k, a, seq_len, backbone, val_loss or created)"));
    }
    out.set_sort(static_cast<xmod::v1::RunSortKey>(sort));
  }
  const std::string order = request.get_param_value("order");
  if (order != "" && order != "asc" && order != "desc") {
    return absl::InvalidArgumentError("order: must be asc or desc");
  }
  out.set_descending(order == "desc");
  const std::string group = request.get_param_value("group");
  if (group != "" && group != "none" && group != "replicates") {
    return absl::InvalidArgumentError("group: must be none or replicates");
  }
  if (group == "replicates") out.set_group(xmod::v1::RUN_GROUPING_REPLICATES);
  return out;
}

// /api/runs/{id}/metrics as a GetMetricsRequest: names as a comma-separated list,
// max_points (0 or absent = the default).
absl::StatusOr<xmod::v1::GetMetricsRequest> ParseMetrics(const httplib::Request& request) {
  xmod::v1::GetMetricsRequest out;
  out.set_run_id(PathId(request));
  if (request.has_param("names")) {
    for (absl::string_view name :
         absl::StrSplit(request.get_param_value("names"), ',', absl::SkipEmpty())) {
      out.add_names(std::string(name));
    }
  }
  if (request.has_param("max_points")) {
    int max_points = 0;
    if (!absl::SimpleAtoi(request.get_param_value("max_points"), &max_points)) {
      return absl::InvalidArgumentError("max_points: must be an integer");
    }
    out.set_max_points(max_points);
  }
  return out;
}

}  // namespace

int64_t PathId(const httplib::Request& request) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(request.matches[1].str(), &id)) return 0;
  return id;
}

void SendJson(const google::protobuf::Message& message, httplib::Response& response) {
  absl::StatusOr<std::string> json = ProtoJson(message, JsonLayout::kLine);
  if (!json.ok()) {
    response.status = 500;
    return;
  }
  response.set_content(*json, "application/json");
}

void SendError(const absl::Status& status, httplib::Response& response) {
  response.status = HttpStatusOf(status.code());
  xmod::v1::HttpError error;
  error.set_error(std::string(status.message()));
  SendJson(error, response);
}

void GetSweeps(const HttpContext& context, const httplib::Request&, httplib::Response& response) {
  SendAnswer(ListSweeps(*context.store, xmod::v1::ListSweepsRequest()), response);
}

void GetSweepRuns(const HttpContext& context, const httplib::Request& request,
                  httplib::Response& response) {
  absl::StatusOr<xmod::v1::ListRunsRequest> runs = ParseRuns(request);
  if (!runs.ok()) {
    SendError(runs.status(), response);
    return;
  }
  SendAnswer(ListRuns(*context.store, *runs, UnknownSweep::kNotFound), response);
}

void GetSweepDecisions(const HttpContext& context, const httplib::Request& request,
                       httplib::Response& response) {
  xmod::v1::ListDecisionsRequest decisions;
  decisions.set_sweep_id(PathId(request));
  SendAnswer(ListDecisions(*context.store, decisions), response);
}

void GetRunMetrics(const HttpContext& context, const httplib::Request& request,
                   httplib::Response& response) {
  absl::StatusOr<xmod::v1::GetMetricsRequest> metrics = ParseMetrics(request);
  if (!metrics.ok()) {
    SendError(metrics.status(), response);
    return;
  }
  SendAnswer(GetMetrics(*context.store, *metrics, kMaxMetricPoints), response);
}

void GetSweepFit(const HttpContext& context, const httplib::Request& request,
                 httplib::Response& response) {
  xmod::v1::GetFitRequest fit;
  fit.set_sweep_id(PathId(request));
  SendAnswer(LatestUsableFit(*context.store, fit), response);
}

void GetSweepRecommendation(const HttpContext& context, const httplib::Request& request,
                            httplib::Response& response) {
  absl::StatusOr<xmod::v1::RecommendRequest> recommend = ParseRecommend(request);
  if (!recommend.ok()) {
    SendError(recommend.status(), response);
    return;
  }
  recommend->set_sweep_id(PathId(request));
  SendAnswer(RecommendWithLatestFit(*context.store, *recommend), response);
}

void GetSweepPilot(const HttpContext& context, const httplib::Request& request,
                   httplib::Response& response) {
  xmod::v1::SelectPilotRequest pilot;
  pilot.set_sweep_id(PathId(request));
  SendAnswer(SelectPilot(*context.store, pilot), response);
}

void GetStudies(const HttpContext& context, const httplib::Request&, httplib::Response& response) {
  SendAnswer(ListStudies(*context.store, xmod::v1::ListStudiesRequest()), response);
}

void GetStudyByName(const HttpContext& context, const httplib::Request& request,
                    httplib::Response& response) {
  xmod::v1::GetStudyRequest study;
  study.set_name(request.matches[1].str());
  SendAnswer(GetStudy(*context.store, study), response);
}

void GetStudyFit(const HttpContext& context, const httplib::Request& request,
                 httplib::Response& response) {
  xmod::v1::GetFitRequest fit;
  fit.set_study(request.matches[1].str());
  SendAnswer(LatestUsableFit(*context.store, fit), response);
}

}  // namespace xmod
