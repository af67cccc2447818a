#include "qnn_debug/pipeline/settings.h"

#include <cstdint>

#include "qnn_debug/base/input_file.h"
#include "qnn_debug/base/text.h"

namespace qd::pipeline {

Result<compare::Policy> load_policy(const std::string& path) {
  constexpr uint64_t kMaxPolicyBytes = uint64_t{16} << 20;  // a few rules: kilobytes
  QD_ASSIGN_OR_RETURN(const std::string text,
                      read_text_file(path, "policy", "a policy", kMaxPolicyBytes));
  return compare::Policy::from_json(text, path);
}

Result<compare::NameMapping> load_name_mapping(const std::string& path) {
  // A name mapping lists tensor names: far below this even for the largest models.
  constexpr uint64_t kMaxMappingBytes = uint64_t{256} << 20;
  if (path.empty()) return error(ErrorCode::kInvalidArgument, "name mapping: empty path");
  QD_ASSIGN_OR_RETURN(const std::string text,
                      read_text_file(path, "name mapping", "a name mapping", kMaxMappingBytes));
  return compare::parse_name_mapping(text, "name mapping " + quote_name(path));
}

}  // namespace qd::pipeline
