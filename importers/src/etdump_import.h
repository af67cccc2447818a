// `qnn-debug capture etdump`: an ExecuTorch ETDump (+ debug buffer) into a qnn-debug store.
// docs/formats.md ("ExecuTorch ETDump") describes what is read and how it maps to the store.
//
// Every RunData block becomes a run. Every debug event's value becomes a tensor: its bytes from
// the debug buffer, its dtype from the scalar type (a QNN delegate's raw storage types are its
// fixed-point types), dims and layout as stored, debug handles from the ETRecord (exact names) or
// the naming preset, scale and offset from the encodings files (never guessed: a quantized
// tensor without one is kept raw and flagged by the encoding lint). Every profile event becomes a
// profile event joined to its op. Allocation events become memory checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qnn_debug/base/status.h"

namespace qd::importers {

struct EtdumpImportOptions {
  std::string etdump_path;
  std::string debug_buffer_path;             // "": the dump must hold no tensor data
  std::vector<std::string> encodings_paths;  // encodings.h formats, merged in order
  std::string etrecord_path;                 // "": handles come from the names alone
  std::string etrecord_method;               // "": the ETRecord's only method, else "forward"
  std::string naming = "executorch-qnn";     // naming preset for the tensor names
  std::string handle_map_path;               // the preset's optional name -> handles file
  std::string heap_profile_path;             // an HTP heap profile to store, "" for none
  std::string output_path;                   // the store to write (replaced if it exists)
};

struct EtdumpImportSummary {
  uint32_t runs = 0;
  uint64_t tensors = 0;
  uint64_t tensor_bytes = 0;
  uint64_t profile_events = 0;
  uint64_t memory_checkpoints = 0;
  uint64_t graph_nodes = 0;            // from a converter net JSON among the encodings
  uint64_t handles_from_etrecord = 0;  // tensors whose handles the ETRecord gave
  uint64_t with_encoding = 0;          // tensors given a scale and offset
  uint64_t missing_encoding = 0;       // fixed-point tensors kept raw: no encoding for them
  uint64_t skipped_values = 0;         // debug events holding no value, or a string
  // Inputs read but partly ignored, and encoding problems (encoding_lint.h), one line each naming
  // the file and the entry: `capture` prints them, `diff` adds them to its report's warnings.
  std::vector<std::string> warnings;
};

// Writes the store under a temporary name in the output's folder and renames it into place only
// when everything was read: a failure leaves no store (and the previous one, if any). Errors
// (exit-code-2 material) name the file, the event ("run_data[1].events[17]") and what was wrong:
// a corrupt or truncated ETDump, an offset outside the debug buffer, an unknown scalar type, a
// size that overflows, a tensor whose encoding disagrees with its dtype or dims, a missing debug
// buffer for a dump that holds tensors.
Result<EtdumpImportSummary> import_etdump(const EtdumpImportOptions& options);

}  // namespace qd::importers
