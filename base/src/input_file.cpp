#include "qnn_debug/base/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <new>

#include "qnn_debug/base/text.h"

namespace qd {

InputFile::InputFile(int fd, std::string path, uint64_t size)
    : fd_(fd), path_(std::move(path)), size_(size) {}

InputFile::~InputFile() { ::close(fd_); }

Result<std::shared_ptr<const InputFile>> InputFile::open(const std::string& path,
                                                         std::string_view kind) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below as not regular.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    const ErrorCode code =
        (err == ENOENT || err == ENOTDIR) ? ErrorCode::kNotFound : ErrorCode::kIo;
    return error(code, quote_name(path) + ": cannot open: " + std::strerror(err));
  }
  struct stat info {};
  Status refused = Status::ok();
  if (::fstat(fd, &info) != 0) {
    refused = error(ErrorCode::kIo, quote_name(path) + ": cannot stat: " + std::strerror(errno));
  } else if (S_ISDIR(info.st_mode)) {
    refused =
        error(ErrorCode::kIo, quote_name(path) + ": is a directory, not " + std::string(kind));
  } else if (!S_ISREG(info.st_mode)) {
    refused = error(ErrorCode::kIo, quote_name(path) + ": is not a regular file");
  }
  if (!refused.is_ok()) {
    ::close(fd);
    return refused;
  }
  try {
    return std::shared_ptr<const InputFile>(
        new InputFile(fd, path, static_cast<uint64_t>(info.st_size)));
  } catch (const std::bad_alloc&) {
    ::close(fd);
    return error(ErrorCode::kNoMemory, quote_name(path) + ": out of memory");
  }
}

Status InputFile::corrupt(const std::string& what) const {
  return error(ErrorCode::kCorrupt, quote_name(path_) + ": " + what);
}

Status InputFile::read_at(uint64_t offset, std::span<uint8_t> out, std::string_view what) const {
  size_t done = 0;
  while (done < out.size()) {
    const uint64_t at = offset + done;
    if (at > static_cast<uint64_t>(INT64_MAX)) {
      return corrupt("offset " + std::to_string(at) + " of " + std::string(what) +
                     " is beyond any file");
    }
    const ssize_t got = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(at));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return error(ErrorCode::kIo, quote_name(path_) + ": read failed at offset " +
                                       std::to_string(at) + " (" + std::string(what) +
                                       "): " + std::strerror(errno));
    }
    if (got == 0) {
      return corrupt("truncated: the file ends at offset " + std::to_string(at) + ", inside " +
                     std::string(what));
    }
    done += static_cast<size_t>(got);
  }
  return Status::ok();
}

Result<std::vector<uint8_t>> InputFile::read_all(uint64_t max_bytes, std::string_view what) const {
  if (size_ > max_bytes) {
    return corrupt(std::string(what) + " is " + std::to_string(size_) + " bytes, larger than the " +
                   std::to_string(max_bytes) + " accepted");
  }
  std::vector<uint8_t> bytes;
  try {
    bytes.resize(size_);
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory,
                 quote_name(path_) + ": out of memory for " + std::to_string(size_) + " bytes");
  }
  QD_RETURN_IF_ERROR(read_at(0, bytes, what));
  return bytes;
}

Result<std::string> read_text_file(const std::string& path, std::string_view label,
                                   std::string_view kind, uint64_t max_bytes) {
  const std::string who = std::string(label) + " " + quote_name(path) + ": ";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const ErrorCode code =
        (err == ENOENT || err == ENOTDIR) ? ErrorCode::kNotFound : ErrorCode::kIo;
    return error(code, who + "cannot open: " + std::strerror(err));
  }
  struct stat info {};
  if (::fstat(fd, &info) == 0 && S_ISDIR(info.st_mode)) {
    ::close(fd);
    return error(ErrorCode::kIo, who + "is a directory, not " + std::string(kind));
  }
  std::string text;
  char buffer[64 * 1024];
  while (true) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      ::close(fd);
      return error(ErrorCode::kIo, who + "read failed: " + std::strerror(err));
    }
    if (got == 0) break;
    if (text.size() + static_cast<size_t>(got) > max_bytes) {
      ::close(fd);
      return error(ErrorCode::kCorrupt, who + "larger than " + std::to_string(max_bytes) +
                                            " bytes, not " + std::string(kind));
    }
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return text;
}

}  // namespace qd
