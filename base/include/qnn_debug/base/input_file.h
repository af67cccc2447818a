// A file qnn-debug reads (an importer's input, a policy, a report, a name mapping, a handle map):
// opened read-only without ever waiting (a FIFO is refused, not waited on), its size taken at open,
// and positioned reads that either fill the whole buffer or say the file ends early. pread only, no
// mmap: a file truncated while mapped raises SIGBUS in the reader. Immutable once open, so threads
// share one freely.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"

namespace qd {

class InputFile {
 public:
  // kNotFound (no such file), kIo (cannot open, a directory, not a regular file). `kind` names
  // what the file should be in messages ("is a directory, not a zip archive").
  static Result<std::shared_ptr<const InputFile>> open(const std::string& path,
                                                       std::string_view kind);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

  // Exactly out.size() bytes at `offset`. Ending early is kCorrupt ("truncated: the file ends at
  // offset N, inside <what>"), a failed read kIo.
  Status read_at(uint64_t offset, std::span<uint8_t> out, std::string_view what) const;
  // The whole file; kCorrupt when it is larger than `max_bytes`.
  Result<std::vector<uint8_t>> read_all(uint64_t max_bytes, std::string_view what) const;

  // kCorrupt "<quoted path>: <what>".
  Status corrupt(const std::string& what) const;

 private:
  InputFile(int fd, std::string path, uint64_t size);
  int fd_;
  std::string path_;
  uint64_t size_;
};

// The whole of a small text input (a policy, a report, a name mapping, a handle map). Unlike
// InputFile it reads a FIFO or a terminal to its end (`--policy <(make_policy)`), so it only
// refuses a directory. kNotFound (no such file), kIo (cannot open or read, a directory),
// kCorrupt (more than `max_bytes`); messages are led by `label` and the quoted path ("policy
// 'p.json': cannot open: No such file or directory") and name the file as `kind` ("a policy").
Result<std::string> read_text_file(const std::string& path, std::string_view label,
                                   std::string_view kind, uint64_t max_bytes);

}  // namespace qd
