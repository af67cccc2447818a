// The HTP heap profile ExecuTorch's QNN backend writes (runtime option --heap_profiling_path):
// one line per checkpoint, `<identifier> (bytes), <value>`, e.g.
//   DSP:before_context_created (bytes), 6291456
//   DSP:after_context_freed (bytes), 6299648
// `qnn-debug capture <format> --heap-profile FILE` stores them as memory checkpoints
// (docs/formats.md, "HTP heap profile").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/etdump/store.h"

namespace qd::importers {

// Larger files are not heap profiles (two lines in practice).
inline constexpr uint64_t kMaxHeapProfileBytes = uint64_t{1} << 20;

// The checkpoints of `text`, in file order: `label` the identifier without " (bytes)", kept byte
// for byte; `bytes` the value; run_id kNoRun (the profile spans the context's life, outside any
// run); time_unix_ns 0 (the file has none). CR LF line ends, blank lines and a leading UTF-8 BOM
// are accepted. Errors (kCorrupt) start with `source`: a NUL byte (binary data), no checkpoint,
// and, with the line number and the line (escaped, cut to 80 characters), a line of another
// shape, an empty identifier, a value that is not a whole decimal below 2^64.
Result<std::vector<MemoryCheckpoint>> parse_heap_profile(std::string_view text,
                                                         const std::string& source);
// The same read from `path` (at most kMaxHeapProfileBytes; a FIFO is read to its end). Errors
// also those of read_text_file: kNotFound, kIo, kCorrupt for a larger file.
Result<std::vector<MemoryCheckpoint>> read_heap_profile(const std::string& path);

}  // namespace qd::importers
