#include "direct_chunks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "h5.h"

namespace qd {

std::unique_ptr<DirectChunks> DirectChunks::open(const std::string& path, hid_t data_pool) {
  h5::PropertyList create(H5Dget_create_plist(data_pool));
  hsize_t chunk = 0;
  if (!create.valid() || H5Pget_layout(create.get()) != H5D_CHUNKED ||
      H5Pget_nfilters(create.get()) != 0 || H5Pget_chunk(create.get(), 1, &chunk) != 1 ||
      chunk == 0) {
    return nullptr;
  }
  h5::Datatype type(H5Dget_type(data_pool));
  if (!type.valid() || H5Tget_size(type.get()) != 1) return nullptr;
  hid_t file = H5Iget_file_id(data_pool);
  if (file < 0) return nullptr;
  h5::File file_handle(file);
  h5::PropertyList file_create(H5Fget_create_plist(file));
  hsize_t user_block = 0;
  if (!file_create.valid() || H5Pget_userblock(file_create.get(), &user_block) < 0) return nullptr;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    ::close(fd);
    return nullptr;
  }
  return std::unique_ptr<DirectChunks>(
      new DirectChunks(fd, data_pool, chunk, user_block, static_cast<uint64_t>(info.st_size)));
}

DirectChunks::DirectChunks(int fd, hid_t data_pool, uint64_t chunk_bytes, uint64_t base,
                           uint64_t file_size)
    : fd_(fd),
      data_pool_(data_pool),
      chunk_bytes_(chunk_bytes),
      base_(base),
      file_size_(file_size) {}

DirectChunks::~DirectChunks() { ::close(fd_); }

uint64_t DirectChunks::looked_up(uint64_t index) {
  const hsize_t coordinate = index * chunk_bytes_;
  unsigned filter_mask = 0;
  haddr_t address = HADDR_UNDEF;
  hsize_t size = 0;
  h5::QuietErrors quiet;
  if (H5Dget_chunk_info_by_coord(data_pool_, &coordinate, &filter_mask, &address, &size) < 0 ||
      address == HADDR_UNDEF || size != chunk_bytes_) {
    return 0;  // not written yet (or damaged): not remembered, HDF5 decides
  }
  const uint64_t absolute = base_ + address;
  if (absolute == 0 || absolute > file_size_ || chunk_bytes_ > file_size_ - absolute) return 0;
  return absolute;
}

// The writer appends chunks as they fill, so a chunk mostly starts where the one before it ends;
// only a few hundred bytes of other objects (the runs' rows, at each commit) come between them.
uint64_t DirectChunks::predicted(uint64_t index) const {
  constexpr uint64_t kReach = 64;  // chunks back to look for a known one
  const uint64_t known = std::min<uint64_t>(index, addresses_.size());
  for (uint64_t k = known; k-- > 0 && index - k <= kReach;) {
    if (addresses_[k] == 0) continue;
    const uint64_t address = addresses_[k] + (index - k) * chunk_bytes_;
    return address <= file_size_ && chunk_bytes_ <= file_size_ - address ? address : 0;
  }
  return 0;
}

uint64_t DirectChunks::chunk_address(uint64_t index, bool* predicted) {
  std::lock_guard lock(mutex_);
  if (index < addresses_.size() && addresses_[index] != 0) {
    if (predicted != nullptr && predicted_[index]) *predicted = true;
    return addresses_[index];
  }
  const uint64_t guess = predicted != nullptr ? this->predicted(index) : 0;
  const uint64_t absolute = guess != 0 ? guess : looked_up(index);
  if (absolute == 0) return 0;
  if (index >= addresses_.size()) {
    addresses_.resize(index + 1, 0);
    predicted_.resize(index + 1, false);
  }
  addresses_[index] = absolute;
  predicted_[index] = guess != 0;
  if (guess != 0) *predicted = true;
  return absolute;
}

bool DirectChunks::look_up(uint64_t offset, uint64_t size) {
  std::lock_guard lock(mutex_);
  const uint64_t first = offset / chunk_bytes_,
                 end = (offset + size + chunk_bytes_ - 1) / chunk_bytes_;
  if (end > addresses_.size()) {
    addresses_.resize(end, 0);
    predicted_.resize(end, false);
  }
  // A chunk predicted, or whose prediction another reader dropped, may have been read elsewhere.
  bool unsure = false, wrong = false;
  for (uint64_t index = first; index < end; ++index) {
    if (addresses_[index] != 0 && !predicted_[index]) continue;
    const uint64_t actual = looked_up(index);
    unsure = true;
    wrong = wrong || (predicted_[index] && actual != addresses_[index]);
    addresses_[index] = actual;  // 0 (unknown) when HDF5 has none: read through HDF5 then
    predicted_[index] = false;
  }
  for (uint64_t later = end; wrong && later < addresses_.size(); ++later) {
    if (predicted_[later]) addresses_[later] = 0;  // maybe made from a wrong one
    predicted_[later] = false;
  }
  return unsure;
}

bool DirectChunks::read(uint64_t offset, std::span<uint8_t> out, bool* predicted) {
  uint64_t done = 0;
  while (done < out.size()) {
    const uint64_t at = offset + done;
    const uint64_t index = at / chunk_bytes_;
    const uint64_t within = at % chunk_bytes_;
    const uint64_t address = chunk_address(index, predicted);
    if (address == 0) return false;
    const uint64_t want = std::min<uint64_t>(chunk_bytes_ - within, out.size() - done);
    uint64_t got = 0;
    while (got < want) {
      const ssize_t n = ::pread(fd_, out.data() + done + got, want - got,
                                static_cast<off_t>(address + within + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      got += static_cast<uint64_t>(n);
    }
    done += want;
  }
  return true;
}

}  // namespace qd
