// Writes a qnn-debug store. Single-threaded: the capture library drives it from its one
// background thread. Nothing appended is durable until commit() returns.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "qnn_debug/base/status.h"
#include "qnn_debug/etdump/store.h"

namespace qd {

struct WriterOptions {
  int deflate_level = 0;  // 0: off (deflate runs 30-40x slower than the disk on float data)
  // true: start writeback at every flush point and fsync at close, so a power loss keeps what
  // was committed. false: leave it to the page cache, for producers whose inputs stay on disk
  // (the importers): a kill still loses nothing committed, only a power loss can.
  bool durable = true;
};

// What the writer computes from a tensor's bytes. A caller with spare cores (the capture
// hook's prepare thread) computes it ahead of the writer and hands it to append_tensor.
struct TensorDigest {
  TensorStats stats;
  uint32_t crc32c = 0;
};
TensorDigest digest_tensor(const TensorRecord& record, std::span<const uint8_t> data);

class StoreWriter {
 public:
  // Creates (truncates) `path` and starts SWMR writing: from here on, a reader or a crash
  // sees exactly what the last commit() made durable.
  static Result<std::unique_ptr<StoreWriter>> create(const std::string& path,
                                                     const StoreMetadata& metadata,
                                                     const WriterOptions& options = {});
  ~StoreWriter();  // closes; errors then are lost, so call close() to see them
  StoreWriter(const StoreWriter&) = delete;
  StoreWriter& operator=(const StoreWriter&) = delete;

  // Runs number from 0. A run with no end_run reads back as incomplete.
  Result<uint32_t> begin_run(std::string_view name, int64_t unix_ns);
  Status end_run(int64_t unix_ns, uint64_t dropped_count);
  bool in_run() const;

  // Appends to the current run (one is begun, named "run<N>", if none is open). `data` must
  // hold exactly storage_bytes(dtype, element_count) bytes.
  // `digest`, when given, must be digest_tensor(record, data); else it is computed here.
  Status append_tensor(const TensorRecord& record, std::span<const uint8_t> data,
                       int64_t capture_unix_ns, const TensorDigest* digest = nullptr);
  // Events belong to the open run, or to no run (kNoRun) outside one; run_id is ignored.
  Status append_profile_event(const ProfileEvent& event);
  Status append_memory_checkpoint(const MemoryCheckpoint& checkpoint);
  Status append_graph_node(const GraphNode& node);
  // Records that tensor `tensor_name`'s shape was guessed by its producer (bare bytes read with
  // no shape information): readers then give no shape-dependent figures for it (top-k).
  Status append_shape_guess(const std::string& tensor_name);

  // A flush point: pools first, then the rows that point into them, each followed by H5Fflush,
  // so a row never becomes visible before the bytes it references.
  Status commit();
  // commit(), fsync (if asked), close. Idempotent.
  Status close();

  const std::string& path() const;
  uint64_t tensors_written() const;  // appended so far, committed or not

 private:
  struct Impl;
  explicit StoreWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace qd
