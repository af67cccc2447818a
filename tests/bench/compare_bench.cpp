// Comparator benchmarks, each as a ratio against a baseline from the same run
// (docs/performance.md records the numbers):
//  - PairThroughput: bytes of a float32 reference + int8, float32 or int16 device pair compared
//    per second, read from real stores, against memcpy bandwidth over the same bytes. Target >= 0.5
//    on one thread.
//  - DiffOnePair/<device>/<jobs>: `qnn-debug diff --jobs N` end to end on one large pair (its
//    slices spread over the threads), warm page cache, against single-thread memcpy over the same
//    bytes. Target >= 0.9 on 2 cores.
//  - StoreJobs/<jobs>: a whole store pair (64 tensors) on N threads, to show the scaling.
//  - PeakMemory: peak resident memory of `qnn-debug diff` on a pair holding one tensor far larger
//    than the streaming budget, against the same command on a pair of tiny tensors (as the
//    command reports it with --stats).
//  - VersusNumpy: wall time of `qnn-debug diff --jobs 1` against tests/bench/numpy_metrics.py
//    (h5py + numpy, float64) on the same stores, computing the same metrics (second argument 0)
//    or the SQNR alone (1); both must agree on every SQNR.
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_main.h"
#include "bench_process.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "compare_testing.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/etdump/store_writer.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace qd;

using bench::ProcessRun;
using bench::reported_peak_mib;
using bench::run_process;
using bench::slurp;

std::string bench_path(const std::string& name) { return bench::bench_path("qd_cmp_", name); }

// The device side of a benchmark pair.
enum class Device { kInt8 = 0, kFloat32 = 1, kInt16 = 2 };

// Writes `tensors` pairs of `elements` values: a float32 reference and a device tensor that is
// float32, or int8 or int16 per-tensor quantized. False if any write failed.
bool write_pair(const std::string& ref_path, const std::string& device_path, int tensors,
                uint64_t elements, Device kind) {
  auto ref_writer = StoreWriter::create(ref_path, {});
  auto device_writer = StoreWriter::create(device_path, {});
  if (!ref_writer.is_ok() || !device_writer.is_ok()) return false;
  StoreWriter& ref = **ref_writer;
  StoreWriter& device = **device_writer;
  bool ok = true;
  std::vector<float> r(elements);
  std::vector<int8_t> q(elements);
  std::vector<int16_t> q16(kind == Device::kInt16 ? elements : 0);
  const double scale = 2.0 / 127, scale16 = 2.0 / 32767;
  for (int t = 0; t < tensors; ++t) {
    for (uint64_t i = 0; i < elements; ++i) {
      r[i] = static_cast<float>(std::sin(0.01 * double(i) + t) * 2.0);
      q[i] = static_cast<int8_t>(std::nearbyint(r[i] / scale));
      if (!q16.empty()) q16[i] = static_cast<int16_t>(std::nearbyint(r[i] / scale16));
    }
    TensorRecord rr;
    rr.name = "op__debugID_" + std::to_string(t + 1);
    rr.handles = {t + 1};
    rr.dims = {elements};
    TensorRecord dr = rr;
    const auto* ref_bytes = reinterpret_cast<const uint8_t*>(r.data());
    ok = ok && ref.append_tensor(rr, {ref_bytes, elements * 4}, 0).is_ok();
    if (kind == Device::kFloat32) {
      for (uint64_t i = 0; i < elements; ++i) r[i] = static_cast<float>(q[i] * scale);
      ok = ok && device.append_tensor(dr, {ref_bytes, elements * 4}, 0).is_ok();
      continue;
    }
    if (kind == Device::kInt16) {
      dr.dtype = DType::kSFixed16;
      dr.quant.scales = {scale16};
      dr.quant.offsets = {0};
      ok = ok &&
           device.append_tensor(dr, {reinterpret_cast<const uint8_t*>(q16.data()), elements * 2}, 0)
               .is_ok();
      continue;
    }
    dr.dtype = DType::kSFixed8;
    dr.quant.scales = {scale};
    dr.quant.offsets = {0};
    const std::span<const uint8_t> device_bytes(reinterpret_cast<const uint8_t*>(q.data()),
                                                elements);
    ok = ok && device.append_tensor(dr, device_bytes, 0).is_ok();
  }
  return ref.close().is_ok() && device.close().is_ok() && ok;
}

// The pair is written by a child process: the benchmark process never holds the tensors, so the
// peak memory a spawned `qnn-debug` inherits from it (Linux carries the parent's high-water mark
// across vfork + exec) stays small.
bool write_pair_in_child(const std::string& ref_path, const std::string& device_path, int tensors,
                         uint64_t elements, Device kind) {
  const pid_t pid = fork();
  if (pid == 0) _exit(write_pair(ref_path, device_path, tensors, elements, kind) ? 0 : 1);
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

struct Pair {
  static inline int count = 0;  // distinct files for pairs alive at the same time
  std::string tag = std::to_string(count++);
  std::string ref_path = bench_path(tag + "_ref.h5"), device_path = bench_path(tag + "_dev.h5");
  bool written;
  Pair(int tensors, uint64_t elements, Device kind = Device::kInt8)
      : written(write_pair_in_child(ref_path, device_path, tensors, elements, kind)) {}
  ~Pair() {
    std::filesystem::remove(ref_path);
    std::filesystem::remove(device_path);
  }
};

// Single-thread memcpy of `bytes`, in seconds: the baseline of the ratios.
double memcpy_seconds(std::vector<uint8_t>& source, std::vector<uint8_t>& target) {
  const auto start = Clock::now();
  std::memcpy(target.data(), source.data(), source.size());
  benchmark::ClobberMemory();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// range(0): elements; range(1): the Device.
void PairThroughput(benchmark::State& state) {
  const auto elements = static_cast<uint64_t>(state.range(0));
  Pair files(1, elements, static_cast<Device>(state.range(1)));
  if (!files.written) return state.SkipWithError("cannot write the stores");
  auto ref = StoreReader::open(files.ref_path).value();
  auto device = StoreReader::open(files.device_path).value();
  const TensorEntry rt = ref->all_tensors().value().at(0);
  const TensorEntry dt = device->all_tensors().value().at(0);
  const compare::LayoutPlan layout = compare::plan_layout(rt, dt).value();
  const uint64_t bytes = rt.data_nbytes + dt.data_nbytes;
  std::vector<uint8_t> source(bytes, 1), target(bytes, 2);
  double compare_seconds = 0, memcpy_total = 0;
  for (auto _ : state) {
    memcpy_total += memcpy_seconds(source, target);
    const auto start = Clock::now();
    auto m = compare::compare_tensors(*ref, rt, *device, dt, layout, {});
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    compare_seconds += seconds;
    state.SetIterationTime(seconds);
    if (!m.is_ok()) state.SkipWithError(m.status().message().c_str());
  }
  const double total = double(bytes) * double(state.iterations());
  state.counters["compare_GBps"] = total / compare_seconds / 1e9;
  state.counters["memcpy_GBps"] = total / memcpy_total / 1e9;
  state.counters["ratio_vs_memcpy"] = memcpy_total / compare_seconds;
}
BENCHMARK(PairThroughput)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->ArgNames({"elements", "device"})
    ->ArgsProduct({{1 << 20, 1 << 24}, {0, 1, 2}});

// `qnn-debug diff` exits 0 (pass) or 1 (policy failed): both are a finished comparison.
bool diff_finished(const ProcessRun& run) { return run.exit_code == 0 || run.exit_code == 1; }

// range(0): the Device; range(1): --jobs. One pair of 2^26 elements (16 slices), read once
// before timing so that the page cache is warm.
void DiffOnePair(benchmark::State& state) {
  constexpr uint64_t kElements = uint64_t{1} << 26;
  static std::map<int64_t, std::unique_ptr<Pair>> pairs;  // one per device kind, kept across jobs
  std::unique_ptr<Pair>& files = pairs[state.range(0)];
  if (!files) files = std::make_unique<Pair>(1, kElements, static_cast<Device>(state.range(0)));
  if (!files->written) return state.SkipWithError("cannot write the stores");
  const uint64_t bytes =
      std::filesystem::file_size(files->ref_path) + std::filesystem::file_size(files->device_path);
  const std::vector<std::string> command = {QD_CLI,          "diff",
                                            files->ref_path, files->device_path,
                                            "--jobs",        std::to_string(state.range(1))};
  const std::string err = bench_path("diff_one.err");
  if (!diff_finished(run_process(command, "/dev/null", err))) {
    return state.SkipWithError("diff failed");
  }
  std::vector<uint8_t> source(bytes, 1), target(bytes, 2);
  double diff_total = 0, memcpy_total = 0;
  for (auto _ : state) {
    memcpy_total += memcpy_seconds(source, target);
    const ProcessRun run = run_process(command, "/dev/null", err);
    if (!diff_finished(run)) state.SkipWithError("diff failed");
    diff_total += run.seconds;
    state.SetIterationTime(run.seconds);
  }
  std::filesystem::remove(err);
  state.counters["diff_GBps"] = double(bytes) * double(state.iterations()) / diff_total / 1e9;
  state.counters["ratio_vs_memcpy"] = memcpy_total / diff_total;
}
BENCHMARK(DiffOnePair)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->ArgNames({"device", "jobs"})
    ->ArgsProduct({{0, 1, 2}, {1, 2}});

void StoreJobs(benchmark::State& state) {
  static Pair* files = new Pair(64, 1 << 20);  // kept across job counts, removed at exit
  static const bool cleanup = [] {
    std::atexit([] { delete files; });
    return true;
  }();
  (void)cleanup;
  if (!files->written) return state.SkipWithError("cannot write the stores");
  auto ref = StoreReader::open(files->ref_path).value();
  auto device = StoreReader::open(files->device_path).value();
  compare::CompareOptions options;
  options.jobs = static_cast<unsigned>(state.range(0));
  for (auto _ : state) {
    auto result = compare::compare_stores(*ref, *device, options);
    if (!result.is_ok()) state.SkipWithError(result.status().message().c_str());
  }
  const double bytes = 64.0 * (1 << 20) * 5;  // float32 + int8 per element
  state.counters["GBps"] =
      benchmark::Counter(bytes * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(StoreJobs)->Unit(benchmark::kMillisecond)->Arg(1)->Arg(2)->UseRealTime();

void PeakMemory(benchmark::State& state) {
  const auto elements = static_cast<uint64_t>(state.range(0));
  Pair large(1, elements), tiny(1, 1024);
  if (!large.written || !tiny.written) return state.SkipWithError("cannot write the stores");
  const std::string err = bench_path("diff.err");
  double big_mib = -1, tiny_mib = -1;
  for (auto _ : state) {
    const ProcessRun big = run_process(
        {QD_CLI, "diff", large.ref_path, large.device_path, "--stats"}, "/dev/null", err);
    big_mib = reported_peak_mib(slurp(err));
    const ProcessRun small =
        run_process({QD_CLI, "diff", tiny.ref_path, tiny.device_path, "--stats"}, "/dev/null", err);
    tiny_mib = reported_peak_mib(slurp(err));
    state.SetIterationTime(big.seconds);
    if (!diff_finished(big) || !diff_finished(small) || big_mib < 0 || tiny_mib < 0) {
      state.SkipWithError("diff failed");
    }
  }
  std::filesystem::remove(err);
  state.counters["tensor_MiB"] = double(elements) * 5 / (1 << 20);
  state.counters["peak_MiB"] = big_mib;
  state.counters["tiny_pair_peak_MiB"] = tiny_mib;
  state.counters["extra_MiB"] = big_mib - tiny_mib;
}
// 2^28 elements: 1 GiB of float32 reference + 256 MiB of int8 device, 4096 streaming chunks.
BENCHMARK(PeakMemory)
    ->Unit(benchmark::kSecond)
    ->UseManualTime()
    ->Iterations(1)
    ->Arg(1 << 20)
    ->Arg(1 << 28);

// Every tensor name -> SQNR in a qnn-debug JSON report, and in the numpy script's output.
std::map<std::string, double> report_sqnr(const std::string& report_path) {
  std::map<std::string, double> sqnr;
  const auto report = nlohmann::json::parse(slurp(report_path), nullptr, false);
  if (report.is_discarded()) return sqnr;
  for (const auto& group : report["runs"][0]["groups"]) {
    for (const auto& pair : group["pairs"]) {
      sqnr[pair["reference"]["name"]] = pair["metrics"]["sqnr_db"].get<double>();
    }
  }
  return sqnr;
}

std::map<std::string, double> numpy_sqnr(const std::string& output_path) {
  std::map<std::string, double> sqnr;
  const auto output = nlohmann::json::parse(slurp(output_path), nullptr, false);
  if (output.is_discarded()) return sqnr;
  for (const auto& [name, value] : output.items()) sqnr[name] = value.get<double>();
  return sqnr;
}

bool same_sqnr(const std::map<std::string, double>& a, const std::map<std::string, double>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (const auto& [name, value] : a) {
    auto other = b.find(name);
    if (other == b.end() || std::fabs(other->second - value) > 1e-6 * std::fabs(value)) {
      return false;
    }
  }
  return true;
}

void VersusNumpy(benchmark::State& state) {
  const auto elements = static_cast<uint64_t>(state.range(0));
  Pair files(8, elements);
  if (!files.written) return state.SkipWithError("cannot write the stores");
  const std::string report = bench_path("report.json"), numpy_out = bench_path("numpy.json");
  const std::string devnull = "/dev/null";
  double ours = 0, theirs = 0;
  for (auto _ : state) {
    const ProcessRun q = run_process(
        {QD_CLI, "diff", files.ref_path, files.device_path, "--jobs", "1", "--json", report},
        devnull);
    std::vector<std::string> numpy = {QD_PYTHON, QD_NUMPY_SCRIPT, files.ref_path,
                                      files.device_path};
    if (state.range(1) != 0) numpy.push_back("--sqnr-only");
    const ProcessRun p = run_process(numpy, numpy_out);
    ours += q.seconds;
    theirs += p.seconds;
    state.SetIterationTime(q.seconds);
    if (!diff_finished(q) || p.exit_code != 0) {
      state.SkipWithError("a run failed");
    } else if (!same_sqnr(report_sqnr(report), numpy_sqnr(numpy_out))) {
      state.SkipWithError("qnn-debug and numpy disagree on an SQNR");
    }
  }
  std::filesystem::remove(report);
  std::filesystem::remove(numpy_out);
  state.counters["qnn_debug_s"] = ours / double(state.iterations());
  state.counters["numpy_s"] = theirs / double(state.iterations());
  state.counters["speedup"] = theirs / ours;
}
// 8 pairs of float32 reference + int8 device tensors of 2^16 and 2^22 elements (160 MiB), against
// numpy computing every metric and the SQNR alone.
BENCHMARK(VersusNumpy)
    ->Unit(benchmark::kSecond)
    ->UseManualTime()
    ->ArgsProduct({{1 << 16, 1 << 22}, {0, 1}});

}  // namespace

QD_BENCHMARK_MAIN()
