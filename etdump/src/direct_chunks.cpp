#include "direct_chunks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

uint64_t DirectChunks::chunk_address(uint64_t index) {
  std::lock_guard lock(mutex_);
  if (index < addresses_.size() && addresses_[index] != 0) return addresses_[index];
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
  if (index >= addresses_.size()) addresses_.resize(index + 1, 0);
  addresses_[index] = absolute;
  return absolute;
}

bool DirectChunks::read(uint64_t offset, std::span<uint8_t> out) {
  uint64_t done = 0;
  while (done < out.size()) {
    const uint64_t at = offset + done;
    const uint64_t index = at / chunk_bytes_;
    const uint64_t within = at % chunk_bytes_;
    const uint64_t address = chunk_address(index);
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
