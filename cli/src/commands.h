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

struct DiffArgs {
  std::string reference;
  std::string device;
  std::string json_out;  // "" = none
  std::string policy;    // "" = defaults
  std::string mapping;   // "" = none
  unsigned jobs = 1;
  std::optional<uint32_t> ref_run;
  size_t top = 10;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t chunk_mib = 4;
  std::string version;
};
int run_diff(const DiffArgs& args);

}  // namespace qd::cli
