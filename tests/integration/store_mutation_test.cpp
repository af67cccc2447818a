// The store's integrity goal (docs/store-format.md, section 11): any single-byte change of a
// finished store gives an error naming the file, or exactly the same content; never a hang, a
// crash or a silently different result. Every byte of a small store is flipped in turn (long runs
// of zero bytes, unused chunk space, are sampled; under the sanitizers, a share of the bytes) and
// read back in a child process with a deadline: everything the reader exposes, and every
// tensor's bytes, is compared with the original.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "../common/status_matchers.h"
#include "../common/store_reading.h"
#include "../common/temp_dir.h"
#include "../common/test_scale.h"
#include "qnn_debug/base/checksum.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/etdump/store_writer.h"

using qd::testing::IsOk;

namespace qd {
namespace {

constexpr auto kDeadline = std::chrono::seconds(20);
constexpr size_t kZeroRunSampled = 512;  // zero runs longer than this are sampled
constexpr size_t kZeroRunStride = 509;

void write_small_store(const std::string& path) {
  auto writer = StoreWriter::create(path, {"mutation", "QnnHtp", "SM8650", "tiny", 7});
  ASSERT_THAT(writer, IsOk());
  StoreWriter& w = **writer;
  ASSERT_THAT(w.begin_run("sample_0", 1), IsOk());
  TensorRecord conv;
  conv.name = "conv__debugID_1";
  conv.handles = {1};
  conv.dtype = DType::kSFixed8;
  conv.dims = {1, 2, 2, 3};
  conv.axis_order = {0, 3, 1, 2};
  conv.quant.scales = {0.5, 0.25, 0.125};
  conv.quant.offsets = {0, 1, -1};
  conv.quant.axis = 3;
  std::vector<uint8_t> bytes(12);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 5);
  ASSERT_THAT(w.append_tensor(conv, bytes, 2), IsOk());
  TensorRecord out;
  out.name = "output_logits@0";
  out.output_index = 0;
  out.role = TensorRole::kGraphOutput;
  out.dims = {4};
  const float logits[4] = {1.5f, -2.0f, 0.25f, 3.0f};
  ASSERT_THAT(w.append_tensor(out, {reinterpret_cast<const uint8_t*>(logits), 16}, 3), IsOk());
  ASSERT_THAT(w.append_profile_event({0, "conv", {1}, 10, 20, "cycles"}), IsOk());
  ASSERT_THAT(w.append_memory_checkpoint({0, "after conv", 4096, 4}), IsOk());
  ASSERT_THAT(w.end_run(5, 0), IsOk());
  ASSERT_THAT(w.append_graph_node({"conv", "Conv2d", {"input"}, {"conv__debugID_1"}, {1}}), IsOk());
  ASSERT_THAT(w.close(), IsOk());
}

template <typename T>
std::string join(const std::vector<T>& items) {
  std::ostringstream out;
  for (const T& item : items) out << item << ',';
  return out.str();
}

// Everything a reader of the store sees, as text: what a comparison could depend on.
std::string content_of(const std::string& path) {
  auto opened = StoreReader::open(path);
  if (!opened.is_ok()) return "ERROR " + opened.status().message();
  const StoreReader& store = **opened;
  std::ostringstream out;
  const StoreMetadata& m = store.metadata();
  out << store.format_version() << '|' << m.producer << '|' << m.backend << '|' << m.soc << '|'
      << m.model << '|' << m.created_unix_ns << '\n';
  for (const RunInfo& r : store.runs()) {
    out << "run " << r.id << '|' << r.name << '|' << r.complete << '|' << r.begin_unix_ns << '|'
        << r.end_unix_ns << '|' << r.tensor_count << '|' << r.dropped_count << '\n';
  }
  for (const TensorEntry& t : testing::all_tensors(store)) {
    out << "tensor " << t.seq << '|' << t.run_id << '|' << t.name << '|' << join(t.handles) << '|'
        << t.output_index << '|' << static_cast<int>(t.role) << '|' << t.name_matched << '|'
        << static_cast<uint32_t>(t.dtype) << '|' << join(t.dims) << '|'
        << join(std::vector<int>(t.axis_order.begin(), t.axis_order.end())) << '|'
        << join(t.quant.scales) << '|' << join(t.quant.offsets) << '|' << t.quant.axis << '|'
        << int(t.quant.bitwidth) << '|' << int(t.quant.convention) << '|' << t.stats.min << '|'
        << t.stats.max << '|' << t.stats.mean << '|' << t.stats.nan_count << '|'
        << t.stats.inf_count << '|' << t.capture_unix_ns << '\n';
    auto bytes = store.read_tensor(t);
    if (!bytes.is_ok()) return "ERROR " + bytes.status().message();
    out << "  data " << crc32c(bytes->data(), bytes->size()) << '\n';
  }
  for (const ProfileEvent& e : store.profile_events()) {
    out << "event " << e.run_id << '|' << e.name << '|' << join(e.handles) << '|' << e.start << '|'
        << e.end << '|' << e.unit << '\n';
  }
  for (const MemoryCheckpoint& c : store.memory_checkpoints()) {
    out << "memory " << c.run_id << '|' << c.label << '|' << c.bytes << '|' << c.time_unix_ns
        << '\n';
  }
  for (const GraphNode& n : store.graph()) {
    out << "node " << n.name << '|' << n.op_type << '|' << join(n.inputs) << '|' << join(n.outputs)
        << '|' << join(n.handles) << '\n';
  }
  out << "warnings " << join(store.warnings()) << '\n';
  return out.str();
}

enum class Outcome { kIdentical, kRefused, kChanged, kHang, kCrash };

struct Verdict {
  Outcome outcome;
  std::string detail;
};

// Reads `path` in a child process (a crash or a hang must not take the test down).
Verdict read_in_child(const std::string& path, const std::string& original) {
  int fds[2];
  if (pipe(fds) != 0) return {Outcome::kCrash, "pipe failed"};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const std::string content = content_of(path);
    size_t done = 0;
    while (done < content.size()) {
      const ssize_t n = write(fds[1], content.data() + done, content.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string content;
  char buffer[4096];
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  int status = 0;
  // Reading until EOF drains the pipe, so the child never blocks on a full one.
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  while (true) {
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      content.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (waitpid(pid, &status, WNOHANG) == pid) {
      for (ssize_t more; (more = read(fds[0], buffer, sizeof buffer)) > 0;) {
        content.append(buffer, static_cast<size_t>(more));
      }
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      close(fds[0]);
      return {Outcome::kHang, "no answer within the deadline"};
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  close(fds[0]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return {Outcome::kCrash, "signal " + std::to_string(WTERMSIG(status))};
  }
  if (content == original) return {Outcome::kIdentical, ""};
  if (content.rfind("ERROR " + path, 0) == 0 && content.find('\n') == std::string::npos) {
    return {Outcome::kRefused, content};
  }
  return {Outcome::kChanged, content};
}

// The sweep flips each byte in place in one copy of the store (a one-byte pwrite, and another to
// put it back once the child has read it), so the test process neither allocates nor writes a
// whole store per flip. It used to copy and rewrite the 1.2 MB store for every flip: under
// AddressSanitizer those copies filled its quarantine of freed memory, and every fork then
// copied the page tables of a process of hundreds of MB (about 60 ms a flip, 566 s for the
// sweep, 95% of it system time in fork). Every byte is flipped in the plain build; under the
// sanitizers (QD_TEST_SCALE, scripts/sanitize.sh) one byte in 1 / scale, spread over the whole
// file, so that every structure of the store is still damaged somewhere.
std::vector<size_t> offsets_to_flip(const std::string& bytes) {
  std::vector<size_t> offsets;
  for (size_t i = 0; i < bytes.size();) {
    size_t run = 0;
    while (i + run < bytes.size() && bytes[i + run] == '\0') ++run;
    if (run > kZeroRunSampled) {
      for (size_t k = 0; k < run; k += kZeroRunStride) offsets.push_back(i + k);
      offsets.push_back(i + run - 1);
      i += run;
    } else {
      offsets.push_back(i++);
    }
  }
  const size_t stride = testing::repetition_stride();
  std::vector<size_t> kept;
  for (size_t k = 0; k < offsets.size(); k += stride) kept.push_back(offsets[k]);
  return kept;
}

bool write_byte(int fd, size_t at, char byte) {
  return pwrite(fd, &byte, 1, static_cast<off_t>(at)) == 1;
}

TEST(StoreMutation, EveryByteFlippedGivesAnErrorOrTheSameContent) {
  testing::TempDir dir;
  const std::string original_path = dir.file("original.h5");
  write_small_store(original_path);
  const std::string original = content_of(original_path);
  ASSERT_EQ(original.rfind("ERROR", 0), std::string::npos) << original;
  std::ifstream in(original_path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = dir.file("mutated.h5");
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  const std::vector<size_t> offsets = offsets_to_flip(bytes);
  size_t counts[5] = {};
  std::vector<std::string> failures;
  for (const size_t at : offsets) {
    ASSERT_TRUE(write_byte(fd, at, static_cast<char>(bytes[at] ^ 0xFF))) << "byte " << at;
    const Verdict verdict = read_in_child(path, original);
    ASSERT_TRUE(write_byte(fd, at, bytes[at])) << "byte " << at;
    ++counts[static_cast<int>(verdict.outcome)];
    if (verdict.outcome >= Outcome::kChanged && failures.size() < 20) {
      const char* kinds[] = {"", "", "silently changed", "hang", "crash"};
      failures.push_back("byte " + std::to_string(at) + ": " +
                         kinds[static_cast<int>(verdict.outcome)] + ": " +
                         verdict.detail.substr(0, 300));
    }
  }
  close(fd);
  // Readers open the store read-only: the copy must be the original again, or later flips would
  // have tested another store.
  std::ifstream again(path, std::ios::binary);
  ASSERT_TRUE(std::string((std::istreambuf_iterator<char>(again)),
                          std::istreambuf_iterator<char>()) == bytes)
      << "a reader changed the store it read";
  std::ostringstream summary;
  summary << offsets.size() << " of " << bytes.size() << " bytes flipped: " << counts[0]
          << " identical, " << counts[1] << " refused, " << counts[2] << " changed, " << counts[3]
          << " hangs, " << counts[4] << " crashes";
  std::cout << summary.str() << '\n';
  EXPECT_EQ(counts[2] + counts[3] + counts[4], 0u) << summary.str() << '\n' << join(failures);
}

}  // namespace
}  // namespace qd
