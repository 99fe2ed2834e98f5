// The combination walk: for every architecture, a grid that names everything that
// architecture reads, then every subset of its fields cleared (the fields taken from the
// GridSpec descriptor, so a field added to the proto is walked too). Each spec either
// expands to runs all of the named architecture or is refused with INVALID_ARGUMENT naming
// one of the cleared fields, never a field the user did not leave out and never by turning
// into another architecture (the bug of issue 22: `archs: [MOD]` without `ks` expanded to
// one Dense run).
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/field_path.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/tests/test_util.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

using google::protobuf::FieldDescriptor;
using xmod::v1::Architecture;
using xmod::v1::GridSpec;

// Every architecture a spec may name (the enum's values but UNSPECIFIED).
std::vector<Architecture> AllArchitectures() {
  std::vector<Architecture> archs;
  const google::protobuf::EnumDescriptor* e = xmod::v1::Architecture_descriptor();
  for (int i = 0; i < e->value_count(); ++i) {
    const auto arch = static_cast<Architecture>(e->value(i)->number());
    if (arch != xmod::v1::ARCHITECTURE_UNSPECIFIED) archs.push_back(arch);
  }
  return archs;
}

// A grid of `arch` with every field given, each as a list and in `base` (no K = 1, so
// every run should be of `arch`).
GridSpec FullGrid(Architecture arch) {
  GridSpec grid;
  grid.set_label("walk");
  grid.add_archs(arch);
  grid.add_backbones("tiny-test");
  grid.add_seq_lens(64);
  grid.add_ks(2);
  grid.add_ks(4);
  grid.add_as(1);
  grid.add_flop_budgets(1e12);
  grid.add_moe_experts("2:4+1");
  grid.add_seeds(1);
  grid.add_seeds(2);
  xmod::v1::ModelSpec* base = grid.mutable_base();
  base->set_arch(arch);
  base->mutable_backbone()->set_name("tiny-test");
  base->set_k(2);
  base->set_a(1);
  base->mutable_moe()->set_active_experts(2);
  base->mutable_moe()->set_total_experts(4);
  return grid;
}

// The grid field a path names: "grids[0].ks[1]" -> "ks", "grids[0].base.k" -> "base".
std::string GridFieldOf(const std::string& path) {
  const std::string prefix = "grids[0].";
  if (path.rfind(prefix, 0) != 0) return "";
  const std::string rest = path.substr(prefix.size());
  return rest.substr(0, rest.find_first_of(".["));
}

TEST(GridWalkTest, EveryOmittedFieldExpandsToTheNamedArchitectureOrNamesTheField) {
  const std::string dir = NewTestDir("walk");
  const xmod::v1::SweepSpec tiny = TinySweep(dir);
  std::vector<const FieldDescriptor*> fields;
  for (int i = 0; i < GridSpec::descriptor()->field_count(); ++i) {
    fields.push_back(GridSpec::descriptor()->field(i));
  }
  ASSERT_LT(fields.size(), 16u) << "every subset of the grid's fields is walked";
  int expanded = 0;
  int refused = 0;
  for (Architecture arch : AllArchitectures()) {
    for (uint32_t subset = 0; subset < (1u << fields.size()); ++subset) {
      GridSpec grid = FullGrid(arch);
      std::set<std::string> omitted;
      for (size_t f = 0; f < fields.size(); ++f) {
        if ((subset & (1u << f)) == 0) continue;
        grid.GetReflection()->ClearField(&grid, fields[f]);
        omitted.insert(fields[f]->name());
      }
      xmod::v1::SweepSpec spec = tiny;
      *spec.mutable_grids(0) = grid;
      const std::string what = absl::StrCat(xmod::v1::Architecture_Name(arch), " without [",
                                            absl::StrJoin(omitted, ", "), "]");
      absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
      if (runs.ok()) {
        ++expanded;
        ASSERT_FALSE(runs->empty()) << what;
        for (const xmod::v1::Run& run : *runs) {
          ASSERT_EQ(run.spec().model().arch(), arch) << what << " expanded to " << run.name();
        }
        continue;
      }
      ++refused;
      ASSERT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument)
          << what << ": " << runs.status();
      const std::string path = FieldPathOf(runs.status()).value_or("");
      const std::string field = GridFieldOf(path);
      // A refusal names the list to fill in, not the base value it fell back to.
      ASSERT_TRUE(omitted.count(field) > 0 && field != "base")
          << what << " refused naming " << path << ": " << runs.status();
    }
  }
  // Both outcomes occur: the walk is not vacuous.
  EXPECT_GT(expanded, 0);
  EXPECT_GT(refused, 0);
}

// The refusals of issue 22, word for word, with the base value each fell back to.
TEST(GridWalkTest, RefusalsNameTheListAndTheBaseValue) {
  const std::string dir = NewTestDir("walk_words");
  struct Case {
    Architecture arch;
    const char* cleared;  // the grid list left out
    std::string message;
  };
  const std::vector<Case> cases = {
      {xmod::v1::MOD, "ks", "grids[0].ks: MOD needs at least one K (grids[0].base.k is 0)"},
      {xmod::v1::XMOD, "ks", "grids[0].ks: X-MoD needs at least one K (grids[0].base.k is 0)"},
      {xmod::v1::XMOD, "as", "grids[0].as: X-MoD needs at least one A (grids[0].base.a is 0)"},
      {xmod::v1::MOE, "moe_experts",
       "grids[0].moe_experts: MOE needs at least one expert config such as \"6:64+2\" "
       "(grids[0].base.moe.total_experts is 0)"},
      {xmod::v1::DENSE, "backbones",
       "grids[0].backbones: needs at least one backbone (grids[0].base.backbone.name is empty "
       "and base.backbone gives no d_model)"},
  };
  for (const Case& c : cases) {
    xmod::v1::SweepSpec spec = TinySweep(dir);
    GridSpec grid = FullGrid(c.arch);
    grid.clear_base();
    grid.GetReflection()->ClearField(&grid, GridSpec::descriptor()->FindFieldByName(c.cleared));
    *spec.mutable_grids(0) = grid;
    absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec);
    ASSERT_FALSE(runs.ok()) << c.message;
    EXPECT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(runs.status().message(), c.message);
  }
}

}  // namespace
}  // namespace xmod
