// Reads a qnn-debug store, also one whose writer is still running or was killed (SWMR read).
// Opening checks every row and loads the runs, events and graph; tensor rows are indexed, not
// kept, and read a run at a time when asked for; tensor bytes are read on demand, whole or in
// ranges. Memory then follows what is being read, not the store's size.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/etdump/store.h"

namespace qd {

class StoreReader {
 public:
  // Errors (exit-code-2 material): missing file, not HDF5, truncated, not a qnn-debug store,
  // newer format version. Messages start with the path.
  static Result<std::unique_ptr<StoreReader>> open(const std::string& path);
  ~StoreReader();
  StoreReader(const StoreReader&) = delete;
  StoreReader& operator=(const StoreReader&) = delete;

  const std::string& path() const;
  int64_t format_version() const;
  const StoreMetadata& metadata() const;
  const std::vector<RunInfo>& runs() const;
  uint64_t tensor_count() const;  // intact tensors, every run
  // One run's tensors in capture order (empty for a run with none, or no such run), read from
  // the store now: costs the run's size, not the store's.
  Result<std::vector<TensorEntry>> tensors_of_run(uint32_t run_id) const;
  // Every tensor of every run in capture order, read a piece at a time; stops at the first
  // error, its own or the one `visit` returns.
  Status for_each_tensor(const std::function<Status(const TensorEntry&)>& visit) const;
  // Every tensor at once: for listings and small stores (memory grows with the store).
  Result<std::vector<TensorEntry>> all_tensors() const;
  // The tensor with capture-order number `seq` (kNotFound when there is none).
  Result<TensorEntry> tensor_at(uint64_t seq) const;
  const std::vector<ProfileEvent>& profile_events() const;
  const std::vector<MemoryCheckpoint>& memory_checkpoints() const;
  const std::vector<GraphNode>& graph() const;
  // Tensors whose shape their producer guessed (docs/store-format.md, /shape_guesses), by
  // name; empty for stores written before the table existed.
  const std::vector<std::string>& shape_guesses() const;
  bool shape_guessed(std::string_view tensor_name) const;
  // What a reader of the store should be told, one line each starting with the path: the rows
  // of a killed writer's torn tail that were skipped, the tensors whose shape was guessed.
  const std::vector<std::string>& warnings() const;

  // The whole tensor, checked against its CRC-32C.
  Result<std::vector<uint8_t>> read_tensor(const TensorEntry& tensor) const;
  // Bytes [offset, offset + out.size()) of the tensor, unchecked: for streaming in chunks.
  Status read_tensor_range(const TensorEntry& tensor, uint64_t offset,
                           std::span<uint8_t> out) const;
  // As read_tensor_range, for a reader that holds every byte it reads to the tensor's CRC-32C
  // before it uses what it computed: a chunk of the store not located yet may be read where the
  // one before it ends, as the writer appends them (HDF5 1.10 locates chunk i in i steps), and
  // `predicted` is then set. When the CRC disagrees and `predicted` was set, call relocate(tensor)
  // and read the tensor again: every chunk of it is then read where the store's index puts it.
  Status stream_tensor_range(const TensorEntry& tensor, uint64_t offset, std::span<uint8_t> out,
                             bool& predicted) const;
  // Locates every chunk of the tensor in the store's index. True when one had not been (it may
  // have been read at a prediction by a reader that did not say).
  bool relocate(const TensorEntry& tensor) const;
  // Streams the tensor through CRC-32C in bounded pieces.
  Status verify_tensor(const TensorEntry& tensor) const;

 private:
  struct Impl;
  explicit StoreReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// For programs, called first thing in main (before any other HDF5 use): a damaged file that
// HDF5 could not close would otherwise make libhdf5 print "infinite loop closing library" and
// its object list at exit. Every file qnn-debug writes is closed explicitly before then. Not for
// libraries loaded into a host (the capture hook, the Python module): the setting is global.
void keep_hdf5_quiet_at_exit();

}  // namespace qd
