// Reads byte ranges of the /data pool straight from the file with pread, bypassing HDF5's chunk
// cache. Through H5Dread every byte is copied twice (file -> chunk cache -> caller) under HDF5's
// global lock; here it is copied once, and threads read in parallel. HDF5 is still asked where
// each chunk lives (once per chunk, remembered), so the store format is unchanged.
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
  bool read(uint64_t offset, std::span<uint8_t> out);

 private:
  DirectChunks(int fd, hid_t data_pool, uint64_t chunk_bytes, uint64_t base, uint64_t file_size);
  // File offset of chunk `index`, or 0 when unknown.
  uint64_t chunk_address(uint64_t index);

  int fd_;
  hid_t data_pool_;  // owned by the StoreReader, which outlives this object
  uint64_t chunk_bytes_;
  uint64_t base_;  // the HDF5 base address: addresses are relative to it (a user block moves it)
  uint64_t file_size_;
  std::mutex mutex_;
  std::vector<uint64_t> addresses_;  // by chunk index; 0 = not looked up yet
};

}  // namespace qd
