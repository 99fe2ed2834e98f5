// ListRuns' pages, filters and replicate groups. See run_listing.h.
#include "coordinator/api/run_listing.h"

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/field_path.h"
#include "common/proto_bytes.h"
#include "coordinator/spec/request_limits.h"
#include "coordinator/store/run_pages.h"

namespace xmod {
namespace {

using xmod::v1::ListRunsRequest;
using xmod::v1::ListRunsResponse;
using xmod::v1::RunPageToken;

// FNV-1a, 64 bits: the same across processes and restarts, so a token outlives both.
uint64_t Fnv1a(absl::string_view bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// The query a token belongs to: the request without its page fields.
uint64_t QueryFingerprint(ListRunsRequest request) {
  request.clear_page_token();
  request.clear_page_size();
  request.clear_limit();
  return Fnv1a(DeterministicBytes(request));
}

bool SortIsText(xmod::v1::RunSortKey key) {
  return key == xmod::v1::RUN_SORT_NAME || key == xmod::v1::RUN_SORT_STATE ||
         key == xmod::v1::RUN_SORT_ARCH || key == xmod::v1::RUN_SORT_BACKBONE;
}

absl::StatusOr<RunPageToken> DecodeToken(const ListRunsRequest& request) {
  std::string bytes;
  RunPageToken token;
  if (!absl::WebSafeBase64Unescape(request.page_token(), &bytes) || !token.ParseFromString(bytes) ||
      token.text() != SortIsText(request.sort()) ||
      (!token.text() && !std::isfinite(token.number_value()))) {
    return InvalidField("page_token",
                        "malformed: pass the next_page_token of the page before, unchanged");
  }
  if (token.query_fingerprint() != QueryFingerprint(request)) {
    return InvalidField("page_token",
                        "from another query: sweep_id, states, filters, sort, descending and "
                        "group must be those of the first page");
  }
  return token;
}

std::string EncodeToken(const ListRunsRequest& request, const RunSortValue& key, int64_t id) {
  RunPageToken token;
  token.set_query_fingerprint(QueryFingerprint(request));
  token.set_text(key.text);
  if (key.text) {
    token.set_text_value(key.text_value);
  } else {
    token.set_number_value(key.number_value);
  }
  token.set_run_id(id);
  return absl::WebSafeBase64Escape(DeterministicBytes(token));
}

template <typename Repeated>
absl::Status CheckTexts(const std::string& path, const Repeated& values) {
  if (absl::Status s = CheckRange(path, values.size(), 0, kMaxRunFilterValues); !s.ok()) return s;
  for (int i = 0; i < values.size(); ++i) {
    absl::Status s =
        CheckRange(absl::StrCat(path, "[", i, "]"), values[i].size(), 0, kMaxRunFilterText);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckFilters(const xmod::v1::RunFilters& f) {
  for (const auto& [path, size] :
       std::vector<std::pair<std::string, int>>{{"filters.archs", f.archs_size()},
                                                {"filters.ks", f.ks_size()},
                                                {"filters.as", f.as_size()},
                                                {"filters.seq_lens", f.seq_lens_size()}}) {
    if (absl::Status s = CheckRange(path, size, 0, kMaxRunFilterValues); !s.ok()) return s;
  }
  for (int i = 0; i < f.archs_size(); ++i) {
    if (!xmod::v1::Architecture_IsValid(f.archs(i))) {
      return InvalidField(absl::StrCat("filters.archs[", i, "]"),
                          absl::StrCat("unknown architecture ", f.archs(i)));
    }
  }
  if (absl::Status s = CheckTexts("filters.backbones", f.backbones()); !s.ok()) return s;
  if (absl::Status s = CheckTexts("filters.labels", f.labels()); !s.ok()) return s;
  return CheckRange("filters.name_contains", f.name_contains().size(), 0, kMaxRunFilterText);
}

// The entries a page holds: page_size or limit, the smaller of those set; 0 = all.
int PageSize(const ListRunsRequest& request) {
  if (request.page_size() > 0 && request.limit() > 0) {
    return std::min(request.page_size(), request.limit());
  }
  return request.page_size() > 0 ? request.page_size() : request.limit();
}

RunPageQuery QueryOf(const ListRunsRequest& request) {
  RunPageQuery query;
  query.sweep_id = request.sweep_id();
  for (int s : request.states()) query.states.push_back(static_cast<xmod::v1::RunState>(s));
  query.filters = request.filters();
  query.sort = request.sort();
  query.descending = request.descending();
  return query;
}

// The token's cursor, when the request has one (CheckListRuns has accepted it).
std::optional<std::pair<RunSortValue, int64_t>> CursorOf(const ListRunsRequest& request) {
  if (request.page_token().empty()) return std::nullopt;
  absl::StatusOr<RunPageToken> token = DecodeToken(request);
  if (!token.ok()) return std::nullopt;
  return std::make_pair(RunSortValue{token->text(), token->text_value(), token->number_value()},
                        token->run_id());
}

// A replicate's configuration: its sweep, label and RunSpec without the seed and the
// per-run fields (run id, attempt, checkpoint directory).
std::string ConfigurationOf(const xmod::v1::Run& run) {
  xmod::v1::RunSpec spec = run.spec();
  spec.mutable_training()->clear_seed();
  spec.clear_run_id();
  spec.clear_attempt();
  spec.clear_checkpoint_dir();
  return absl::StrCat(run.sweep_id(), "/", run.label(), "/", DeterministicBytes(spec));
}

// The run's name without its "-s<seed>" replicate suffix.
std::string ConfigurationName(const xmod::v1::Run& run) {
  const std::string suffix = absl::StrCat("-s", run.spec().training().seed());
  absl::string_view name = run.name();
  if (absl::EndsWith(name, suffix)) name.remove_suffix(suffix.size());
  return std::string(name);
}

void SetStat(const std::vector<double>& values, xmod::v1::ReplicateStat* stat) {
  stat->set_n(static_cast<int>(values.size()));
  if (values.empty()) return;
  double sum = 0;
  for (double v : values) sum += v;
  const double mean = sum / values.size();
  double squares = 0;
  for (double v : values) squares += (v - mean) * (v - mean);
  stat->set_mean(mean);
  stat->set_sd(values.size() > 1 ? std::sqrt(squares / (values.size() - 1)) : 0);
}

struct Group {
  xmod::v1::RunGroup message;
  RunSortValue first_key;
  std::vector<double> val_losses, live_deltas;
};

// The runs' groups in the order of their first runs (runs come in the listing's order).
std::vector<Group> GroupReplicates(std::vector<SortedRun> runs) {
  std::vector<Group> groups;
  std::map<std::string, size_t> index;  // configuration -> groups[i]
  for (SortedRun& sorted : runs) {
    const xmod::v1::Run& run = sorted.run;
    const std::string configuration = ConfigurationOf(run);
    auto [it, added] = index.emplace(configuration, groups.size());
    if (added) {
      Group group;
      group.message.set_key(absl::StrCat(run.sweep_id(), "-", absl::Hex(Fnv1a(configuration))));
      group.message.set_name(ConfigurationName(run));
      *group.message.mutable_first() = run;
      group.first_key = sorted.key;
      groups.push_back(std::move(group));
    }
    Group& group = groups[it->second];
    group.message.add_run_ids(run.id());
    ++(*group.message.mutable_run_counts())[xmod::v1::RunState_Name(run.state())];
    if (run.progress().val_loss() > 0) group.val_losses.push_back(run.progress().val_loss());
    if (run.progress().has_live_delta()) group.live_deltas.push_back(run.progress().live_delta());
  }
  for (Group& group : groups) {
    SetStat(group.val_losses, group.message.mutable_val_loss());
    SetStat(group.live_deltas, group.message.mutable_live_delta());
  }
  return groups;
}

// A page of groups: every run of the query is read (a configuration's replicates may sort
// anywhere), grouped, and the groups after the cursor paged by their first run.
absl::StatusOr<ListRunsResponse> LoadGroupPage(Db& db, const ListRunsRequest& request) {
  absl::StatusOr<std::vector<SortedRun>> runs = LoadRunPage(db, QueryOf(request));
  if (!runs.ok()) return runs.status();
  std::vector<Group> groups = GroupReplicates(*std::move(runs));
  const auto cursor = CursorOf(request);
  const int page_size = PageSize(request);
  const bool descending = request.descending();
  ListRunsResponse out;
  out.set_total_size(static_cast<int>(groups.size()));
  const Group* last = nullptr;  // the page's last group
  for (const Group& group : groups) {
    const int64_t id = group.message.first().id();
    if (cursor && (descending ? !SortsBefore(group.first_key, id, cursor->first, cursor->second)
                              : !SortsBefore(cursor->first, cursor->second, group.first_key, id))) {
      continue;
    }
    if (page_size > 0 && out.groups_size() == page_size) {
      out.set_next_page_token(EncodeToken(request, last->first_key, last->message.first().id()));
      break;
    }
    *out.add_groups() = group.message;
    last = &group;
  }
  return out;
}

absl::StatusOr<ListRunsResponse> LoadRunsPage(Db& db, const ListRunsRequest& request) {
  RunPageQuery query = QueryOf(request);
  absl::StatusOr<int64_t> total = CountRunPage(db, query);
  if (!total.ok()) return total.status();
  query.after = CursorOf(request);
  const int page_size = PageSize(request);
  // One run more than the page: whether a next page exists.
  query.limit = page_size > 0 ? page_size + 1 : 0;
  absl::StatusOr<std::vector<SortedRun>> runs = LoadRunPage(db, query);
  if (!runs.ok()) return runs.status();
  ListRunsResponse out;
  out.set_total_size(static_cast<int>(*total));
  if (page_size > 0 && static_cast<int>(runs->size()) > page_size) {
    const SortedRun& last = (*runs)[page_size - 1];
    out.set_next_page_token(EncodeToken(request, last.key, last.run.id()));
    runs->resize(page_size);
  }
  for (SortedRun& sorted : *runs) *out.add_runs() = std::move(sorted.run);
  return out;
}

}  // namespace

absl::Status CheckListRuns(const ListRunsRequest& request) {
  if (absl::Status s = CheckLimits(request); !s.ok()) return s;
  if (absl::Status s = CheckRange("page_size", request.page_size(), 0, kMaxRunPageSize); !s.ok()) {
    return s;
  }
  if (!xmod::v1::RunSortKey_IsValid(request.sort())) {
    return InvalidField("sort", absl::StrCat("unknown sort key ", request.sort()));
  }
  if (!xmod::v1::RunGrouping_IsValid(request.group())) {
    return InvalidField("group", absl::StrCat("unknown grouping ", request.group()));
  }
  if (absl::Status s = CheckFilters(request.filters()); !s.ok()) return s;
  if (request.page_token().empty()) return absl::OkStatus();
  if (request.page_token().size() > kMaxPageTokenBytes) {
    return InvalidField("page_token",
                        "malformed: pass the next_page_token of the page before, unchanged");
  }
  return DecodeToken(request).status();
}

absl::StatusOr<ListRunsResponse> LoadListRunsPage(Db& db, const ListRunsRequest& request) {
  return request.group() == xmod::v1::RUN_GROUPING_REPLICATES ? LoadGroupPage(db, request)
                                                              : LoadRunsPage(db, request);
}

}  // namespace xmod
