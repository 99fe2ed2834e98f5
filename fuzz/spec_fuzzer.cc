// Fuzzes what a user's spec file goes through before anything is stored: parsing
// (cli/spec_file.h, protobuf text format or JSON — XMOD_FUZZ_SPEC_JSON picks which, one
// binary each so that each keeps its own corpus) and, when it parses, validation and
// expansion into runs (coordinator/spec/sweep_expansion.h). The data-glob check is off: it only
// asks the filesystem. Either an error or runs that each carry a name and a positive budget.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "cli/spec_file.h"
#include "coordinator/spec/sweep_expansion.h"

namespace {

#ifdef XMOD_FUZZ_SPEC_JSON
constexpr xmod::cli::SpecSyntax kSyntax = xmod::cli::SpecSyntax::kJson;
#else
constexpr xmod::cli::SpecSyntax kSyntax = xmod::cli::SpecSyntax::kText;
#endif

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  xmod::v1::SweepSpec spec;
  absl::Status parsed = xmod::cli::ParseSpecText(text, kSyntax, "fuzz", &spec);
  if (!parsed.ok()) {
    if (parsed.code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  xmod::cli::AbsolutizeDataGlobs("/fuzz", &spec);
  xmod::ExpansionOptions options;
  options.check_data_paths = false;
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = xmod::ExpandSweep(spec, options);
  if (!runs.ok()) {
    if (runs.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  for (const xmod::v1::Run& run : *runs) {
    if (run.name().empty() || !(run.spec().training().flop_budget() > 0)) std::abort();
  }
  return 0;
}
