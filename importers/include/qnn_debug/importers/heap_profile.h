// The HTP heap profile ExecuTorch's QNN backend writes (runtime option --heap_profiling_path):
// one line per checkpoint, `<identifier> (bytes), <value>`, e.g.
//   DSP:before_context_created (bytes), 6291456
//   DSP:after_context_freed (bytes), 6299648
// `qnn-debug capture <format> --heap-profile FILE` stores them as memory checkpoints
// (docs/formats.md, "HTP heap profile").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/etdump/store.h"

namespace qd::importers {

// Larger files are not heap profiles (two lines in practice).
inline constexpr uint64_t kMaxHeapProfileBytes = uint64_t{1} << 20;

// The checkpoints of `text`, in file order (run_id: the store's "no run", recorded outside any
// run); `source` names the file in errors, with the line number and the line.
Result<std::vector<MemoryCheckpoint>> parse_heap_profile(std::string_view text,
                                                         const std::string& source);
// The same read from `path` (at most kMaxHeapProfileBytes).
Result<std::vector<MemoryCheckpoint>> read_heap_profile(const std::string& path);

}  // namespace qd::importers
