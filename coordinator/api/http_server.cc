// See http_server.h.
#include "coordinator/api/http_server.h"

#include <httplib.h>

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/auth.h"
#include "common/proto_json.h"
#include "coordinator/fitting/fit_queries.h"
#include "coordinator/fitting/studies.h"
#include "coordinator/spec/request_limits.h"
#include "coordinator/store/design_store.h"
#include "coordinator/store/store_reads.h"
#include "glog/logging.h"

namespace xmod {
namespace {

constexpr size_t kMaxRequestBodyBytes = 64 << 10;

// The API's one JSON shape (common/proto_json.h): the same document xmodctl -o json prints.
void SendJson(const google::protobuf::Message& message, httplib::Response& res) {
  absl::StatusOr<std::string> json = ProtoJson(message, JsonLayout::kLine);
  if (!json.ok()) {
    res.status = 500;
    return;
  }
  res.set_content(*json, "application/json");
}

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void SendError(const absl::Status& status, httplib::Response& res) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
      res.status = 404;
      break;
    case absl::StatusCode::kInvalidArgument:
      res.status = 400;
      break;
    case absl::StatusCode::kUnauthenticated:
      res.status = 401;
      break;
    case absl::StatusCode::kPermissionDenied:
      res.status = 403;
      break;
    case absl::StatusCode::kResourceExhausted:
      res.status = 429;
      break;
    default:
      res.status = 500;
  }
  res.set_content(absl::StrCat("{\"error\":", JsonString(status.message()), "}"),
                  "application/json");
}

int64_t IdOf(const httplib::Request& req) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(req.matches[1].str(), &id)) return 0;
  return id;
}

// Query parameters of /api/sweeps/{id}/recommend as a RecommendRequest (sweep id unset):
// flops, seq_len, backbone (required); max_total_params; ks and as as comma-separated lists
// (their caps are RecommendWithLatestFit's, as for Recommend).
absl::StatusOr<xmod::v1::RecommendRequest> ParseRecommend(const httplib::Request& req) {
  xmod::v1::RecommendRequest out;
  for (const char* name : {"flops", "seq_len", "backbone"}) {
    if (!req.has_param(name)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": required query parameter"));
    }
  }
  double flops = 0;
  if (!absl::SimpleAtod(req.get_param_value("flops"), &flops)) {
    return absl::InvalidArgumentError("flops: must be a number (training FLOPs)");
  }
  out.set_flops(flops);
  int seq_len = 0;
  if (!absl::SimpleAtoi(req.get_param_value("seq_len"), &seq_len)) {
    return absl::InvalidArgumentError("seq_len: must be an integer (tokens)");
  }
  out.set_seq_len(seq_len);
  out.set_backbone(req.get_param_value("backbone"));
  if (req.has_param("max_total_params")) {
    double cap = 0;
    if (!absl::SimpleAtod(req.get_param_value("max_total_params"), &cap)) {
      return absl::InvalidArgumentError("max_total_params: must be a number");
    }
    out.set_max_total_params(cap);
  }
  if (req.has_param("ks")) {
    for (absl::string_view k : absl::StrSplit(req.get_param_value("ks"), ',', absl::SkipEmpty())) {
      int value = 0;
      if (!absl::SimpleAtoi(k, &value)) {
        return absl::InvalidArgumentError(absl::StrCat("ks[", out.ks_size(), "]: not an integer"));
      }
      out.add_ks(value);
    }
  }
  if (req.has_param("as")) {
    for (absl::string_view a : absl::StrSplit(req.get_param_value("as"), ',', absl::SkipEmpty())) {
      double value = 0;
      if (!absl::SimpleAtod(a, &value)) {
        return absl::InvalidArgumentError(absl::StrCat("as[", out.as_size(), "]: not a number"));
      }
      out.add_as(value);
    }
  }
  return out;
}

// /api/runs/{id}/metrics as a GetMetricsRequest, within its caps (request_limits.h, as
// GetMetrics): names as a comma-separated list, max_points (0 or absent = the default).
absl::StatusOr<xmod::v1::GetMetricsRequest> ParseMetrics(const httplib::Request& req) {
  xmod::v1::GetMetricsRequest out;
  out.set_run_id(IdOf(req));
  if (req.has_param("names")) {
    for (absl::string_view name :
         absl::StrSplit(req.get_param_value("names"), ',', absl::SkipEmpty())) {
      out.add_names(std::string(name));
    }
  }
  if (req.has_param("max_points")) {
    int max_points = 0;
    if (!absl::SimpleAtoi(req.get_param_value("max_points"), &max_points)) {
      return absl::InvalidArgumentError("max_points: must be an integer");
    }
    out.set_max_points(max_points);
  }
  if (absl::Status s = CheckLimits(out, kMaxMetricPoints); !s.ok()) return s;
  return out;
}

}  // namespace

HttpServer::HttpServer(const HttpServerOptions& options)
    : sessions_(options.sessions, options.clock) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(Store* store,
                                                              const HttpServerOptions& options) {
  HttpListenerOptions listen;
  listen.listen = options.listen;
  listen.tls_cert_file = options.tls_cert_file;
  listen.tls_key_file = options.tls_key_file;
  absl::StatusOr<std::unique_ptr<HttpListener>> listener = HttpListener::Bind(listen);
  if (!listener.ok()) return listener.status();
  std::unique_ptr<HttpServer> server(new HttpServer(options));
  server->listener_ = *std::move(listener);
  server->server_ = &server->listener_->server();
  server->server_->set_payload_max_length(kMaxRequestBodyBytes);  // only logins post bodies
  server->Route(store, options);
  server->listener_->Serve();
  return server;
}

void HttpServer::Route(Store* store, const HttpServerOptions& options) {
  std::shared_ptr<const CredentialSet> credentials = options.credentials;
  HttpSessions* sessions = &sessions_;
  const bool secure = !options.tls_cert_file.empty();
  // The caller of a request: a bearer token, else the session cookie.
  const auto caller = [credentials, sessions](const httplib::Request& req,
                                              const char* route) -> absl::StatusOr<Principal> {
    if (req.has_header("Authorization")) {
      return Authorize(*credentials, req.get_header_value("Authorization"), Access::kRead, route);
    }
    if (credentials->empty()) return *credentials->Authenticate("");
    std::optional<std::string> id = CookieValue(req.get_header_value("Cookie"), kSessionCookie);
    std::optional<Principal> principal;
    if (id.has_value()) principal = sessions->Find(*id);
    if (!principal.has_value()) {
      return absl::UnauthenticatedError("log in first (POST /api/login) or send a bearer token");
    }
    return *principal;
  };
  server_->set_pre_routing_handler([caller](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/api/", 0) != 0 || req.path == "/api/login" || req.path == "/api/session" ||
        req.path == "/api/logout") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    absl::StatusOr<Principal> principal = caller(req, "GET /api/");
    if (principal.ok()) return httplib::Server::HandlerResponse::Unhandled;
    SendError(principal.status(), res);
    return httplib::Server::HandlerResponse::Handled;
  });

  server_->Post("/api/login", [credentials, sessions, secure](const httplib::Request& req,
                                                              httplib::Response& res) {
    const std::string token(absl::StripAsciiWhitespace(req.body));
    absl::StatusOr<Principal> principal =
        Authorize(*credentials, absl::StrCat("Bearer ", token), Access::kRead, "login");
    if (!principal.ok()) {
      SendError(principal.status(), res);
      return;
    }
    absl::StatusOr<std::string> id = sessions->Create(*principal);
    if (!id.ok()) {
      SendError(id.status(), res);
      return;
    }
    res.set_header("Set-Cookie",
                   absl::StrCat(kSessionCookie, "=", *id, "; Path=/; HttpOnly; SameSite=Strict",
                                secure ? "; Secure" : ""));
    res.set_content(absl::StrCat("{\"name\":", JsonString(principal->name), ",\"scope\":\"",
                                 ScopeName(principal->scope), "\"}"),
                    "application/json");
  });
  server_->Post("/api/logout", [sessions](const httplib::Request& req, httplib::Response& res) {
    std::optional<std::string> id = CookieValue(req.get_header_value("Cookie"), kSessionCookie);
    if (id.has_value()) sessions->Remove(*id);
    res.set_header("Set-Cookie",
                   absl::StrCat(kSessionCookie, "=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"));
    res.set_content("{}", "application/json");
  });
  server_->Get(
      "/api/session", [caller, credentials](const httplib::Request& req, httplib::Response& res) {
        absl::StatusOr<Principal> principal = caller(req, "GET /api/session");
        res.set_content(
            absl::StrCat("{\"authenticated\":", principal.ok() ? "true" : "false",
                         ",\"required\":", credentials->empty() ? "false" : "true",
                         ",\"name\":", JsonString(principal.ok() ? principal->name : ""),
                         ",\"scope\":\"", principal.ok() ? ScopeName(principal->scope) : "", "\"}"),
            "application/json");
      });

  server_->Get("/api/sweeps", [store](const httplib::Request&, httplib::Response& res) {
    xmod::v1::ListSweepsResponse out;
    absl::Status s = store->Read([&](Db& db) {
      absl::StatusOr<std::vector<xmod::v1::Sweep>> sweeps = LoadSweeps(db, 0);
      if (!sweeps.ok()) return sweeps.status();
      for (auto& sweep : *sweeps) *out.add_sweeps() = std::move(sweep);
      return absl::OkStatus();
    });
    s.ok() ? SendJson(out, res) : SendError(s, res);
  });

  server_->Get(R"(/api/sweeps/(\d+)/runs)",
               [store](const httplib::Request& req, httplib::Response& res) {
                 RunFilter filter;
                 filter.sweep_id = IdOf(req);
                 xmod::v1::ListRunsResponse out;
                 absl::Status s = store->Read([&](Db& db) {
                   if (absl::Status e = LoadSweep(db, filter.sweep_id).status(); !e.ok()) {
                     return e;
                   }
                   absl::StatusOr<std::vector<xmod::v1::Run>> runs = LoadRuns(db, filter);
                   if (!runs.ok()) return runs.status();
                   for (auto& r : *runs) *out.add_runs() = std::move(r);
                   return absl::OkStatus();
                 });
                 s.ok() ? SendJson(out, res) : SendError(s, res);
               });

  server_->Get(
      R"(/api/runs/(\d+)/metrics)", [store](const httplib::Request& req, httplib::Response& res) {
        absl::StatusOr<xmod::v1::GetMetricsRequest> request = ParseMetrics(req);
        if (!request.ok()) {
          SendError(request.status(), res);
          return;
        }
        xmod::v1::GetMetricsResponse out;
        absl::Status s = store->Read([&](Db& db) { return LoadRunMetrics(db, *request, &out); });
        s.ok() ? SendJson(out, res) : SendError(s, res);
      });

  server_->Get(R"(/api/sweeps/(\d+)/decisions)",
               [store](const httplib::Request& req, httplib::Response& res) {
                 const int64_t sweep_id = IdOf(req);
                 xmod::v1::ListDecisionsResponse out;
                 absl::Status s = store->Read([&](Db& db) {
                   if (absl::Status e = LoadSweep(db, sweep_id).status(); !e.ok()) return e;
                   absl::StatusOr<std::vector<xmod::v1::DesignDecision>> decisions =
                       LoadDecisions(db, sweep_id, 100);
                   if (!decisions.ok()) return decisions.status();
                   for (auto& d : *decisions) *out.add_decisions() = std::move(d);
                   return absl::OkStatus();
                 });
                 s.ok() ? SendJson(out, res) : SendError(s, res);
               });

  server_->Get(R"(/api/sweeps/(\d+)/fit)",
               [store](const httplib::Request& req, httplib::Response& res) {
                 absl::StatusOr<xmod::v1::Fit> fit = LatestUsableFit(*store, IdOf(req));
                 fit.ok() ? SendJson(*fit, res) : SendError(fit.status(), res);
               });

  server_->Get(R"(/api/sweeps/(\d+)/recommend)", [store](const httplib::Request& req,
                                                         httplib::Response& res) {
    absl::StatusOr<xmod::v1::RecommendRequest> request = ParseRecommend(req);
    if (!request.ok()) {
      SendError(request.status(), res);
      return;
    }
    request->set_sweep_id(IdOf(req));
    absl::StatusOr<xmod::v1::RecommendResponse> out = RecommendWithLatestFit(*store, *request);
    out.ok() ? SendJson(*out, res) : SendError(out.status(), res);
  });

  // Studies (studies.h): one fit over several sweeps.
  server_->Get("/api/studies", [store](const httplib::Request&, httplib::Response& res) {
    xmod::v1::ListStudiesResponse out;
    absl::Status s = store->Read([&](Db& db) {
      absl::StatusOr<std::vector<xmod::v1::Study>> studies = LoadStudies(db);
      if (!studies.ok()) return studies.status();
      for (auto& study : *studies) *out.add_studies() = std::move(study);
      return absl::OkStatus();
    });
    s.ok() ? SendJson(out, res) : SendError(s, res);
  });

  server_->Get(R"(/api/studies/([A-Za-z0-9_.-]+))",
               [store](const httplib::Request& req, httplib::Response& res) {
                 xmod::v1::Study out;
                 absl::Status s = store->Read([&](Db& db) {
                   absl::StatusOr<xmod::v1::Study> study = LoadStudy(db, req.matches[1].str());
                   if (!study.ok()) return study.status();
                   out = *std::move(study);
                   return absl::OkStatus();
                 });
                 s.ok() ? SendJson(out, res) : SendError(s, res);
               });

  server_->Get(R"(/api/studies/([A-Za-z0-9_.-]+)/fit)",
               [store](const httplib::Request& req, httplib::Response& res) {
                 xmod::v1::GetFitRequest request;
                 request.set_study(req.matches[1].str());
                 absl::StatusOr<xmod::v1::Fit> fit = LatestUsableFit(*store, request);
                 fit.ok() ? SendJson(*fit, res) : SendError(fit.status(), res);
               });

  if (!options.dashboard_dir.empty() && std::filesystem::is_directory(options.dashboard_dir)) {
    server_->set_mount_point("/", options.dashboard_dir);
  } else if (!options.dashboard_dir.empty()) {
    LOG(WARNING) << "dashboard directory " << options.dashboard_dir
                 << " does not exist; serving the JSON API only";
  }
}

void HttpServer::Stop() { listener_->Stop(); }

HttpServer::~HttpServer() { Stop(); }

}  // namespace xmod
