// The xmodctl command line: parses arguments with CLI11 into global options and one command,
// runs it, and maps the outcome to an exit status. main.cc only calls RunXmodctl; tests call
// it with their own streams and a fake coordinator's address.
//
// Exit status: 0 success; 2 bad usage or bad input (unknown flag, unparsable spec file,
// a parameter or spec refused with INVALID_ARGUMENT, locally or by the coordinator);
// 1 any other failure (coordinator unreachable, run or sweep not found, a watched sweep that
// ended with failed or cancelled runs). Every failure prints one line "xmodctl: ..." on err.
// Thread-compatible; reads XMOD_ADDR, XMOD_TOKEN_FILE or XMOD_TOKEN, and XMOD_TLS_CA /
// XMOD_TLS_CERT / XMOD_TLS_KEY from the environment. Secrets never come from argv.
#ifndef XMOD_CLI_APP_H_
#define XMOD_CLI_APP_H_

#include <functional>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/completion.h"

namespace xmod::cli {

inline constexpr char kDefaultAddr[] = "127.0.0.1:7070";

struct Io {
  std::ostream* out;
  std::ostream* err;
  bool out_is_tty = false;
  int tty_columns = 0;  // terminal width when out is a terminal (0 = unknown)
  int tty_rows = 0;     // and its height (0 = unknown)
  // The terminal's size now, as (columns, rows), for a redraw that follows a resize; unset
  // or false: the sizes above hold.
  std::function<bool(int* columns, int* rows)> tty_size;
  std::istream* in = nullptr;  // standard input: a spec given as "-f -" (null: none)
};

// args[0] is the program name.
int RunXmodctl(const std::vector<std::string>& args, const Io& io);

// The table of every xmodctl command and flag, as RunXmodctl parses them (completion.h).
CommandNode XmodctlCommandTree();

// The exit status of a command's outcome (see above).
int ExitCode(const absl::Status& status);

}  // namespace xmod::cli

#endif  // XMOD_CLI_APP_H_
