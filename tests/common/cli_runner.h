// Runs the qnn-debug executable (QD_CLI, set by CMake) as a user does, capturing its output.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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

// `command` run by /bin/sh -c, as std::system does, but started with posix_spawn: the shell
// starts without a copy of the test process's page tables, which fork (inside std::system)
// makes, and which under AddressSanitizer cover its shadow memory and freed-memory quarantine
// (hundreds of MB: tens of ms a command). Returns the wait status, or -1 if it could not start.
inline int run_shell(const std::string& command) {
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ) !=
      0) {
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

// `args` is appended to the command line as is (quote paths with spaces yourself).
inline CliResult run_cli(const std::string& args) {
  TempDir dir;
  const std::string out = dir.file("out"), err = dir.file("err");
  const std::string command = std::string(QD_CLI) + " " + args + " >" + out + " 2>" + err;
  const int status = run_shell(command);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

}  // namespace qd::testing
