// The studies tables. See study_rows.h.
#include "coordinator/store/study_rows.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

absl::StatusOr<xmod::v1::Study> StudyFromRow(Stmt& stmt) {
  xmod::v1::Study study;
  study.set_id(stmt.Int(0));
  if (!study.mutable_spec()->ParseFromString(stmt.Text(1))) {
    return absl::InternalError(absl::StrCat("study ", study.id(), ": stored spec is unreadable"));
  }
  study.set_created_unix_ms(stmt.Int(2));
  if (!stmt.IsNull(3)) study.set_owner(stmt.Text(3));
  return study;
}

// The studies `where` (an SQL clause, bound by `bind`) selects.
absl::StatusOr<std::vector<xmod::v1::Study>> SelectStudies(Db& db, absl::string_view where,
                                                           const std::function<void(Stmt&)>& bind) {
  absl::StatusOr<Stmt> stmt =
      db.Prepare(absl::StrCat("SELECT id, spec, created_ms, owner FROM studies ", where));
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

absl::StatusOr<std::vector<int64_t>> SweepIdsNamed(Db& db, absl::string_view name) {
  absl::StatusOr<Stmt> stmt = db.Prepare("SELECT id FROM sweeps WHERE name = ? ORDER BY id");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, name);
  std::vector<int64_t> ids;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return ids;
    ids.push_back(stmt->Int(0));
  }
}

absl::StatusOr<xmod::v1::Study> InsertStudyRows(Db& db, xmod::v1::StudySpec spec,
                                                const std::string& owner, int64_t now_ms) {
  absl::StatusOr<Stmt> insert =
      db.Prepare("INSERT INTO studies (name, spec, created_ms, owner) VALUES (?, ?, ?, ?)");
  if (!insert.ok()) return insert.status();
  insert->Bind(1, spec.name()).BindBlob(2, spec.SerializeAsString()).Bind(3, now_ms);
  insert->Bind(4, owner);
  if (absl::Status s = insert->Run(); !s.ok()) return s;
  xmod::v1::Study study;
  study.set_id(db.LastInsertRowId());
  study.set_created_unix_ms(now_ms);
  study.set_owner(owner);
  for (int i = 0; i < spec.members_size(); ++i) {
    absl::StatusOr<Stmt> member = db.Prepare(
        "INSERT INTO study_members (study_id, position, sweep_id, role) VALUES (?, ?, ?, ?)");
    if (!member.ok()) return member.status();
    member->Bind(1, study.id()).Bind(2, i).Bind(3, spec.members(i).sweep_id());
    member->Bind(4, spec.members(i).role());
    if (absl::Status s = member->Run(); !s.ok()) return s;
  }
  *study.mutable_spec() = std::move(spec);
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
