// How every importer writes its store: through the capture hook's C ABI, exactly as a runtime
// would (the same validation, pipeline and writer), under a temporary name in the output's
// folder that is renamed into place only by commit(). Dropping an uncommitted sink removes the
// temporary file, so a failed import leaves nothing (and an existing store untouched).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qnn_debug/capture.hpp"
#include "qnn_debug/status.h"
#include "qnn_debug/store.h"

namespace qd::importers {

// What the capture ABI (qd_tensor, qd_quantization) can carry, the one home of the ranges every
// producer's record is checked against before StoreSink narrows it: names are C strings (no NUL
// byte), offsets int32 (QNN's own range), output_index and axis -1 or an index.
bool offset_fits_capture_abi(int64_t offset);
// kInvalidArgument naming the tensor and the field when `record` (with `nbytes` of data) breaks
// the store's rules (validate_tensor) or holds a value the ABI would cut or wrap.
Status check_capture_abi(const TensorRecord& record, uint64_t nbytes);

struct SinkOptions {
  std::string output_path;
  std::string producer;  // store metadata: "qnn-debug capture etdump"
  std::string backend;
  std::string model;
  std::string naming = "executorch-qnn";  // the preset that parses tensor names
  std::string handle_map_path;            // its optional name -> handles file
};

class StoreSink {
 public:
  static Result<StoreSink> open(const SinkOptions& options);
  StoreSink(StoreSink&& other) noexcept;
  StoreSink& operator=(StoreSink&&) = delete;
  ~StoreSink();  // removes the temporary store unless committed

  Status begin_run(const std::string& name);
  Status end_run() { return session_.end_run(); }
  // `record.handles` are stored as they are when `handles_given`, else parsed from the name;
  // so is `record.role` when `role_given`. `record.output_index` < 0 is taken from the name.
  // `data` is copied before returning. Refused (kInvalidArgument, naming the tensor) before
  // anything is narrowed when check_capture_abi fails; a run, event or node name with a NUL byte
  // is refused too.
  Status capture(const TensorRecord& record, std::span<const uint8_t> data, bool handles_given,
                 bool role_given = false);
  Status profile_event(const std::string& name, const std::vector<int64_t>& handles, int64_t start,
                       int64_t end, const std::string& unit);
  Status memory_checkpoint(const std::string& label, uint64_t bytes);
  Status graph_node(const GraphNode& node);
  // Closes the store and renames it into place.
  Status commit();

 private:
  StoreSink(CaptureSession session, std::string path, std::string temporary)
      : session_(std::move(session)), path_(std::move(path)), temporary_(std::move(temporary)) {}
  CaptureSession session_;
  std::string path_;
  std::string temporary_;
  bool committed_ = false;
};

}  // namespace qd::importers
