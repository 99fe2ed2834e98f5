// Studies: validation and storage. See studies.h.
#include "coordinator/fitting/studies.h"

#include <functional>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/store/store_reads.h"

namespace xmod {
namespace {

constexpr size_t kMaxNameBytes = 128;
constexpr size_t kMaxDescriptionBytes = 4096;
constexpr int kMaxMembers = 64;

absl::Status CheckName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("name: a study needs a name");
  if (name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("name: at most ", kMaxNameBytes, " bytes"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.') {
      return absl::InvalidArgumentError(
          absl::StrCat("name: '", name, "' may hold only letters, digits, '_', '-' and '.'"));
    }
  }
  return absl::OkStatus();
}

bool IsRole(absl::string_view role) {
  if (role == kDesignRole) return true;
  std::optional<fitter::SweepRole> r = fitter::SweepRoleOfLabel(role);
  return r.has_value() && role == fitter::SweepRoleName(*r);
}

// The id of the one sweep named `name`: NOT_FOUND for none, INVALID_ARGUMENT for several.
absl::StatusOr<int64_t> SweepByName(Db& db, const std::string& field, const std::string& name) {
  absl::StatusOr<Stmt> stmt = db.Prepare("SELECT id FROM sweeps WHERE name = ? ORDER BY id");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, name);
  std::vector<int64_t> ids;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    ids.push_back(stmt->Int(0));
  }
  if (ids.empty()) {
    return absl::NotFoundError(absl::StrCat(field, ": no sweep is named '", name, "'"));
  }
  if (ids.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", ids.size(), " sweeps are named '",
                                                   name, "' (ids ", absl::StrJoin(ids, ", "),
                                                   "); give sweep_id"));
  }
  return ids.front();
}

// A "design" member needs grid labels that name B.4 sweeps, or none of its runs has a role.
bool LabelsNameRoles(const xmod::v1::SweepSpec& spec) {
  for (const xmod::v1::GridSpec& grid : spec.grids()) {
    if (fitter::SweepRoleOfLabel(grid.label()).has_value()) return true;
  }
  return false;
}

// Resolves and checks members[i] in place.
absl::Status ResolveMember(Db& db, int i, xmod::v1::StudyMember* member) {
  const std::string field = absl::StrCat("members[", i, "]");
  if (!IsRole(member->role())) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".role: '", member->role(), "' is not one of kxl, nact, axk, design"));
  }
  if (member->sweep_id() == 0 && member->sweep_name().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": give sweep_id or sweep_name"));
  }
  if (member->sweep_id() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".sweep_id: must be > 0"));
  }
  if (member->sweep_id() == 0) {
    absl::StatusOr<int64_t> id = SweepByName(db, field + ".sweep_name", member->sweep_name());
    if (!id.ok()) return id.status();
    member->set_sweep_id(*id);
  }
  absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, member->sweep_id());
  if (absl::IsNotFound(sweep.status())) {
    return absl::NotFoundError(
        absl::StrCat(field, ".sweep_id: sweep ", member->sweep_id(), " not found"));
  }
  if (!sweep.ok()) return sweep.status();
  if (!member->sweep_name().empty() && member->sweep_name() != sweep->spec().name()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".sweep_name: sweep ", member->sweep_id(),
                                                   " is named '", sweep->spec().name(), "', not '",
                                                   member->sweep_name(), "'"));
  }
  member->set_sweep_name(sweep->spec().name());
  if (member->role() == kDesignRole && !LabelsNameRoles(sweep->spec())) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".role: sweep ", member->sweep_id(),
        " has no grid labelled kxl, nact or axk for role 'design'; give the sweep's role"));
  }
  return absl::OkStatus();
}

absl::StatusOr<xmod::v1::Study> StudyFromRow(Stmt& stmt) {
  xmod::v1::Study study;
  study.set_id(stmt.Int(0));
  if (!study.mutable_spec()->ParseFromString(stmt.Text(1))) {
    return absl::InternalError(absl::StrCat("study ", study.id(), ": stored spec is unreadable"));
  }
  study.set_created_unix_ms(stmt.Int(2));
  return study;
}

absl::StatusOr<std::vector<xmod::v1::Study>> SelectStudies(Db& db, absl::string_view where,
                                                           const std::function<void(Stmt&)>& bind) {
  absl::StatusOr<Stmt> stmt =
      db.Prepare(absl::StrCat("SELECT id, spec, created_ms FROM studies ", where));
  if (!stmt.ok()) return stmt.status();
  bind(*stmt);
  std::vector<xmod::v1::Study> out;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    absl::StatusOr<xmod::v1::Study> study = StudyFromRow(*stmt);
    if (!study.ok()) return study.status();
    out.push_back(*std::move(study));
  }
  return out;
}

}  // namespace

std::optional<fitter::SweepRole> MemberRole(absl::string_view role) {
  if (role == kDesignRole) return std::nullopt;
  return fitter::SweepRoleOfLabel(role);
}

absl::StatusOr<xmod::v1::Study> InsertStudy(Db& db, const xmod::v1::StudySpec& spec,
                                            int max_bootstrap_samples, int64_t now_ms) {
  if (absl::Status s = CheckName(spec.name()); !s.ok()) return s;
  if (spec.description().size() > kMaxDescriptionBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("description: at most ", kMaxDescriptionBytes, " bytes"));
  }
  if (spec.members().empty()) {
    return absl::InvalidArgumentError("members: a study needs at least one member sweep");
  }
  if (spec.members_size() > kMaxMembers) {
    return absl::InvalidArgumentError(absl::StrCat("members: at most ", kMaxMembers));
  }
  if (spec.bootstrap_samples() < 0 || spec.bootstrap_samples() > max_bootstrap_samples) {
    return absl::InvalidArgumentError(
        absl::StrCat("bootstrap_samples: must be in [0, ", max_bootstrap_samples, "]"));
  }
  xmod::v1::StudySpec resolved = spec;
  std::map<int64_t, int> position;  // sweep id -> member index
  for (int i = 0; i < resolved.members_size(); ++i) {
    xmod::v1::StudyMember* member = resolved.mutable_members(i);
    if (absl::Status s = ResolveMember(db, i, member); !s.ok()) return s;
    auto [it, inserted] = position.emplace(member->sweep_id(), i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("members[", i, "].sweep_id: sweep ",
                                                     member->sweep_id(), " is also members[",
                                                     it->second, "]"));
    }
  }
  absl::StatusOr<std::vector<xmod::v1::Study>> taken =
      SelectStudies(db, "WHERE name = ?", [&](Stmt& s) { s.Bind(1, spec.name()); });
  if (!taken.ok()) return taken.status();
  if (!taken->empty()) {
    return absl::AlreadyExistsError(absl::StrCat("name: study '", spec.name(), "' already exists"));
  }

  absl::StatusOr<Stmt> insert =
      db.Prepare("INSERT INTO studies (name, spec, created_ms) VALUES (?, ?, ?)");
  if (!insert.ok()) return insert.status();
  insert->Bind(1, resolved.name()).BindBlob(2, resolved.SerializeAsString()).Bind(3, now_ms);
  if (absl::Status s = insert->Run(); !s.ok()) return s;
  xmod::v1::Study study;
  study.set_id(db.LastInsertRowId());
  study.set_created_unix_ms(now_ms);
  for (int i = 0; i < resolved.members_size(); ++i) {
    absl::StatusOr<Stmt> member = db.Prepare(
        "INSERT INTO study_members (study_id, position, sweep_id, role) VALUES (?, ?, ?, ?)");
    if (!member.ok()) return member.status();
    member->Bind(1, study.id()).Bind(2, i).Bind(3, resolved.members(i).sweep_id());
    member->Bind(4, resolved.members(i).role());
    if (absl::Status s = member->Run(); !s.ok()) return s;
  }
  *study.mutable_spec() = std::move(resolved);
  return study;
}

absl::StatusOr<xmod::v1::Study> LoadStudy(Db& db, absl::string_view name) {
  absl::StatusOr<std::vector<xmod::v1::Study>> found =
      SelectStudies(db, "WHERE name = ?", [&](Stmt& s) { s.Bind(1, name); });
  if (!found.ok()) return found.status();
  if (found->empty()) return absl::NotFoundError(absl::StrCat("study '", name, "' not found"));
  return std::move(found->front());
}

absl::StatusOr<xmod::v1::Study> LoadStudyById(Db& db, int64_t study_id) {
  absl::StatusOr<std::vector<xmod::v1::Study>> found =
      SelectStudies(db, "WHERE id = ?", [&](Stmt& s) { s.Bind(1, study_id); });
  if (!found.ok()) return found.status();
  if (found->empty()) return absl::NotFoundError(absl::StrCat("study ", study_id, " not found"));
  return std::move(found->front());
}

absl::StatusOr<std::vector<xmod::v1::Study>> LoadStudies(Db& db) {
  return SelectStudies(db, "ORDER BY id DESC", [](Stmt&) {});
}

}  // namespace xmod
