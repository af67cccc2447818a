// Runs the qnn-debug executable (QD_CLI, set by CMake) as a user does, capturing its output.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "files.h"
#include "temp_dir.h"

namespace qd::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `args` is appended to the command line as is (quote paths with spaces yourself).
inline CliResult run_cli(const std::string& args) {
  TempDir dir;
  const std::string out = dir.file("out"), err = dir.file("err");
  const std::string command = std::string(QD_CLI) + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

}  // namespace qd::testing
