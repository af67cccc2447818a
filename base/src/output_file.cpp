#include "qnn_debug/base/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "qnn_debug/base/tensor.h"

namespace qd {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxLinkHops = 40;  // as the kernel's own limit (ELOOP)

enum class TargetKind {
  kReplace,  // a regular file or a new name: staged beside it and renamed over it
  kInPlace,  // a device, FIFO, socket or "-": written through
};

struct Target {
  std::string path;  // symlinks resolved
  TargetKind kind = TargetKind::kReplace;
  bool exists = false;
  mode_t mode = 0;
};

bool is_stdout(const std::string& path) { return is_standard_output(path); }

Status cannot_write(const std::string& path, const std::string& reason) {
  return error(ErrorCode::kIo, quote_name(path) + ": cannot be written (" + reason + ")");
}

// Follows symbolic links to the path that is finally written; a dangling link resolves to the
// name it points at, which is then created.
Result<std::string> resolve_links(const std::string& path) {
  fs::path current(path);
  for (int hop = 0; hop < kMaxLinkHops; ++hop) {
    struct stat st {};
    if (::lstat(current.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return current.string();
    std::error_code ec;
    const fs::path link = fs::read_symlink(current, ec);
    if (ec) return cannot_write(path, "cannot read the symbolic link: " + ec.message());
    current = link.is_absolute() ? link : current.parent_path() / link;
  }
  return cannot_write(path, "too many levels of symbolic links");
}

std::string folder_of(const std::string& path) {
  const std::string folder = fs::path(path).parent_path().string();
  return folder.empty() ? "." : folder;
}

Result<Target> classify(const std::string& path) {
  if (is_stdout(path)) return Target{path, TargetKind::kInPlace, true, 0};
  if (path.empty()) return error(ErrorCode::kInvalidArgument, "an output path is empty");
  QD_ASSIGN_OR_RETURN(std::string resolved, resolve_links(path));
  Target target{resolved, TargetKind::kReplace, false, 0};
  struct stat st {};
  if (::stat(resolved.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return cannot_write(path, "it is a folder");
    target.exists = true;
    target.mode = st.st_mode & 07777;
    if (!S_ISREG(st.st_mode)) target.kind = TargetKind::kInPlace;
    return target;
  }
  if (errno != ENOENT) return cannot_write(path, std::strerror(errno));
  const std::string folder = folder_of(resolved);
  if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return cannot_write(path, "no such folder: " + quote_name(folder));
  }
  return target;
}

Status write_all(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return cannot_write(path, n < 0 ? std::strerror(errno) : "nothing written");
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::ok();
}

// Opens an existing non-regular target (or standard output) for writing through it.
Result<int> open_in_place(const Target& target, const std::string& path) {
  if (is_stdout(target.path)) return STDOUT_FILENO;
  const int fd = ::open(target.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return cannot_write(path, std::strerror(errno));
  return fd;
}

Status close_in_place(int fd, const std::string& path) {
  if (fd == STDOUT_FILENO) return Status::ok();
  if (::close(fd) != 0) return cannot_write(path, std::strerror(errno));
  return Status::ok();
}

std::string temporary_folder() {
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
}

// Creates a fresh, empty staging file with a name no other writer holds; returns its path.
Result<std::string> create_staging(const Target& target, const std::string& path,
                                   std::string_view tag) {
  static std::atomic<uint64_t> serial{0};
  const bool beside = target.kind == TargetKind::kReplace;
  const fs::path folder = beside ? fs::path(folder_of(target.path)) : fs::path(temporary_folder());
  const std::string base = beside ? fs::path(target.path).filename().string() : "qnn-debug";
  const mode_t mode = target.exists && beside ? target.mode : 0666;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string name = "." + base + "." + std::string(tag) + "-" +
                             std::to_string(::getpid()) + "-" + std::to_string(serial++);
    const std::string staging = (folder / name).string();
    const int fd = ::open(staging.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0 && errno == EEXIST) continue;  // a leftover of an earlier process with our pid
    if (fd < 0) {
      return cannot_write(path, std::string(std::strerror(errno)) +
                                    (beside ? "" : " in the temporary folder " + folder.string()));
    }
    if (target.exists && beside) (void)::fchmod(fd, mode);  // the umask may have narrowed it
    ::close(fd);
    return staging;
  }
  return cannot_write(path, "no free temporary name in " + folder.string());
}

Status sync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Status::ok();  // nothing to sync through; the rename still happens
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  return synced ? Status::ok() : error(ErrorCode::kIo, quote_name(path) + ": fsync failed");
}

Status copy_into(const std::string& staging, int out, const std::string& path) {
  const int in = ::open(staging.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return cannot_write(path, std::strerror(errno));
  char buffer[1 << 16];
  Status status;
  for (;;) {
    const ssize_t n = ::read(in, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) status = cannot_write(path, std::strerror(errno));
    if (n <= 0) break;
    status = write_all(out, buffer, static_cast<size_t>(n), path);
    if (!status.is_ok()) break;
  }
  ::close(in);
  return status;
}

// Swaps two names in one step (renameat2 with RENAME_EXCHANGE), through syscall(): glibc has a
// wrapper only from 2.28, other C libraries later still. -1 with errno EINVAL where the file
// system cannot exchange, ENOSYS where the kernel (before 3.15) or the platform has no renameat2.
int exchange_names(const std::string& a, const std::string& b) {
#if defined(SYS_renameat2)
  constexpr unsigned kRenameExchange = 1u << 1;  // RENAME_EXCHANGE in <linux/fs.h>
  return static_cast<int>(
      ::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), kRenameExchange));
#else
  (void)a;
  (void)b;
  errno = ENOSYS;
  return -1;
#endif
}

// After an exchange, `staging` names what the target held: the old file, now removed. A folder
// that took the target's name since prepare() (which refuses one) is swapped back instead, as a
// rename onto it would have failed. When the old file cannot be removed, the new one is in place
// all the same and the old one stays under the hidden staging name, like a killed writer's.
Status remove_swapped_out(const std::string& staging, const std::string& target,
                          const std::string& path) {
  if (::unlink(staging.c_str()) == 0) return Status::ok();
  struct stat st {};
  if (::lstat(staging.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return Status::ok();
  (void)exchange_names(staging, target);
  return cannot_write(path, "it is a folder");
}

// Puts the finished staging file at the target's name in one atomic step: a reader or a killed
// writer finds the whole old file or the whole new one, never neither and never a part. rename()
// does that too, but over an existing file ext4 (with its default mount option auto_da_alloc)
// first pushes the new file's dirty pages to the disk, so that a power loss soon after finds its
// data rather than an empty file: 0.3 s for a 512 MiB store, most of what a re-run into the same
// path paid on top of a first run (docs/performance.md, "Re-running into the same path").
// Exchanging the two names is as atomic, keeps the name present throughout, and is not
// intercepted; the old file, then at the staging name, is removed. What reaches the disk when is
// publish()'s `durable` to decide, as for a new name. Where nothing is at the name yet (ENOENT)
// or the exchange is not supported (EINVAL, ENOSYS), a plain rename().
Status replace_target(const std::string& staging, const std::string& target,
                      const std::string& path) {
  if (exchange_names(staging, target) == 0) return remove_swapped_out(staging, target, path);
  if (std::rename(staging.c_str(), target.c_str()) != 0) {
    return cannot_write(path, std::strerror(errno));
  }
  return Status::ok();
}

// The regular file `path` ends at (symlinks followed), or nullopt: missing, not a regular file.
std::optional<std::pair<dev_t, ino_t>> regular_file_id(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return std::pair{st.st_dev, st.st_ino};
}

Status two_on_stdout(std::span<const CommandFile> outputs) {
  const CommandFile* first = nullptr;
  for (const CommandFile& output : outputs) {
    if (!is_standard_output(output.path)) continue;
    if (first != nullptr) {
      return error(ErrorCode::kInvalidArgument,
                   first->what + " and " + output.what +
                       " both write to '-' (standard output takes one output; name a file for "
                       "the other)");
    }
    first = &output;
  }
  return Status::ok();
}

// Where a file output ends up, for telling two outputs apart: the path with its links and dots
// resolved (the target need not exist yet); nullopt for what is written in place (a device, a
// FIFO: two outputs may share /dev/null) and for what cannot be resolved.
std::optional<std::filesystem::path> file_target(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return std::nullopt;
  namespace fs = std::filesystem;
  std::error_code failed;
  fs::path at = path;
  // A link to a name not made yet is followed too, as the writer follows it.
  for (int hop = 0; hop < 40 && fs::is_symlink(at, failed); ++hop) {
    const fs::path to = fs::read_symlink(at, failed);
    if (failed) return std::nullopt;
    at = to.is_absolute() ? to : at.parent_path() / to;
  }
  fs::path resolved = fs::weakly_canonical(at, failed);
  if (failed) return std::nullopt;
  return resolved;
}

// Two views into one file would leave only the one written last.
Status two_into_one_file(std::span<const CommandFile> outputs) {
  for (size_t a = 0; a < outputs.size(); ++a) {
    if (outputs[a].path.empty() || is_standard_output(outputs[a].path)) continue;
    const auto target = file_target(outputs[a].path);
    for (size_t b = a + 1; target && b < outputs.size(); ++b) {
      if (outputs[b].path.empty() || file_target(outputs[b].path) != target) continue;
      return error(ErrorCode::kInvalidArgument, outputs[a].what + " and " + outputs[b].what +
                                                    " both write " + quote_name(outputs[a].path) +
                                                    ": one file takes one output; name another");
    }
  }
  return Status::ok();
}

}  // namespace

bool is_standard_output(std::string_view path) { return path == "-"; }

Status check_outputs(std::span<const CommandFile> outputs, std::span<const CommandFile> inputs) {
  QD_RETURN_IF_ERROR(two_on_stdout(outputs));
  QD_RETURN_IF_ERROR(two_into_one_file(outputs));
  for (const CommandFile& output : outputs) {
    if (output.path.empty() || is_standard_output(output.path)) continue;
    const auto written = regular_file_id(output.path);
    if (!written) continue;
    for (const CommandFile& input : inputs) {
      if (input.path.empty() || regular_file_id(input.path) != written) continue;
      const std::string also =
          input.path == output.path ? "" : " " + quote_name(input.path) + " (the same file)";
      return error(ErrorCode::kInvalidArgument,
                   output.what + " " + quote_name(output.path) + " is " + input.what + also +
                       ": writing it would destroy that input; name another output");
    }
  }
  return Status::ok();
}

Result<OutputStream> OutputStream::open(const std::string& path) {
  try {
    QD_ASSIGN_OR_RETURN(Target target, classify(path));
    OutputStream out;
    out.path_ = path;
    if (target.kind == TargetKind::kInPlace) {
      QD_ASSIGN_OR_RETURN(out.fd_, open_in_place(target, path));
      return out;
    }
    QD_ASSIGN_OR_RETURN(StagedOutput staged, StagedOutput::prepare(path, "writing"));
    out.fd_ = ::open(staged.staging_path().c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (out.fd_ < 0) return cannot_write(path, std::strerror(errno));
    out.staged_.emplace(std::move(staged));
    return out;
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory, quote_name(path) + ": out of memory while writing");
  }
}

OutputStream::OutputStream(OutputStream&& other) noexcept
    : path_(std::move(other.path_)),
      staged_(std::move(other.staged_)),
      fd_(std::exchange(other.fd_, -1)) {
  other.staged_.reset();
}

OutputStream::~OutputStream() {
  (void)close_fd();
}  // an uncommitted staging file goes with staged_

Status OutputStream::close_fd() {
  if (fd_ < 0) return Status::ok();
  const int fd = std::exchange(fd_, -1);
  return staged_ ? (::close(fd) == 0 ? Status::ok() : cannot_write(path_, std::strerror(errno)))
                 : close_in_place(fd, path_);
}

Status OutputStream::write(std::string_view text) {
  if (fd_ < 0) return error(ErrorCode::kState, quote_name(path_) + ": already committed");
  return write_all(fd_, text.data(), text.size(), path_);
}

Status OutputStream::commit() {
  QD_RETURN_IF_ERROR(close_fd());
  if (!staged_) return Status::ok();
  const Status published = staged_->publish(/*durable=*/true);
  staged_.reset();
  return published;
}

Status write_output_file(const std::string& path, std::string_view content) {
  QD_ASSIGN_OR_RETURN(OutputStream out, OutputStream::open(path));
  QD_RETURN_IF_ERROR(out.write(content));
  return out.commit();
}

Result<StagedOutput> StagedOutput::prepare(const std::string& path, std::string_view tag) {
  try {
    QD_ASSIGN_OR_RETURN(Target target, classify(path));
    QD_ASSIGN_OR_RETURN(std::string staging, create_staging(target, path, tag));
    StagedOutput out;
    out.path_ = path;
    out.target_ = std::move(target.path);
    out.staging_ = std::move(staging);
    out.in_place_ = target.kind == TargetKind::kInPlace;
    return out;
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory,
                 quote_name(path) + ": out of memory while preparing to write");
  }
}

StagedOutput::StagedOutput(StagedOutput&& other) noexcept
    : path_(std::move(other.path_)),
      target_(std::move(other.target_)),
      staging_(std::exchange(other.staging_, std::string())),
      in_place_(other.in_place_) {}

StagedOutput& StagedOutput::operator=(StagedOutput&& other) noexcept {
  if (this != &other) {
    discard();
    path_ = std::move(other.path_);
    target_ = std::move(other.target_);
    staging_ = std::exchange(other.staging_, std::string());
    in_place_ = other.in_place_;
  }
  return *this;
}

StagedOutput::~StagedOutput() { discard(); }

void StagedOutput::discard() noexcept {
  if (!staging_.empty()) ::unlink(staging_.c_str());
  staging_.clear();
}

Status StagedOutput::publish(bool durable) {
  if (staging_.empty()) return error(ErrorCode::kState, quote_name(path_) + ": already published");
  if (in_place_) {
    const Target target{target_, TargetKind::kInPlace, true, 0};
    QD_ASSIGN_OR_RETURN(int fd, open_in_place(target, path_));
    Status copied = copy_into(staging_, fd, path_);
    Status closed = close_in_place(fd, path_);
    discard();
    return copied.is_ok() ? closed : copied;
  }
  if (durable) QD_RETURN_IF_ERROR(sync_path(staging_, O_RDONLY));
  QD_RETURN_IF_ERROR(replace_target(staging_, target_, path_));
  staging_.clear();
  if (durable) (void)sync_path(folder_of(target_), O_RDONLY | O_DIRECTORY);
  return Status::ok();
}

}  // namespace qd
