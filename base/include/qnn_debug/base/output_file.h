// How every file qnn-debug writes reaches the path the user named (stores, reports, npz exports,
// the Python package): one rule, so no writer replaces what it should write through.
//   - a regular file, or a name that does not exist yet: the content is built under a temporary
//     name beside it and put at the name in one step when complete (over an existing file the
//     two names are exchanged and the old file removed), so a reader always finds the whole old
//     or the whole new file, and a crash or a full disk leaves the old file (or none), never a
//     part; a replaced file keeps its permission bits;
//   - a symbolic link: followed to its final target, which is then replaced as above (the link
//     stays a link);
//   - anything else that exists (a character device such as /dev/null, a FIFO, a socket) and
//     "-" (standard output): written in place, never replaced or removed.
// Temporary names carry the process id and a process-wide serial number and are created
// exclusively, so two writers (in one process or several) never share one.
// docs/output-files.md says the same for users.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "qnn_debug/base/status.h"

namespace qd {

// True for "-": standard output. A command writing a file there prints nothing else to it (its
// summary and "wrote ..." lines go to stderr), so the bytes on stdout are the file alone.
bool is_standard_output(std::string_view path);

// A file a command reads (`what` names it in messages: "the reference", "--policy") or writes
// (`what` is the option that named it: "--json", "-o").
struct CommandFile {
  std::string path;
  std::string what;
};

// Checked before anything is written, so a refusal leaves every file as it was. kInvalidArgument
// when two outputs are "-" (standard output takes one), or when an output is the same regular file
// as an input: writing it would destroy the input. "Same" is the same device and inode with
// symbolic links followed, so a hard link or a symlink to an input counts, and two spellings of
// one path do too. Paths that do not exist yet, devices and FIFOs (written through, never
// replaced) conflict with nothing.
Status check_outputs(std::span<const CommandFile> outputs, std::span<const CommandFile> inputs);

// Writes `content` to `path` by the rule above. Errors name `path` and the reason.
Status write_output_file(const std::string& path, std::string_view content);

// For writers that must build a file of their own (HDF5 seeks and reopens; the npz writer
// streams): build at staging_path(), then publish(). A target that is written in place gets its
// staging file in the temporary folder ($TMPDIR, else /tmp) and publish() copies it into the
// target. Dropping an unpublished StagedOutput removes its staging file.
class StagedOutput {
 public:
  // Checks that `path` can be written (its folder exists, it is not a folder) and creates an
  // empty staging file exclusively. `tag` names the writer in the staging name
  // (".<name>.<tag>-<pid>-<serial>").
  static Result<StagedOutput> prepare(const std::string& path, std::string_view tag);

  StagedOutput(StagedOutput&& other) noexcept;
  StagedOutput& operator=(StagedOutput&& other) noexcept;
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;
  ~StagedOutput();

  const std::string& path() const { return path_; }  // as the user gave it
  const std::string& staging_path() const { return staging_; }
  // True when the target is written in place (device, FIFO, "-"): publish() copies the
  // finished staging file into it instead of renaming.
  bool in_place() const { return in_place_; }

  // Puts the staging file at the (resolved) target in one step, or copies it into an in-place
  // target and removes it. With `durable`, the data is synced before and the folder after.
  Status publish(bool durable);

 private:
  StagedOutput() = default;
  void discard() noexcept;

  std::string path_;     // as given
  std::string target_;   // symlinks resolved
  std::string staging_;  // "" once published or moved from
  bool in_place_ = false;
};

// The same, piece by piece, for writers that stream (the report views): a target written in place
// receives each piece as it comes; otherwise commit() publishes the finished file, and dropping
// an uncommitted stream leaves the target as it was.
class OutputStream {
 public:
  static Result<OutputStream> open(const std::string& path);
  OutputStream(OutputStream&& other) noexcept;
  OutputStream& operator=(OutputStream&&) = delete;
  ~OutputStream();

  Status write(std::string_view text);
  Status commit();

 private:
  OutputStream() = default;
  Status close_fd();
  std::string path_;
  std::optional<StagedOutput> staged_;  // nullopt: written in place
  int fd_ = -1;
};

}  // namespace qd
