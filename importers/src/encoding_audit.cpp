#include "encoding_audit.h"

#include "qnn_debug/base/encoding_lint.h"

namespace qd::importers {
namespace {

constexpr size_t kExamples = 8;  // names listed in one warning; the count says the rest

}  // namespace

EncodingAudit::EncodingAudit(const EncodingTable& table) : table_(table) {}

void EncodingAudit::captured(const TensorRecord& record, const TensorEncoding* encoding) {
  if (encoding != nullptr) {
    ++used_by_source_[encoding->source];
    for (const std::string& note : encoding->notes) {
      std::string& line = notes_[record.name];
      if (line.empty()) {
        line = "encodings " + quote_name(encoding->source) + ": tensor " +
               quote_name(record.name, 80) + ":";
      }
      if (line.find(note) == std::string::npos) line += " " + note + ";";
    }
  }
  std::string findings;
  for (const EncodingFinding& finding : lint_encoding(record)) {
    // A fixed-point tensor with no encoding is said by each importer in its own words.
    if (finding.problem == EncodingProblem::kMissing) continue;
    findings += (findings.empty() ? "" : ", ") + describe(finding);
  }
  if (findings.empty()) return;
  if (++flagged_ <= kExamples) {
    flagged_examples_.push_back(quote_name(record.name, 80) + " (" + findings + ")");
  }
}

void EncodingAudit::add_warnings(std::vector<std::string>& warnings) const {
  for (const EncodingSource& source : table_.sources) {
    if (source.tensor_count == 0 || used_by_source_.count(source.path) > 0) continue;
    std::string names;
    size_t listed = 0;
    for (const auto& [name, encoding] : table_.tensors) {
      if (encoding.source != source.path || listed == 3) continue;
      names += (listed++ == 0 ? "" : ", ") + quote_name(name, 60);
    }
    warnings.push_back("encodings " + quote_name(source.path) + ": none of its " +
                       std::to_string(source.tensor_count) +
                       " tensor names matched a captured tensor (" + names +
                       "...); the names must equal the dump's exactly");
  }
  size_t noted = 0;
  for (const auto& [name, line] : notes_) {
    if (noted++ == kExamples) {
      warnings.push_back("encodings: notes for " + std::to_string(notes_.size() - kExamples) +
                         " more tensors not shown");
      break;
    }
    warnings.push_back(line.substr(0, line.size() - 1));
  }
  if (flagged_ == 0) return;
  std::string line = std::to_string(flagged_) +
                     " tensors have an encoding that cannot be right (docs/metrics.md, Encoding "
                     "lint): ";
  for (size_t i = 0; i < flagged_examples_.size(); ++i) {
    line += (i == 0 ? "" : "; ") + flagged_examples_[i];
  }
  if (flagged_ > flagged_examples_.size()) {
    line += "; and " + std::to_string(flagged_ - flagged_examples_.size()) + " more";
  }
  warnings.push_back(std::move(line));
}

}  // namespace qd::importers
