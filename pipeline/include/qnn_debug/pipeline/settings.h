// The files that set how a diff judges and aligns, read here at the pipeline's edge: `compare`
// receives their values (compare::Policy, compare::NameMapping), never a path.
#pragma once

#include <string>

#include "qnn_debug/base/status.h"
#include "qnn_debug/compare/align.h"
#include "qnn_debug/compare/policy.h"

namespace qd::pipeline {

// A policy file (`--policy`, docs/metrics.md): kNotFound (missing), kIo (unreadable, a
// directory), or the policy's own errors, each naming the file.
Result<compare::Policy> load_policy(const std::string& path);

// A name mapping file (`--map`): kNotFound, kIo, kCorrupt (not JSON, wrong shape, a duplicate
// reference name), each naming the file; kInvalidArgument for an empty path.
Result<compare::NameMapping> load_name_mapping(const std::string& path);

}  // namespace qd::pipeline
