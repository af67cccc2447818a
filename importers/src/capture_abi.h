// What the capture hook's C ABI (capture.h: qd_tensor, qd_quantization, qd_graph_node) can
// carry: the one home of the checks StoreSink makes before it narrows anything, so that every
// importer and the Python StoreWriter refuse the same values with the same words instead of
// letting them wrap or be cut. Names are C strings (no NUL byte), offsets int32 (QNN's own range),
// output_index and axis -1 or an index, lists at most QD_MAX_LIST_COUNT entries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "qnn_debug/base/status.h"
#include "qnn_debug/etdump/store.h"
#include "qnn_debug/importers/store_sink.h"

namespace qd::importers {

bool offset_fits_capture_abi(int64_t offset);

// kInvalidArgument naming the tensor and the field when `record` (with `nbytes` of data) breaks
// the store's rules (validate_tensor) or holds a value the ABI would cut or wrap.
Status check_capture_abi(const TensorRecord& record, uint64_t nbytes);

// kInvalidArgument "<what> '<text>' contains a NUL byte..." when `text` has one.
Status check_c_string(std::string_view what, const std::string& text);
// kInvalidArgument "<owner>: <count> <what>, more than..." beyond QD_MAX_LIST_COUNT.
Status check_list_count(std::string_view what, const std::string& owner, size_t count);
Status check_sink_options(const SinkOptions& options);
Status check_graph_node_abi(const GraphNode& node);

}  // namespace qd::importers
