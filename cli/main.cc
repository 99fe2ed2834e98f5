// xmodctl: the user's command line for xmod (see app.h for commands and exit codes).
#include <sys/ioctl.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "cli/app.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  xmod::cli::Io io{&std::cout, &std::cerr, isatty(STDOUT_FILENO) == 1};
  io.in = &std::cin;
  winsize size{};
  if (io.out_is_tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0) {
    io.tty_columns = size.ws_col;
    io.tty_rows = size.ws_row;
    io.tty_size = [](int* columns, int* rows) {
      winsize now{};
      if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &now) != 0) return false;
      *columns = now.ws_col;
      *rows = now.ws_row;
      return true;
    };
  }
  return xmod::cli::RunXmodctl(args, io);
}
