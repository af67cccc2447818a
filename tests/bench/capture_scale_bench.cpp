// qd_capture_scale_bench [--runs 50,500,5000] [--tensors 200] [--elements 64] [--queue-mib 0]
//
// The capture hook on many runs of small tensors, an LLM decode loop: issue 22 wants 5,000 runs x
// 200 tensors captured in time linear in the data, with flat memory. Each run count is measured
// in two child processes of this program (so each has its own peak memory, VmHWM):
//  - capture: N runs through the C ABI (qd_begin_run, 200 x qd_capture_tensor, qd_end_run) into a
//    store with the hook's defaults (durable, BLOCK policy), then qd_session_close. Of every
//    tensor: 7 in 10 float32, 2 in 10 int8 and 1 in 10 uint16 with a per-tensor encoding, all of
//    `--elements` elements, named the ExecuTorch way (`_debugID_<handle>`, parsed by the hook).
//  - baseline: the same bytes, tensor by tensor, fwrite to a file in the same folder then fsync
//    (the least a durable capture can do), and memcpy into successive places of an arena as large
//    as the queue (the least a hook that keeps the bytes can do on the runtime thread).
// Per run count it prints the time on the runtime thread per tensor (inside qd_capture_tensor)
// against memcpy, the time per tensor from the first capture to the closed store against fwrite,
// both as a ratio to the first run count's (1.0 all the way down is linear), the peak memory of
// each child and the store's bytes per tensor; then, per tenth of the runs, the runtime thread's
// time per tensor and the VmHWM reached so far (flat memory: the peak stops growing once the queue
// is in use). Exits 1 when a child fails, 2 for bad usage. docs/performance.md records the numbers.
// Files go to $QD_BENCH_DIR (default: the system temporary directory).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_process.h"
#include "qnn_debug/capture.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTenths = 10;

struct Options {
  std::vector<uint32_t> runs = {50, 500, 5000};  // 5,000 runs take about 10 s
  uint32_t tensors = 200;
  uint64_t elements = 64;
  uint64_t queue_mib = 0;  // 0: the hook's default
  std::string child;       // "capture" or "baseline" in a child process; empty in the parent
  std::string path;        // the child's output file
};

std::optional<Options> parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--runs") {
      auto runs = qd::bench::parse_counts(value);
      if (!runs) return std::nullopt;
      options.runs = *runs;
    } else if (flag == "--tensors") {
      options.tensors = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
    } else if (flag == "--elements") {
      options.elements = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--queue-mib") {
      options.queue_mib = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--child") {
      options.child = value;
    } else if (flag == "--path") {
      options.path = value;
    } else {
      return std::nullopt;
    }
  }
  if (argc % 2 == 0 || options.tensors == 0 || options.elements == 0) return std::nullopt;
  return options;
}

// This process's peak resident memory (VmHWM), in MiB; -1 when /proc says nothing.
double vm_hwm_mib() {
  const std::string status = qd::bench::slurp("/proc/self/status");
  const size_t at = status.find("VmHWM:");
  return at == std::string::npos ? -1 : std::strtod(status.c_str() + at + 6, nullptr) / 1024.0;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---- the decode loop's tensors ----

struct Tensor {
  std::string name;
  uint32_t dtype = 562;  // QNN FLOAT_32
  uint64_t elements = 0;
  std::vector<uint8_t> bytes;
  double scale = 0;
  int32_t offset = 0;
};

// Tensor t of a run: float32 but for t % 10 in {3, 7} (int8) and t % 10 == 5 (uint16).
Tensor make_tensor(uint32_t t, uint64_t elements) {
  Tensor tensor;
  tensor.elements = elements;
  tensor.name = "aten_linear_default_" + std::to_string(t) + "_debugID_" + std::to_string(t + 1);
  const uint32_t kind = t % 10;
  if (kind == 3 || kind == 7) {
    tensor.dtype = 776;  // SFIXED_POINT_8
    tensor.scale = 0.02;
    tensor.bytes.resize(elements);
    for (uint64_t i = 0; i < elements; ++i) tensor.bytes[i] = uint8_t((i * 37 + t) % 251);
  } else if (kind == 5) {
    tensor.dtype = 1046;  // UFIXED_POINT_16
    tensor.scale = 1e-4;
    tensor.offset = -32768;
    std::vector<uint16_t> values(elements);
    for (uint64_t i = 0; i < elements; ++i) values[i] = uint16_t(i * 1021 + t * 7);
    tensor.bytes.assign(reinterpret_cast<uint8_t*>(values.data()),
                        reinterpret_cast<uint8_t*>(values.data() + elements));
  } else {
    std::vector<float> values(elements);
    for (uint64_t i = 0; i < elements; ++i) values[i] = std::sin(0.37f * float(i) + 0.11f * t);
    tensor.bytes.assign(reinterpret_cast<uint8_t*>(values.data()),
                        reinterpret_cast<uint8_t*>(values.data() + elements));
  }
  return tensor;
}

std::vector<Tensor> make_tensors(const Options& options) {
  std::vector<Tensor> out;
  for (uint32_t t = 0; t < options.tensors; ++t) out.push_back(make_tensor(t, options.elements));
  return out;
}

// Each run changes its tensors' first byte, as a decode step changes its activations (a cost the
// capture and its baseline share).
void next_step(std::vector<Tensor>& tensors, uint32_t run) {
  for (Tensor& tensor : tensors) tensor.bytes[0] = uint8_t(run);
}

// ---- child: the capture ----

// What the capture child measures, per tenth of the runs and in all.
struct CaptureTimes {
  std::array<double, kTenths> hook_seconds{};  // inside qd_capture_tensor
  std::array<double, kTenths> peak_mib{};      // VmHWM at the end of each tenth
  std::array<uint32_t, kTenths> runs{};        // runs in each tenth (some are empty below 10)
  double end_to_end = 0;                       // first begin_run to the closed store
};

qd_session* open_session(const Options& options) {
  qd_session_options session_options;
  qd_session_options_init(&session_options);
  session_options.path = options.path.c_str();
  session_options.queue_budget_bytes = options.queue_mib << 20;
  qd_session* session = nullptr;
  return qd_session_open(&session_options, &session) == QD_OK ? session : nullptr;
}

// One run through the hook; adds the time spent inside qd_capture_tensor to `*hook`.
bool capture_run(qd_session* session, const std::vector<Tensor>& tensors, uint32_t run,
                 double* hook) {
  const std::string step = "step" + std::to_string(run);
  if (qd_begin_run(session, step.c_str()) != QD_OK) return false;
  for (const Tensor& source : tensors) {
    const uint64_t dims[1] = {source.elements};
    qd_tensor tensor;
    qd_tensor_init(&tensor);
    tensor.name = source.name.c_str();
    tensor.dtype = source.dtype;
    tensor.rank = 1;
    tensor.dims = dims;
    tensor.data = source.bytes.data();
    tensor.nbytes = source.bytes.size();
    if (source.scale > 0) {
      tensor.quant.count = 1;
      tensor.quant.axis = -1;
      tensor.quant.scales = &source.scale;
      tensor.quant.offsets = &source.offset;
    }
    const auto start = Clock::now();
    const qd_status status = qd_capture_tensor(session, &tensor);
    *hook += seconds_since(start);
    if (status != QD_OK) return false;
  }
  return qd_end_run(session) == QD_OK;
}

int capture_child(const Options& options) {
  std::vector<Tensor> tensors = make_tensors(options);
  const uint32_t runs = options.runs.front();
  qd_session* session = open_session(options);
  if (session == nullptr) {
    std::fprintf(stderr, "capture: %s\n", qd_last_error());
    return 1;
  }
  CaptureTimes times;
  const auto start = Clock::now();
  for (uint32_t run = 0; run < runs; ++run) {
    next_step(tensors, run);
    const int tenth = int(uint64_t{run} * kTenths / runs);
    ++times.runs[tenth];
    if (!capture_run(session, tensors, run, &times.hook_seconds[tenth])) {
      std::fprintf(stderr, "capture: %s\n", qd_last_error());
      return 1;
    }
    if (uint64_t{run + 1} * kTenths / runs != uint64_t(tenth)) times.peak_mib[tenth] = vm_hwm_mib();
  }
  if (qd_session_close(session) != QD_OK) {
    std::fprintf(stderr, "capture: close: %s\n", qd_last_error());
    return 1;
  }
  times.end_to_end = seconds_since(start);
  std::printf("end_to_end=%.6f peak=%.2f store_bytes=%llu\n", times.end_to_end, vm_hwm_mib(),
              static_cast<unsigned long long>(std::filesystem::file_size(options.path)));
  for (int i = 0; i < kTenths; ++i) {
    std::printf("tenth%d_hook=%.6f tenth%d_peak=%.2f tenth%d_runs=%u\n", i, times.hook_seconds[i],
                i, times.peak_mib[i], i, times.runs[i]);
  }
  return 0;
}

// ---- child: the baselines ----

int baseline_child(const Options& options) {
  std::vector<Tensor> tensors = make_tensors(options);
  const uint32_t runs = options.runs.front();
  FILE* file = std::fopen(options.path.c_str(), "wb");
  if (file == nullptr) return 1;
  auto start = Clock::now();
  for (uint32_t run = 0; run < runs; ++run) {
    next_step(tensors, run);
    for (const Tensor& t : tensors) std::fwrite(t.bytes.data(), 1, t.bytes.size(), file);
  }
  const bool written = std::fflush(file) == 0 && fsync(fileno(file)) == 0;
  std::fclose(file);
  const double fwrite_seconds = seconds_since(start);
  const double fwrite_peak = vm_hwm_mib();
  std::filesystem::remove(options.path);
  if (!written) return 1;
  // memcpy into successive places of an arena as large as the queue (pre-faulted, as the ring).
  std::vector<uint8_t> arena(options.queue_mib == 0 ? uint64_t{64} << 20 : options.queue_mib << 20,
                             1);
  uint64_t at = 0;
  double memcpy_seconds = 0;
  for (uint32_t run = 0; run < runs; ++run) {
    next_step(tensors, run);
    for (const Tensor& t : tensors) {
      if (at + t.bytes.size() > arena.size()) at = 0;
      start = Clock::now();
      std::memcpy(arena.data() + at, t.bytes.data(), t.bytes.size());
      asm volatile("" : : "r"(arena.data()) : "memory");  // keep the copy
      memcpy_seconds += seconds_since(start);
      at += t.bytes.size();
    }
  }
  std::printf("fwrite=%.6f fwrite_peak=%.2f memcpy=%.6f\n", fwrite_seconds, fwrite_peak,
              memcpy_seconds);
  return 0;
}

// ---- parent ----

using Figures = std::map<std::string, double>;

// Runs this program as a child of the given kind; its `key=value` words, or nullopt on failure.
std::optional<Figures> run_child(const Options& options, const std::string& kind, uint32_t runs,
                                 const std::string& path) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string out = qd::bench::bench_path("qd_capture_scale_", kind + ".txt");
  const std::string err = qd::bench::bench_path("qd_capture_scale_", kind + ".err");
  const qd::bench::ProcessRun run = qd::bench::run_process(
      {self, "--child", kind, "--path", path, "--runs", std::to_string(runs), "--tensors",
       std::to_string(options.tensors), "--elements", std::to_string(options.elements),
       "--queue-mib", std::to_string(options.queue_mib)},
      out, err);
  std::stringstream words(qd::bench::slurp(out));
  const std::string error_text = qd::bench::slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  if (run.exit_code != 0) {
    std::fprintf(stderr, "qd_capture_scale_bench: %s child exited %d: %s", kind.c_str(),
                 run.exit_code, error_text.c_str());
    return std::nullopt;
  }
  Figures figures;
  std::string word;
  while (words >> word) {
    const size_t eq = word.find('=');
    if (eq != std::string::npos) figures[word.substr(0, eq)] = std::strtod(&word[eq + 1], nullptr);
  }
  return figures;
}

// The first run count's per-tensor times: the baseline the larger counts are measured against.
struct Baseline {
  double hook_us = 0;
  double end_to_end_us = 0;
};

void print_rows(uint32_t runs, uint64_t tensors, Figures& c, Figures& b, Baseline& first) {
  const double n = double(tensors);
  const double hook_us = 1e6 * [&] {
    double sum = 0;
    for (int i = 0; i < kTenths; ++i) sum += c["tenth" + std::to_string(i) + "_hook"];
    return sum;
  }() / n;
  const double e2e_us = 1e6 * c["end_to_end"] / n;
  if (first.hook_us == 0) first = {hook_us, e2e_us};
  std::printf(
      "%6u %9llu  hook %6.2f us/tensor (x%.2f) memcpy %5.3f us: x%5.1f | to closed store %6.2f "
      "us/tensor (x%.2f) fwrite %5.3f us: x%5.1f | peak %6.1f MiB (baseline child %5.1f) | "
      "store %5.0f B/tensor\n",
      runs, static_cast<unsigned long long>(tensors), hook_us, hook_us / first.hook_us,
      1e6 * b["memcpy"] / n, hook_us / (1e6 * b["memcpy"] / n), e2e_us,
      e2e_us / first.end_to_end_us, 1e6 * b["fwrite"] / n, c["end_to_end"] / b["fwrite"], c["peak"],
      b["fwrite_peak"], c["store_bytes"] / n);
  // Per tenth of the runs (empty tenths, below 10 runs, print "-").
  std::string hook_line, peak_line;
  for (int i = 0; i < kTenths; ++i) {
    const std::string tenth = "tenth" + std::to_string(i);
    const double tenth_tensors = c[tenth + "_runs"] * (n / runs);
    char text[64];
    std::snprintf(text, sizeof text, " %.2f", 1e6 * c[tenth + "_hook"] / tenth_tensors);
    hook_line += tenth_tensors > 0 ? text : " -";
    std::snprintf(text, sizeof text, " %.0f", c[tenth + "_peak"]);
    peak_line += tenth_tensors > 0 ? text : " -";
  }
  std::printf("%6s per tenth of the runs: hook us/tensor%s; VmHWM MiB%s\n", "", hook_line.c_str(),
              peak_line.c_str());
}

int parent(const Options& options) {
  std::printf(
      "capture hook, N runs x %u tensors of %llu elements (7/10 float32, 2/10 int8, 1/10 uint16), "
      "queue %s\n",
      options.tensors, static_cast<unsigned long long>(options.elements),
      options.queue_mib == 0 ? "default" : (std::to_string(options.queue_mib) + " MiB").c_str());
  Baseline first;
  for (const uint32_t runs : options.runs) {
    const std::string store = qd::bench::bench_path("qd_capture_scale_", "store.h5");
    const std::string raw = qd::bench::bench_path("qd_capture_scale_", "raw.bin");
    std::optional<Figures> baseline = run_child(options, "baseline", runs, raw);
    std::optional<Figures> capture = run_child(options, "capture", runs, store);
    std::filesystem::remove(store);
    if (!baseline || !capture) return 1;
    print_rows(runs, uint64_t{runs} * options.tensors, *capture, *baseline, first);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Options> options = parse_options(argc, argv);
  if (!options || (!options->child.empty() && options->path.empty())) {
    std::fprintf(
        stderr,
        "usage: qd_capture_scale_bench [--runs 50,500,5000] [--tensors 200] [--elements 64] "
        "[--queue-mib 0]\n");
    return 2;
  }
  if (options->child == "capture") return capture_child(*options);
  if (options->child == "baseline") return baseline_child(*options);
  if (!options->child.empty()) return 2;
  return parent(*options);
}
