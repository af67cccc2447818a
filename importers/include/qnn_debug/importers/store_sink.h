// How every importer writes its store: through the capture hook's C ABI, exactly as a runtime
// would (the same validation, pipeline and writer), under a staging name that commit() publishes
// by the rule of qnn_debug/base/output_file.h (renamed over a regular file, copied into a device or
// FIFO, a symlink followed). Dropping an uncommitted sink removes the staging file, so a failed
// import leaves nothing (and an existing store untouched).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qnn_debug/base/output_file.h"
#include "qnn_debug/base/status.h"
#include "qnn_debug/capture.hpp"
#include "qnn_debug/etdump/store.h"

namespace qd::importers {

struct SinkOptions {
  std::string output_path;
  std::string producer;  // store metadata: "qnn-debug capture etdump"
  std::string backend;
  std::string model;
  std::string naming = "executorch-qnn";  // the preset that parses tensor names
  std::string handle_map_path;            // its optional name -> handles file
  // An HTP heap profile (heap_profile.h): read when the sink opens, so a bad one fails before
  // anything is written; its checkpoints are stored outside any run when the sink commits.
  std::string heap_profile_path;
};

class StoreSink {
 public:
  static Result<StoreSink> open(const SinkOptions& options);
  StoreSink(StoreSink&& other) noexcept;
  StoreSink& operator=(StoreSink&&) = delete;
  ~StoreSink();  // removes the staging store unless committed

  // Names with a NUL byte (which the ABI's C strings would cut) are refused, here and below.
  Status begin_run(const std::string& name);
  Status end_run() { return session_.end_run(); }
  // `record.handles` are stored as they are when `handles_given`, else parsed from the name;
  // so is `record.role` when `role_given`. `record.output_index` < 0 is taken from the name.
  // `data` is copied before returning. Refused (kInvalidArgument, naming the tensor) before
  // anything is narrowed to the ABI when a value would not survive it (capture_abi.h).
  Status capture(const TensorRecord& record, std::span<const uint8_t> data, bool handles_given,
                 bool role_given = false);
  // `instruction_id`: the runtime's instruction index (ETDump's), -1 when unknown.
  Status profile_event(const std::string& name, const std::vector<int64_t>& handles, int64_t start,
                       int64_t end, const std::string& unit, int64_t instruction_id = -1);
  Status memory_checkpoint(const std::string& label, uint64_t bytes);
  Status graph_node(const GraphNode& node);
  // The importer guessed tensor `name`'s shape (docs/store-format.md, /shape_guesses).
  Status shape_guess(const std::string& name) { return session_.shape_guess(name); }
  // Closes the store and publishes it at the output path.
  Status commit();

 private:
  StoreSink(StagedOutput staged, CaptureSession session, std::vector<MemoryCheckpoint> heap)
      : staged_(std::move(staged)), session_(std::move(session)), heap_(std::move(heap)) {}
  StagedOutput staged_;  // declared first: destroyed after the session closed the file
  CaptureSession session_;
  std::vector<MemoryCheckpoint> heap_;  // the heap profile's checkpoints, stored at commit
  bool committed_ = false;
};

}  // namespace qd::importers
