// Studies: validation and storage. See studies.h.
#include "coordinator/fitting/studies.h"

#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/store/store_reads.h"
#include "coordinator/store/study_rows.h"

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
  absl::StatusOr<std::vector<int64_t>> named = SweepIdsNamed(db, name);
  if (!named.ok()) return named.status();
  const std::vector<int64_t>& ids = *named;
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

// Resolves and checks members[i] in place; `fit` is its sweep's FitPlan.
absl::Status ResolveMember(Db& db, int i, xmod::v1::StudyMember* member, xmod::v1::FitPlan* fit) {
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
  *fit = sweep->spec().fit();
  if (member->role() == kDesignRole && !LabelsNameRoles(sweep->spec())) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".role: sweep ", member->sweep_id(),
        " has no grid labelled kxl, nact or axk for role 'design'; give the sweep's role"));
  }
  return absl::OkStatus();
}

// The value of an unset fit setting (`field`): the one every member's FitPlan has
// (`value_of` reads it). INVALID_ARGUMENT naming the field and two members that disagree.
template <typename T>
absl::StatusOr<T> MembersSetting(const std::string& field, const xmod::v1::StudySpec& spec,
                                 const std::vector<xmod::v1::FitPlan>& fits,
                                 T (xmod::v1::FitPlan::*value_of)() const) {
  const auto describe = [&](size_t i) {
    return absl::StrCat("members[", i, "] sweep ", spec.members(i).sweep_id(), " ('",
                        spec.members(i).sweep_name(), "'): ", (fits[i].*value_of)());
  };
  for (size_t i = 1; i < fits.size(); ++i) {
    if ((fits[i].*value_of)() != (fits[0].*value_of)()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": not given, and the member sweeps' fit.", field, " differ (",
                       describe(0), ", ", describe(i), "); give the study's ", field));
    }
  }
  return (fits[0].*value_of)();
}

// Sets the spec's unset seed and bootstrap_samples to the members' (MembersSetting).
absl::Status InheritFitSettings(const std::vector<xmod::v1::FitPlan>& fits,
                                xmod::v1::StudySpec* spec) {
  if (!spec->has_seed()) {
    absl::StatusOr<uint64_t> seed = MembersSetting("seed", *spec, fits, &xmod::v1::FitPlan::seed);
    if (!seed.ok()) return seed.status();
    spec->set_seed(*seed);
  }
  if (!spec->has_bootstrap_samples()) {
    absl::StatusOr<int32_t> samples =
        MembersSetting("bootstrap_samples", *spec, fits, &xmod::v1::FitPlan::bootstrap_samples);
    if (!samples.ok()) return samples.status();
    spec->set_bootstrap_samples(*samples);
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<fitter::SweepRole> MemberRole(absl::string_view role) {
  if (role == kDesignRole) return std::nullopt;
  return fitter::SweepRoleOfLabel(role);
}

absl::StatusOr<xmod::v1::StudySpec> ResolveStudy(Db& db, const xmod::v1::StudySpec& spec,
                                                 int max_bootstrap_samples) {
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
  std::vector<xmod::v1::FitPlan> fits(resolved.members_size());
  for (int i = 0; i < resolved.members_size(); ++i) {
    xmod::v1::StudyMember* member = resolved.mutable_members(i);
    if (absl::Status s = ResolveMember(db, i, member, &fits[i]); !s.ok()) return s;
    auto [it, inserted] = position.emplace(member->sweep_id(), i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("members[", i, "].sweep_id: sweep ",
                                                     member->sweep_id(), " is also members[",
                                                     it->second, "]"));
    }
  }
  // Inherited values passed the same limit when their sweeps were submitted.
  if (absl::Status s = InheritFitSettings(fits, &resolved); !s.ok()) return s;
  absl::StatusOr<xmod::v1::Study> taken = LoadStudy(db, spec.name());
  if (taken.ok()) {
    return absl::AlreadyExistsError(absl::StrCat("name: study '", spec.name(), "' already exists"));
  }
  if (!absl::IsNotFound(taken.status())) return taken.status();
  return resolved;
}

absl::StatusOr<xmod::v1::Study> InsertStudy(Db& db, const xmod::v1::StudySpec& spec,
                                            const std::string& owner, int max_bootstrap_samples,
                                            int64_t now_ms) {
  absl::StatusOr<xmod::v1::StudySpec> resolved = ResolveStudy(db, spec, max_bootstrap_samples);
  if (!resolved.ok()) return resolved.status();
  return InsertStudyRows(db, *std::move(resolved), owner, now_ms);
}

}  // namespace xmod
