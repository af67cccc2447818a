// The qnn-debug subcommands, each returning the process exit code (SPEC 8): 0 ok, 1 policy
// failed, 2 bad usage or bad input. main.cpp only parses arguments.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace qd::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitPolicyFailed = 1;
inline constexpr int kExitBadInput = 2;

struct InspectArgs {
  std::string store;
  bool json = false;
  std::optional<uint32_t> run;
  size_t limit = 50;
  bool verify = false;
};
int run_inspect(const InspectArgs& args);

}  // namespace qd::cli
