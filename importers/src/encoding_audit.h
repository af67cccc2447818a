// What an importer says about the encodings it was given, once every tensor is captured: the
// tensors whose encoding the lint flags (encoding_lint.h, the rule `inspect` applies to the
// store, so capture and inspect name the same tensors), the encodings files none of whose
// tensor names matched a captured tensor, and the notes of the encodings used (a damaged
// axis_format, an unsupported encoding kind...) (docs/formats.md, "What capture warns about").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "qnn_debug/etdump/store.h"
#include "qnn_debug/importers/encodings.h"

namespace qd::importers {

class EncodingAudit {
 public:
  explicit EncodingAudit(const EncodingTable& table);
  // A tensor about to be stored, with the encoding it took from the table (null: none).
  void captured(const TensorRecord& record, const TensorEncoding* encoding);
  // One line per finding kind, appended to `warnings`.
  void add_warnings(std::vector<std::string>& warnings) const;

 private:
  const EncodingTable& table_;
  std::map<std::string, uint64_t> used_by_source_;  // tensors that took an encoding of a file
  uint64_t flagged_ = 0;
  std::vector<std::string> flagged_examples_;  // the first few, with their findings
  std::map<std::string, std::string> notes_;   // by tensor name: its encoding's notes
};

}  // namespace qd::importers
