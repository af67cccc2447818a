// Reads byte ranges of the /data pool straight from the file with pread, bypassing HDF5's chunk
// cache. Through H5Dread every byte is copied twice (file -> chunk cache -> caller) under HDF5's
// global lock; here it is copied once, and threads read in parallel. HDF5 is still asked where
// each chunk lives (once per chunk, remembered), so the store format is unchanged.
//
// HDF5 1.10 answers "where is chunk i" by walking the chunk index from its start (its
// H5Dget_chunk_info_by_coord iterates): i steps, so looking up every chunk of a store is quadratic
// in its size (a 3.7 GB pair: 0.6 s of 10). A streaming reader that checks every byte against the
// tensor's CRC-32C may instead take a chunk to follow the one before it, as the writer appends
// them (predicted addresses), and have the chunks of a tensor looked up when its CRC disagrees.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace qd {

class DirectChunks {
 public:
  // Null when the pool cannot be read this way (not chunked, filtered, or the file cannot be
  // opened again); the caller then reads through HDF5.
  static std::unique_ptr<DirectChunks> open(const std::string& path, hid_t data_pool);
  ~DirectChunks();
  DirectChunks(const DirectChunks&) = delete;
  DirectChunks& operator=(const DirectChunks&) = delete;

  // Bytes [offset, offset + out.size()) of the pool. False when some chunk has no address yet or
  // lies past the end of the file: the caller falls back to HDF5, which reports the damage.
  // With `predicted`, a chunk not looked up yet is read where the nearest chunk before it whose
  // address is known ends (see above), and *predicted is set when some chunk was read at a
  // prediction.
  bool read(uint64_t offset, std::span<uint8_t> out, bool* predicted = nullptr);
  // Looks up every chunk of bytes [offset, offset + size) not looked up yet: true when there was
  // one (a reader may have read it at a prediction). Every chunk of the range is then where the
  // index has it; a wrong prediction also drops every prediction after the range.
  bool look_up(uint64_t offset, uint64_t size);

 private:
  DirectChunks(int fd, hid_t data_pool, uint64_t chunk_bytes, uint64_t base, uint64_t file_size);
  // File offset of chunk `index`, or 0 when unknown; *predicted as for read().
  uint64_t chunk_address(uint64_t index, bool* predicted);
  // HDF5's answer (see above), or 0; mutex_ held.
  uint64_t looked_up(uint64_t index);
  // Where chunk `index` would be if it followed a known chunk shortly before it, or 0.
  uint64_t predicted(uint64_t index) const;

  int fd_;
  hid_t data_pool_;  // owned by the StoreReader, which outlives this object
  uint64_t chunk_bytes_;
  uint64_t base_;  // the HDF5 base address: addresses are relative to it (a user block moves it)
  uint64_t file_size_;
  std::mutex mutex_;
  std::vector<uint64_t> addresses_;  // by chunk index; 0 = not looked up yet
  std::vector<bool> predicted_;      // by chunk index: the address is a prediction
};

}  // namespace qd
