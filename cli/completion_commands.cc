// xmodctl completion bash|zsh|fish (see completion.h): the script for the shell, generated
// from the command table of the app that parsed this very command line.
#include <CLI/CLI.hpp>
#include <memory>

#include "cli/completion.h"

namespace xmod::cli {

void AddCompletionCommand(CLI::App& app, std::function<absl::Status(const Context&)>* action) {
  auto shell = std::make_shared<std::string>();
  CLI::App* completion = app.add_subcommand(
      "completion",
      "Print a shell completion script (bash, zsh or fish) generated from these commands");
  completion->add_option("SHELL", *shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember(CompletionShells()));
  completion->callback([&app, action, shell] {
    *action = [&app, shell](const Context& ctx) -> absl::Status {
      absl::StatusOr<std::string> script = CompletionScript(CommandTreeOf(app), *shell);
      if (!script.ok()) return script.status();
      *ctx.out << *script;
      return absl::OkStatus();
    };
  });
}

}  // namespace xmod::cli
