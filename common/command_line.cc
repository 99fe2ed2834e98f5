// Shared CLI11 conventions: --version, --help and one-line parse errors.
#include "common/command_line.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/build_info.h"

namespace xmod {

void AddVersionFlag(CLI::App& app, const std::string& program, const std::string& version_extra) {
  app.name(program);
  app.set_version_flag("--version", VersionLine(program, version_extra));
}

int ExitForParseError(const CLI::App& app, const CLI::ParseError& error, std::ostream& out,
                      std::ostream& err, int bad_flags_exit) {
  if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
    // --help, --help-all and --version: CLI11 prints them (the App's formatter).
    return app.exit(error, out, err);
  }
  const std::string reason(
      absl::StripTrailingAsciiWhitespace(absl::StrReplaceAll(error.what(), {{"\n", " "}})));
  err << app.get_name() << ": " << reason << " (see " << app.get_name() << " --help)\n";
  return bad_flags_exit;
}

std::vector<std::string> ReversedForCli11(const std::vector<std::string>& args) {
  std::vector<std::string> split;
  bool options = true;
  for (const std::string& arg : args) {
    if (arg == "--") options = false;
    if (options && arg.size() > 3 && absl::StartsWith(arg, "--") && arg.back() == '=' &&
        arg.find('=') == arg.size() - 1) {
      split.push_back(arg.substr(0, arg.size() - 1));
      split.emplace_back();
    } else {
      split.push_back(arg);
    }
  }
  return std::vector<std::string>(split.rbegin(), split.rend());
}

std::optional<int> ParseCommandLine(CLI::App& app, int argc, const char* const* argv,
                                    int bad_flags_exit, std::ostream& out, std::ostream& err) {
  if (app.get_name().empty() && argc > 0) app.name(argv[0]);
  std::vector<std::string> reversed =
      ReversedForCli11(std::vector<std::string>(argv + std::min(argc, 1), argv + argc));
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& error) {
    return ExitForParseError(app, error, out, err, bad_flags_exit);
  }
  return std::nullopt;
}

}  // namespace xmod
