// Whether a file's data still waits for the file system to choose its blocks (delayed
// allocation: ext4, XFS), read with FIEMAP. For tests that check a writer does not make the
// file system write a file out when nobody asked for it.
#pragma once

#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace qd::testing {

// 1: some of the file's data has no blocks yet; 0: all of it has; -1: cannot tell (no FIEMAP).
inline int has_unallocated_data(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  constexpr unsigned kExtents = 64;
  std::vector<char> buffer(sizeof(fiemap) + kExtents * sizeof(fiemap_extent));
  auto* map = reinterpret_cast<fiemap*>(buffer.data());
  map->fm_length = FIEMAP_MAX_OFFSET;
  map->fm_extent_count = kExtents;
  const int got = ::ioctl(fd, FS_IOC_FIEMAP, map);
  ::close(fd);
  if (got != 0) return -1;
  for (unsigned i = 0; i < map->fm_mapped_extents; ++i) {
    if (map->fm_extents[i].fe_flags & FIEMAP_EXTENT_DELALLOC) return 1;
  }
  return 0;
}

// Writes `text` into a new file with plain write(): on a file system that delays allocation,
// `path` then shows unallocated data (has_unallocated_data gives 1).
inline bool write_delayed(const std::string& path, const std::string& text, int flags = O_CREAT) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | flags, 0644);
  if (fd < 0) return false;
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  return ::close(fd) == 0 && written;
}

}  // namespace qd::testing
