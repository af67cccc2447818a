// What the benchmarks that run whole programs share: scratch paths, spawning a program and
// timing it, and reading the peak memory a qnn-debug command reports with --stats.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace qd::bench {

// "50,500,5000": the run counts a bench measures; nullopt for an empty list, a zero or a
// non-number.
inline std::optional<std::vector<uint32_t>> parse_counts(const std::string& text) {
  std::vector<uint32_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const unsigned long value = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value == 0) return std::nullopt;
    out.push_back(static_cast<uint32_t>(value));
  }
  if (out.empty()) return std::nullopt;
  return out;
}

// A scratch file: under $QD_BENCH_DIR when set (a disk of your choice), else the temp folder.
inline std::string bench_path(const std::string& prefix, const std::string& name) {
  const char* dir = std::getenv("QD_BENCH_DIR");
  const std::filesystem::path base = dir ? dir : std::filesystem::temp_directory_path();
  return (base / (prefix + std::to_string(getpid()) + "_" + name)).string();
}

struct ProcessRun {
  int exit_code = -1;
  double seconds = 0;
};

// Runs a program to completion, its stdout and stderr sent to files.
inline ProcessRun run_process(std::vector<std::string> args, const std::string& stdout_path,
                              const std::string& stderr_path = "/dev/null") {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  ProcessRun run;
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0) {
    int status = 0;
    if (waitpid(pid, &status, 0) == pid && WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  posix_spawn_file_actions_destroy(&actions);
  return run;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The peak memory a qnn-debug command prints with --stats ("peak memory 16.2 MiB": its VmHWM,
// which exec resets; ru_maxrss would include the benchmark's own peak, inherited across vfork
// and exec). -1 when the line is missing.
inline double reported_peak_mib(const std::string& stderr_text) {
  const std::string marker = "peak memory ";
  const size_t at = stderr_text.find(marker);
  return at == std::string::npos ? -1
                                 : std::strtod(stderr_text.c_str() + at + marker.size(), nullptr);
}

}  // namespace qd::bench
