// The command-line conventions every xmod binary shares, over CLI11: `--version` prints the
// build's VersionLine (common/build_info.h) and exits 0; `--help` prints the flags and exits
// 0; a command line that does not parse prints one line naming the flag,
// "PROGRAM: REASON (see PROGRAM --help)", on stderr and exits with a non-zero code (2 unless
// the binary says otherwise). Thread-compatible; LibTorch-free.
#ifndef XMOD_COMMON_COMMAND_LINE_H_
#define XMOD_COMMON_COMMAND_LINE_H_

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace xmod {

// The exit code of a command line that does not parse, unless a binary's contract says
// otherwise (xmod-train's kExitBadFlags happens to be the same).
inline constexpr int kExitUsage = 2;

// Names `app` `program` and adds --version, which prints VersionLine(program, version_extra).
void AddVersionFlag(CLI::App& app, const std::string& program,
                    const std::string& version_extra = "");

// The exit code for `error`, thrown by app.parse: 0 after --help or --version (their text on
// `out`); otherwise `bad_flags_exit`, with the one-line reason on `err`.
int ExitForParseError(const CLI::App& app, const CLI::ParseError& error, std::ostream& out,
                      std::ostream& err, int bad_flags_exit = kExitUsage);

// CLI11 (2.1) reads `--name=` with nothing after the `=` as `--name` without a value and
// takes the next argument as it, so `--http_listen= --metrics_listen=x` set http_listen to
// "--metrics_listen=x". Returns `args` (program name excluded) in CLI11's parse order (last
// first) with every `--name=` before a `--` split into `--name` and an empty value.
std::vector<std::string> ReversedForCli11(const std::vector<std::string>& args);

// Parses argv (argv[0] is the program) into `app`; an empty `--name=` is an empty value. Returns
// nullopt when the program should go on, else the code to exit with now (ExitForParseError).
std::optional<int> ParseCommandLine(CLI::App& app, int argc, const char* const* argv,
                                    int bad_flags_exit = kExitUsage, std::ostream& out = std::cout,
                                    std::ostream& err = std::cerr);

}  // namespace xmod

#endif  // XMOD_COMMON_COMMAND_LINE_H_
