// What an ExecuTorch ETRecord says about debug handles. An ETRecord is a zip archive
// (docs/formats.md, "ETRecord"); two of its JSON members matter here:
//   debug_handle_map  {method: {instruction id: handle or [handles]}}  (ops the runtime ran)
//   delegate_map      {method: {instruction id: {"name": backend,
//                                                "delegate_map": {identifier: [handles]}}}}
// A delegate's identifiers are its own tensor names (QNN: "aten_relu_default@0") or integers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"

namespace qd::importers {

class EtrecordHandles {
 public:
  // Reads the archive's maps for `method` ("" picks the only method, or "forward" when there are
  // several). Errors name the file and the JSON path: not a zip, a member that is not JSON or
  // not of the shapes above, a method that is not there.
  static Result<EtrecordHandles> load(const std::string& path, std::string_view method = "");

  // Handles of the op at `instruction_id` (debug_handle_map), or nullptr.
  const std::vector<int64_t>* instruction(int32_t instruction_id) const;

  // Handles the delegate at `instruction_id` gave `identifier`: exact match only (a substring
  // match would give "aten_add_tensor_1@0" the handles of "aten_add_tensor@0"). When the
  // instruction id is not in the map, an identifier found in exactly one delegate still counts.
  const std::vector<int64_t>* delegate(int32_t instruction_id, std::string_view identifier) const;

  const std::string& method() const { return method_; }
  size_t delegate_identifier_count() const;

 private:
  using Handles = std::vector<int64_t>;
  using Identifiers = std::map<std::string, Handles, std::less<>>;
  void index_unique_identifiers();

  std::string method_;
  std::map<int32_t, Handles> instructions_;
  std::map<int32_t, Identifiers> delegates_;
  Identifiers unique_identifiers_;  // identifiers that occur in one delegate only
};

}  // namespace qd::importers
