// Shell completion for xmodctl: the command table read back from the CLI11 app that parses
// the command line (so a script never drifts from the commands), and the bash, zsh and fish
// scripts generated from it. Each script completes subcommands at every level and the flags
// of the command typed so far (the global flags everywhere, as the parser accepts them after
// any subcommand). Pure functions; thread-safe.
#ifndef XMOD_CLI_COMPLETION_H_
#define XMOD_CLI_COMPLETION_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/commands.h"

namespace CLI {
class App;
}  // namespace CLI

namespace xmod::cli {

// A flag as typed: "--dry_run" or "-o", with its help text.
struct CompletionFlag {
  std::string name;
  std::string help;
};

// One command of the table: its words from the root ("sweep submit"; "" for xmodctl itself),
// help, own flags and subcommands.
struct CommandNode {
  std::string path;
  std::string name;  // last word of path
  std::string help;
  std::vector<CompletionFlag> flags;
  std::vector<std::string> values;  // the words a positional argument takes, where fixed
  std::vector<CommandNode> subcommands;
};

// The table of `app` and its subcommands (help flags included, positionals left out).
CommandNode CommandTreeOf(const CLI::App& app);

// The shells a script is generated for, in the order `xmodctl completion` lists them.
const std::vector<std::string>& CompletionShells();

// The completion script of `root` (a program named root.name) for `shell` ("bash", "zsh" or
// "fish"); INVALID_ARGUMENT naming the shells for any other.
absl::StatusOr<std::string> CompletionScript(const CommandNode& root, const std::string& shell);

// Adds `xmodctl completion SHELL` to `app`: prints CompletionScript of `app`'s own table
// (completion_commands.cc).
void AddCompletionCommand(CLI::App& app, std::function<absl::Status(const Context&)>* action);

}  // namespace xmod::cli

#endif  // XMOD_CLI_COMPLETION_H_
