// The bundled sweep specs (examples/): each parses as protobuf text format and expands,
// through the coordinator's own validation, into the run count its comment describes.
#include <cstdlib>
#include <map>
#include <string>

#include "common/files.h"
#include "coordinator/sweep_expansion.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace xmod {
namespace {

struct Expected {
  int runs;
  int held_out;
};

TEST(ExamplesTest, EveryBundledSpecExpands) {
  const char* source = std::getenv("XMOD_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "run through ctest (XMOD_SOURCE_DIR)";
  const std::map<std::string, Expected> expected = {
      {"examples/demo.textpb", {6, 0}},
      {"examples/tiny.textpb", {4, 0}},
      {"examples/cpu_b4.textpb", {34, 5}},
      {"examples/paper/b3_pilot.textpb", {37, 0}},
      {"examples/paper/b4_kxl.textpb", {42, 6}},
      {"examples/paper/b4_nact.textpb", {33, 5}},
      {"examples/paper/b4_axk.textpb", {25, 0}},
      {"examples/paper/table1_main.textpb", {18, 0}},
      {"examples/paper/table2_controls.textpb", {8, 0}},
      {"examples/paper/table3_ablations.textpb", {6, 0}},
      {"examples/paper/table9_deep.textpb", {5, 0}},
  };
  for (const auto& [path, want] : expected) {
    SCOPED_TRACE(path);
    absl::StatusOr<std::string> text = ReadFile(std::string(source) + "/" + path);
    ASSERT_TRUE(text.ok()) << text.status();
    xmod::v1::SweepSpec spec;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, &spec));
    absl::StatusOr<std::vector<xmod::v1::Run>> runs =
        ExpandSweep(spec, ExpansionOptions{.check_data_paths = false});
    ASSERT_TRUE(runs.ok()) << runs.status();
    EXPECT_EQ(static_cast<int>(runs->size()), want.runs);
    int held_out = 0;
    for (const xmod::v1::Run& run : *runs) held_out += run.held_out();
    EXPECT_EQ(held_out, want.held_out);
  }
}

}  // namespace
}  // namespace xmod
