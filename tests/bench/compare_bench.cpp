// Comparator benchmarks, each as a ratio against a baseline from the same run
// (docs/performance.md records the numbers):
//  - PairThroughput: bytes of a float32 reference + int8 device pair compared per second, read
//    from real stores, against memcpy bandwidth over the same bytes. Target >= 0.5 on one thread.
//  - StoreJobs/<jobs>: a whole store pair (64 tensors) on N threads, to show the scaling.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "qnn_debug/compare/compare.h"
#include "qnn_debug/store_reader.h"
#include "qnn_debug/store_writer.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace qd;

std::string bench_path(const std::string& name) {
  const char* dir = std::getenv("QD_BENCH_DIR");
  const std::filesystem::path base = dir ? dir : std::filesystem::temp_directory_path();
  return (base / ("qd_cmp_" + std::to_string(getpid()) + "_" + name)).string();
}

// Writes `tensors` pairs of `elements` values: a float32 reference and a device tensor that is
// int8 per-tensor quantized, or float32 (`float_device`).
void write_pair(const std::string& ref_path, const std::string& device_path, int tensors,
                uint64_t elements, bool float_device = false) {
  auto ref = StoreWriter::create(ref_path, {}).value();
  auto device = StoreWriter::create(device_path, {}).value();
  std::vector<float> r(elements);
  std::vector<int8_t> q(elements);
  const double scale = 2.0 / 127;
  for (int t = 0; t < tensors; ++t) {
    for (uint64_t i = 0; i < elements; ++i) {
      r[i] = static_cast<float>(std::sin(0.01 * double(i) + t) * 2.0);
      q[i] = static_cast<int8_t>(std::nearbyint(r[i] / scale));
    }
    TensorRecord rr;
    rr.name = "op__debugID_" + std::to_string(t + 1);
    rr.handles = {t + 1};
    rr.dims = {elements};
    TensorRecord dr = rr;
    const auto* ref_bytes = reinterpret_cast<const uint8_t*>(r.data());
    (void)ref->append_tensor(rr, {ref_bytes, elements * 4}, 0);
    if (float_device) {
      for (uint64_t i = 0; i < elements; ++i) r[i] = static_cast<float>(q[i] * scale);
      (void)device->append_tensor(dr, {ref_bytes, elements * 4}, 0);
      continue;
    }
    dr.dtype = DType::kSFixed8;
    dr.quant.scales = {scale};
    dr.quant.offsets = {0};
    (void)device->append_tensor(dr, {reinterpret_cast<const uint8_t*>(q.data()), elements}, 0);
  }
  (void)ref->close();
  (void)device->close();
}

struct Pair {
  std::string ref_path = bench_path("ref.h5"), device_path = bench_path("dev.h5");
  Pair(int tensors, uint64_t elements, bool float_device = false) {
    write_pair(ref_path, device_path, tensors, elements, float_device);
  }
  ~Pair() {
    std::filesystem::remove(ref_path);
    std::filesystem::remove(device_path);
  }
};

// range(0): elements; range(1): 1 for a float32 device tensor, 0 for int8.
void PairThroughput(benchmark::State& state) {
  const auto elements = static_cast<uint64_t>(state.range(0));
  Pair files(1, elements, state.range(1) != 0);
  auto ref = StoreReader::open(files.ref_path).value();
  auto device = StoreReader::open(files.device_path).value();
  const TensorEntry& rt = ref->tensors().at(0);
  const TensorEntry& dt = device->tensors().at(0);
  const compare::LayoutPlan layout = compare::plan_layout(rt, dt).value();
  const uint64_t bytes = rt.data_nbytes + dt.data_nbytes;
  std::vector<uint8_t> source(bytes, 1), target(bytes, 2);
  double compare_seconds = 0, memcpy_seconds = 0;
  for (auto _ : state) {
    auto start = Clock::now();
    std::memcpy(target.data(), source.data(), bytes);
    benchmark::ClobberMemory();
    memcpy_seconds += std::chrono::duration<double>(Clock::now() - start).count();
    start = Clock::now();
    auto m = compare::compare_tensors(*ref, rt, *device, dt, layout, {});
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    compare_seconds += seconds;
    state.SetIterationTime(seconds);
    if (!m.is_ok()) state.SkipWithError(m.status().message().c_str());
  }
  const double total = double(bytes) * double(state.iterations());
  state.counters["compare_GBps"] = total / compare_seconds / 1e9;
  state.counters["memcpy_GBps"] = total / memcpy_seconds / 1e9;
  state.counters["ratio_vs_memcpy"] = memcpy_seconds / compare_seconds;
}
BENCHMARK(PairThroughput)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->ArgNames({"elements", "float_device"})
    ->ArgsProduct({{1 << 20, 1 << 24}, {0, 1}});

void StoreJobs(benchmark::State& state) {
  static Pair* files = new Pair(64, 1 << 20);  // kept across job counts, removed at exit
  static const bool cleanup = [] {
    std::atexit([] { delete files; });
    return true;
  }();
  (void)cleanup;
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

}  // namespace

BENCHMARK_MAIN();
