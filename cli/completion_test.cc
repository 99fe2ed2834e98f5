// xmodctl completion: every command, subcommand and flag of the command table is in each
// script; bash, zsh and fish accept the scripts (a shell that is not installed is skipped,
// saying so; scripts/setup.sh installs them); bash and fish complete real command lines.
#include "cli/completion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "cli/app.h"

namespace xmod::cli {
namespace {

using ::testing::HasSubstr;

std::string Script(const std::string& shell) {
  std::ostringstream out, err;
  const int code = RunXmodctl({"xmodctl", "completion", shell}, Io{&out, &err});
  EXPECT_EQ(code, 0) << err.str();
  return out.str();
}

void ForEachNode(const CommandNode& node, const std::function<void(const CommandNode&)>& visit) {
  visit(node);
  for (const CommandNode& sub : node.subcommands) ForEachNode(sub, visit);
}

// The output and exit status of `command` run by /bin/sh.
std::pair<int, std::string> Shell(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

bool Installed(const std::string& shell) {
  return Shell(absl::StrCat("command -v ", shell, " >/dev/null 2>&1")).first == 0;
}

std::string WriteScript(const std::string& shell) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/xmodctl_completion.", shell, ".", getpid());
  std::ofstream(path) << Script(shell);
  return path;
}

TEST(CompletionTest, TableHoldsEveryCommand) {
  const CommandNode root = XmodctlCommandTree();
  EXPECT_EQ(root.name, "xmodctl");
  std::vector<std::string> paths;
  ForEachNode(root, [&](const CommandNode& n) { paths.push_back(n.path); });
  for (const char* path : {"sweep submit", "sweep watch", "runs list", "run show", "fit show",
                           "plan", "report", "completion"}) {
    EXPECT_THAT(paths, ::testing::Contains(path));
  }
  // The removed --token flag is hidden: completion never offers it.
  for (const CompletionFlag& flag : root.flags) EXPECT_NE(flag.name, "--token");
}

TEST(CompletionTest, EveryCommandAndFlagIsInEachScript) {
  const CommandNode root = XmodctlCommandTree();
  for (const std::string& shell : CompletionShells()) {
    const std::string script = Script(shell);
    ForEachNode(root, [&](const CommandNode& node) {
      // Each command path is a key of the script's tables.
      const std::string key = shell == "fish" ? absl::StrCat("case '", node.path, "'\n")
                                              : absl::StrCat("'", node.path, "')");
      EXPECT_THAT(script, HasSubstr(key)) << shell;
      for (const CompletionFlag& flag : node.flags) {
        const bool long_flag = flag.name.rfind("--", 0) == 0;
        const std::string written = shell != "fish"
                                        ? flag.name
                                        : absl::StrCat(long_flag ? "-l '" : "-s '",
                                                       flag.name.substr(long_flag ? 2 : 1), "'");
        EXPECT_THAT(script, HasSubstr(written)) << shell << " " << node.path;
      }
      for (const std::string& value : node.values) {
        EXPECT_THAT(script, HasSubstr(value)) << shell << " " << node.path;
      }
    });
  }
}

TEST(CompletionTest, UnknownShellIsRefused) {
  std::ostringstream out, err;
  EXPECT_EQ(RunXmodctl({"xmodctl", "completion", "tcsh"}, Io{&out, &err}), 2);
  EXPECT_THAT(err.str(), HasSubstr("SHELL"));
  EXPECT_EQ(out.str(), "");
}

TEST(CompletionTest, ShellsAcceptTheirScripts) {
  for (const std::string& shell : CompletionShells()) {
    if (!Installed(shell)) {
      std::printf("[  SKIPPED ] %s is not installed (scripts/setup.sh installs it)\n",
                  shell.c_str());
      continue;
    }
    const std::string path = WriteScript(shell);
    auto [code, output] = Shell(absl::StrCat(shell, " -n ", path, " 2>&1"));
    EXPECT_EQ(code, 0) << shell << " -n: " << output;
    std::remove(path.c_str());
  }
}

// The words bash offers for `line` (the cursor at its end).
std::string BashCompletes(const std::string& script, const std::string& line) {
  return Shell(absl::StrCat("bash -c 'source ", script, "; COMP_WORDS=(", line,
                            "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _xmodctl; "
                            "echo \"${COMPREPLY[*]}\"'"))
      .second;
}

TEST(CompletionTest, BashCompletesCommandsFlagsAndValues) {
  const std::string path = WriteScript("bash");
  EXPECT_EQ(BashCompletes(path, "xmodctl sw"), "sweep\n");
  EXPECT_EQ(BashCompletes(path, "xmodctl sweep s"), "submit show\n");
  // Global flags may come first; the subcommand's own flags and the globals are offered.
  EXPECT_EQ(BashCompletes(path, "xmodctl --addr h:1 sweep watch --no"),
            "--no_redraw --no-redraw\n");
  EXPECT_THAT(BashCompletes(path, "xmodctl sweep submit --"), HasSubstr("--dry_run"));
  EXPECT_THAT(BashCompletes(path, "xmodctl sweep submit --"), HasSubstr("--addr"));
  EXPECT_EQ(BashCompletes(path, "xmodctl completion \"\""), "bash zsh fish\n");
  std::remove(path.c_str());
}

TEST(CompletionTest, FishCompletesCommandsAndFlags) {
  if (!Installed("fish")) GTEST_SKIP() << "fish is not installed (scripts/setup.sh installs it)";
  const std::string path = WriteScript("fish");
  const auto completes = [&](const std::string& line) {
    return Shell(
               absl::StrCat("fish --no-config -c 'source ", path, "; complete -C \"", line, "\"'"))
        .second;
  };
  EXPECT_THAT(completes("xmodctl sweep s"), HasSubstr("submit\t"));
  EXPECT_THAT(completes("xmodctl sweep s"), HasSubstr("show\t"));
  EXPECT_THAT(completes("xmodctl sweep s"), ::testing::Not(HasSubstr("list")));
  EXPECT_THAT(completes("xmodctl sweep watch --no"), HasSubstr("--no_redraw"));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace xmod::cli
