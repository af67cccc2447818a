// qd_decoder_bench [--layers 28] [--prefill 64] [--cache 512] [--steps 16] [--vocab 151936]
//                  [--bits 16] [--repeats 3] [--memory-steps 16,32] [--dir DIR] [--keep] [--reuse]
//
// `qnn-debug diff` on a decoder at full size (issue 36): a Qwen3-0.6B-class generation (hidden
// 1024, 16 query / 8 KV heads of 128, FFN 3072, a 512-slot KV cache stored whole in every run,
// masked attention scores, logits over a 151,936-token vocabulary; tests/common/decoder_stores.h),
// the prefill as run 0 and one run per decode step, a float32 reference and a clean int16 device.
// In the same run, the baselines and the diff, each --repeats times (medians, with the lowest and
// highest): memcpy of as many bytes as both stores' tensor data on one thread, `cat` of both store
// files to /dev/null from the page cache (read once before), two floors of a verified diff on one
// thread (every tensor read and held to its CRC-32C as the diff reads it, with `pread` at the
// chunks' addresses; and the CRC-32C of both files read in place through a mapping, no copy: what
// any diff that checks the stored bytes pays before its first figure), then
// `qnn-debug diff REF DEV --stats`
// with --jobs 1 and --jobs 2, the terminal summary alone and with --json: GB/s of tensor data
// bytes, the ratio to memcpy, the peak memory (--stats, the child's VmHWM), the JSON's size per
// pair. Then the peak memory again at each count of --memory-steps (a pair written for each; flat
// in the steps is the goal). The stores (about 3 GB at the defaults) go to --dir (default: a fresh
// folder in the temp folder) and are removed at the end unless --keep; --reuse measures a pair
// that --keep left in --dir instead of writing it again. Exits 1 when a diff does
// not pass (exit 0: the device is clean) or the stores cannot be written, 2 for bad usage.
// docs/performance.md, "A decoder at full size", records the numbers.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../common/decoder_stores.h"
#include "bench_process.h"
#include "qnn_debug/base/checksum.h"
#include "qnn_debug/etdump/store_reader.h"

namespace {

struct Options {
  qd::testing::DecoderShape shape;
  unsigned repeats = 3;
  std::vector<uint32_t> memory_steps = {16, 32};
  std::string dir;
  bool keep = false;
  bool reuse = false;  // a pair already in --dir is measured, not written again
};

bool parse_number(const char* text, uint32_t& out) {
  char* end = nullptr;
  const unsigned long value = std::strtoul(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value == 0 || value > 0xFFFFFFFFul) return false;
  out = static_cast<uint32_t>(value);
  return true;
}

bool parse_flag(Options& o, const std::string& flag, const char* value) {
  uint32_t* numbers[] = {&o.shape.layers, &o.shape.prefill, &o.shape.cache, &o.shape.steps,
                         &o.shape.vocab};
  const char* names[] = {"--layers", "--prefill", "--cache", "--steps", "--vocab"};
  for (size_t i = 0; i < std::size(names); ++i) {
    if (flag == names[i]) return parse_number(value, *numbers[i]);
  }
  uint32_t number = 0;
  if (flag == "--bits") {
    o.shape.bits = parse_number(value, number) ? number : 0;
    return o.shape.bits == 8 || o.shape.bits == 16;
  }
  if (flag == "--repeats") {
    o.repeats = parse_number(value, number) ? number : 0;
    return o.repeats > 0;
  }
  if (flag == "--memory-steps") {
    auto steps = qd::bench::parse_counts(value);
    if (steps) o.memory_steps = *steps;
    return steps.has_value();
  }
  if (flag == "--dir") {
    o.dir = value;
    return true;
  }
  return false;
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--keep" || flag == "--reuse") {
      (flag == "--keep" ? options.keep : options.reuse) = true;
    } else if (i + 1 >= argc || !parse_flag(options, flag, argv[++i])) {
      return std::nullopt;
    }
  }
  const auto& s = options.shape;
  uint32_t most_steps = s.steps;
  for (uint32_t steps : options.memory_steps) most_steps = std::max(most_steps, steps);
  if (s.prefill + most_steps > s.cache) return std::nullopt;
  return options;
}

// A fresh folder for the stores: --dir's, or one made in the temp folder.
std::string make_dir(const Options& options) {
  if (!options.dir.empty()) {
    std::filesystem::create_directories(options.dir);
    return options.dir;
  }
  std::string pattern = (std::filesystem::temp_directory_path() / "qd_decoder_XXXXXX").string();
  return mkdtemp(pattern.data()) ? pattern : "";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One thread copying `bytes` bytes from one buffer into another, both touched first (no page
// faults in the time), a piece of at most 1 GiB per call.
double memcpy_seconds(uint64_t bytes) {
  const uint64_t piece = std::min<uint64_t>(bytes, uint64_t{1} << 30);
  std::unique_ptr<char[]> from(new char[piece]), to(new char[piece]);
  std::memset(from.get(), 1, piece);
  std::memset(to.get(), 2, piece);
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t done = 0; done < bytes; done += piece) {
    std::memcpy(to.get(), from.get(), std::min(piece, bytes - done));
  }
  const double seconds = seconds_since(start);
  if (to[piece / 2] != 1) std::fprintf(stderr, "memcpy copied nothing\n");
  return seconds;
}

struct Stores {
  std::string ref, device;
  qd::testing::DecoderStores written;
};

// What a kept pair (--reuse) holds: its pairs and data bytes, as written.
qd::Result<qd::testing::DecoderStores> read_totals(const Stores& stores) {
  qd::testing::DecoderStores totals;
  for (const std::string* path : {&stores.ref, &stores.device}) {
    QD_ASSIGN_OR_RETURN(auto reader, qd::StoreReader::open(*path));
    uint64_t bytes = 0;
    QD_RETURN_IF_ERROR(reader->for_each_tensor([&](const qd::TensorEntry& tensor) {
      bytes += tensor.data_nbytes;
      return qd::Status::ok();
    }));
    (path == &stores.ref ? totals.ref_bytes : totals.device_bytes) = bytes;
    totals.pairs = reader->tensor_count();
  }
  return totals;
}

std::optional<Stores> write_stores(const std::string& dir, const qd::testing::DecoderShape& shape,
                                   bool reuse) {
  Stores stores{dir + "/ref_" + std::to_string(shape.steps) + ".h5",
                dir + "/dev_" + std::to_string(shape.steps) + ".h5",
                {}};
  const auto start = std::chrono::steady_clock::now();
  const bool kept =
      reuse && std::filesystem::exists(stores.ref) && std::filesystem::exists(stores.device);
  auto written = kept ? read_totals(stores)
                      : qd::testing::write_decoder_pair(stores.ref, stores.device, shape);
  if (!written.is_ok()) {
    std::fprintf(stderr, "qd_decoder_bench: %s\n", written.status().message().c_str());
    return std::nullopt;
  }
  stores.written = written.value();
  std::printf(
      "%u decode steps: %llu pairs, %.2f GB of tensor data (reference %.2f, device %.2f), "
      "files %.2f + %.2f GB, %s in %.1f s\n",
      shape.steps, static_cast<unsigned long long>(stores.written.pairs),
      double(stores.written.ref_bytes + stores.written.device_bytes) / 1e9,
      double(stores.written.ref_bytes) / 1e9, double(stores.written.device_bytes) / 1e9,
      double(std::filesystem::file_size(stores.ref)) / 1e9,
      double(std::filesystem::file_size(stores.device)) / 1e9, kept ? "kept" : "written",
      seconds_since(start));
  std::fflush(stdout);
  return stores;
}

double cat_seconds(const Stores& stores) {
  return qd::bench::run_process({"cat", stores.ref, stores.device}, "/dev/null").seconds;
}

// The first floor: every tensor of both stores read as the diff reads it (`pread` at the chunks'
// addresses, predicted where the writer appended them, 256 KiB at a time as `diff` streams) and
// held to its CRC-32C.
qd::Result<uint32_t> streamed_crc(const qd::StoreReader& reader, const qd::TensorEntry& tensor,
                                  std::vector<uint8_t>& piece, bool& predicted) {
  uint32_t crc = 0;
  for (uint64_t done = 0; done < tensor.data_nbytes;) {
    const size_t size = std::min<uint64_t>(piece.size(), tensor.data_nbytes - done);
    QD_RETURN_IF_ERROR(
        reader.stream_tensor_range(tensor, done, std::span(piece.data(), size), predicted));
    crc = qd::crc32c_extend(crc, piece.data(), size);
    done += size;
  }
  return crc;
}

// A tensor read at a wrong prediction is read again where the index puts it, as `diff` does.
qd::Status verified_read(const std::string& path, std::vector<uint8_t>& piece) {
  QD_ASSIGN_OR_RETURN(auto reader, qd::StoreReader::open(path));
  return reader->for_each_tensor([&](const qd::TensorEntry& tensor) -> qd::Status {
    bool predicted = false;
    QD_ASSIGN_OR_RETURN(uint32_t crc, streamed_crc(*reader, tensor, piece, predicted));
    if (crc != tensor.data_crc32c && predicted && reader->relocate(tensor)) {
      QD_ASSIGN_OR_RETURN(crc, streamed_crc(*reader, tensor, piece, predicted));
    }
    if (crc == tensor.data_crc32c) return qd::Status::ok();
    return qd::error(qd::ErrorCode::kCorrupt, path + ": tensor " + tensor.name + ": a bad CRC");
  });
}

double verified_read_seconds(const Stores& stores) {
  std::vector<uint8_t> piece(size_t{256} << 10);
  const auto start = std::chrono::steady_clock::now();
  for (const std::string* path : {&stores.ref, &stores.device}) {
    const qd::Status read = verified_read(*path, piece);
    if (!read.is_ok()) std::fprintf(stderr, "%s\n", read.message().c_str());
  }
  return seconds_since(start);
}

// The second floor: the CRC-32C of each whole file read in place through a read-only mapping,
// 64 MiB at a time (each window unmapped after use, as a diff reading in place would).
double crc_in_place_seconds(const Stores& stores) {
  constexpr uint64_t kWindow = uint64_t{64} << 20;
  const auto start = std::chrono::steady_clock::now();
  uint32_t crc = 0;
  for (const std::string* path : {&stores.ref, &stores.device}) {
    const int fd = open(path->c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0) continue;
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    for (uint64_t at = 0; at < size; at += kWindow) {
      const size_t length = std::min(kWindow, size - at);
      void* window = mmap(nullptr, length, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, off_t(at));
      if (window == MAP_FAILED) break;
      crc = qd::crc32c_extend(crc, window, length);
      munmap(window, length);
    }
    close(fd);
  }
  const double seconds = seconds_since(start);
  if (crc == 0x12345678u) std::printf(" ");  // the CRC is used: the loop is not dropped
  return seconds;
}

// One diff of the stores: its time, exit code, peak memory and JSON report's size.
struct Diff {
  unsigned jobs = 1;
  bool json = false;
};
struct DiffRun {
  int exit_code = -1;
  double seconds = 0, peak_mib = -1;
  uint64_t json_bytes = 0;
};

DiffRun run_diff(const Stores& stores, const std::string& dir, const Diff& diff) {
  std::vector<std::string> args = {
      QD_CLI, "diff", stores.ref, stores.device, "--stats", "--jobs", std::to_string(diff.jobs)};
  const std::string json = dir + "/report.json", err = dir + "/stderr.txt";
  if (diff.json) {
    args.push_back("--json");
    args.push_back(json);
  }
  const qd::bench::ProcessRun run = qd::bench::run_process(args, "/dev/null", err);
  DiffRun out{run.exit_code, run.seconds, qd::bench::reported_peak_mib(qd::bench::slurp(err)), 0};
  if (run.exit_code != 0) {
    std::fprintf(stderr, "qnn-debug diff exited %d:\n%s\n", run.exit_code,
                 qd::bench::slurp(err).c_str());
  }
  std::error_code ignored;
  if (diff.json) out.json_bytes = std::filesystem::file_size(json, ignored);
  std::filesystem::remove(json, ignored);
  std::filesystem::remove(err, ignored);
  return out;
}

// The median of a few measurements, with the lowest and the highest.
struct Spread {
  double median, low, high;
};
Spread spread(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return {values[values.size() / 2], values.front(), values.back()};
}

const Diff kDiffs[] = {{1, false}, {2, false}, {1, true}, {2, true}};

struct Measured {
  std::vector<double> memcpy_s, cat_s, verified_read_s, crc_in_place_s;
  std::vector<DiffRun> diffs[std::size(kDiffs)];
};

void print_rate(const char* what, const std::vector<double>& seconds, double gb, double memcpy_s) {
  const Spread s = spread(seconds);
  std::printf("  %-24s %7.3f s (%.3f - %.3f)  %6.2f GB/s  x%.3f memcpy\n", what, s.median, s.low,
              s.high, gb / s.median, memcpy_s / s.median);
}

void print_measured(const Measured& m, const Stores& stores) {
  const uint64_t bytes = stores.written.ref_bytes + stores.written.device_bytes;
  const double gb = double(bytes) / 1e9, memcpy_s = spread(m.memcpy_s).median;
  std::printf("medians of %zu rounds over %.3f GB of tensor data, %llu pairs:\n", m.memcpy_s.size(),
              gb, static_cast<unsigned long long>(stores.written.pairs));
  print_rate("memcpy, one thread", m.memcpy_s, gb, memcpy_s);
  print_rate("cat REF DEV >/dev/null", m.cat_s, gb, memcpy_s);
  print_rate("floor: read + CRC", m.verified_read_s, gb, memcpy_s);
  print_rate("floor: CRC in place", m.crc_in_place_s, gb, memcpy_s);
  for (size_t d = 0; d < std::size(kDiffs); ++d) {
    std::vector<double> seconds, peaks;
    for (const DiffRun& run : m.diffs[d]) {
      seconds.push_back(run.seconds);
      peaks.push_back(run.peak_mib);
    }
    const std::string what =
        "diff --jobs " + std::to_string(kDiffs[d].jobs) + (kDiffs[d].json ? " --json" : "");
    print_rate(what.c_str(), seconds, gb, memcpy_s);
    std::printf("  %-24s peak memory %.1f MiB", "", spread(peaks).high);
    const uint64_t json = m.diffs[d].back().json_bytes;
    if (kDiffs[d].json) {
      std::printf(", JSON %.1f MB, %.0f B/pair", double(json) / 1e6,
                  double(json) / double(stores.written.pairs));
    }
    std::printf("\n");
  }
}

// Every baseline and diff, round after round (so that a noisy minute touches each alike).
bool measure(const Options& options, const Stores& stores, const std::string& dir, Measured& m) {
  const uint64_t bytes = stores.written.ref_bytes + stores.written.device_bytes;
  cat_seconds(stores);  // the page cache warm
  bool passed = true;
  for (unsigned round = 0; round < options.repeats; ++round) {
    m.memcpy_s.push_back(memcpy_seconds(bytes));
    m.cat_s.push_back(cat_seconds(stores));
    m.verified_read_s.push_back(verified_read_seconds(stores));
    m.crc_in_place_s.push_back(crc_in_place_seconds(stores));
    for (size_t d = 0; d < std::size(kDiffs); ++d) {
      m.diffs[d].push_back(run_diff(stores, dir, kDiffs[d]));
      passed = passed && m.diffs[d].back().exit_code == 0;
    }
  }
  return passed;
}

void print_memory(uint32_t steps, const DiffRun& summary, const DiffRun& json) {
  std::printf("  %u steps (%u runs): peak memory %.1f MiB, with --json %.1f MiB (JSON %.1f MB)\n",
              steps, steps + 1, summary.peak_mib, json.peak_mib, double(json.json_bytes) / 1e6);
}

// The peak memory of the diff (--jobs 1, the summary and --json) at another number of steps.
bool measure_memory(const Options& options, uint32_t steps, const std::string& dir) {
  qd::testing::DecoderShape shape = options.shape;
  shape.steps = steps;
  const std::optional<Stores> stores = write_stores(dir, shape, options.reuse);
  if (!stores) return false;
  cat_seconds(*stores);
  const DiffRun summary = run_diff(*stores, dir, {1, false});
  const DiffRun json = run_diff(*stores, dir, {1, true});
  print_memory(steps, summary, json);
  if (!options.keep) {
    std::filesystem::remove(stores->ref);
    std::filesystem::remove(stores->device);
  }
  return summary.exit_code == 0 && json.exit_code == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Options> options = parse_options(argc, argv);
  if (!options) {
    std::fprintf(stderr,
                 "usage: qd_decoder_bench [--layers 28] [--prefill 64] [--cache 512] [--steps 16] "
                 "[--vocab 151936] [--bits 16] [--repeats 3] [--memory-steps 16,32] [--dir DIR] "
                 "[--keep] [--reuse]\n(the prefill and the most steps must fit the cache)\n");
    return 2;
  }
  const std::string dir = make_dir(*options);
  if (dir.empty()) return 1;
  const auto& s = options->shape;
  std::printf(
      "decoder: %u layers, hidden %u, %u/%u heads of %u, FFN %u, prefill %u, cache %u, "
      "vocab %u, int%u device; stores in %s\n",
      s.layers, s.hidden, s.q_heads, s.kv_heads, s.head_dim, s.ffn, s.prefill, s.cache, s.vocab,
      s.bits, dir.c_str());
  const std::optional<Stores> stores = write_stores(dir, s, options->reuse);
  if (!stores) return 1;
  Measured measured;
  bool passed = measure(*options, *stores, dir, measured);
  print_measured(measured, *stores);
  if (!options->keep) {
    std::filesystem::remove(stores->ref);
    std::filesystem::remove(stores->device);
  }
  std::printf("peak memory by decode steps (diff --jobs 1):\n");
  for (uint32_t steps : options->memory_steps) {
    if (steps == s.steps) {  // measured above: the first round's --jobs 1 runs
      print_memory(steps, measured.diffs[0].front(), measured.diffs[2].front());
    } else {
      passed = measure_memory(*options, steps, dir) && passed;
    }
  }
  if (!options->keep && options->dir.empty()) std::filesystem::remove_all(dir);
  return passed ? 0 : 1;
}
