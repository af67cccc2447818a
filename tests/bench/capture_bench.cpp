// Benchmarks of the capture hook, each reported as a ratio against a baseline measured in the
// same iterations (docs/performance.md records the numbers):
//  - HookCost: the runtime thread's cost of qd_capture_tensor against a plain memcpy of the same
//    bytes into a warm buffer. Target: capture <= 1.2 x memcpy + 2 us.
//  - StoreThroughput: a whole capture session writing N bytes durably (close includes fsync)
//    against fwrite of the same bytes to the same directory followed by fsync. Target >= 0.8.
// Files go to $QD_BENCH_DIR (default: the system temp directory).
#include <benchmark/benchmark.h>
#include <unistd.h>
#include "bench_main.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "qnn_debug/capture.h"
#include "qnn_debug/etdump/store_writer.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string bench_path(const std::string& name) {
  const char* dir = std::getenv("QD_BENCH_DIR");
  const std::filesystem::path base = dir ? dir : std::filesystem::temp_directory_path();
  return (base / ("qd_bench_" + std::to_string(getpid()) + "_" + name)).string();
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<float> make_payload(size_t bytes) {
  std::vector<float> values(bytes / sizeof(float));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 977) * 0.25f;
  return values;
}

qd_session* open_session(const std::string& path, uint64_t budget) {
  qd_session_options options;
  qd_session_options_init(&options);
  options.path = path.c_str();
  options.queue_budget_bytes = budget;
  qd_session* session = nullptr;
  return qd_session_open(&options, &session) == QD_OK ? session : nullptr;
}

qd_tensor float_view(const std::vector<float>& values, const uint64_t* dims) {
  qd_tensor t;
  qd_tensor_init(&t);
  t.name = "aten_convolution_default_1_debugID_12";
  t.rank = 1;
  t.dims = dims;
  t.data = values.data();
  t.nbytes = values.size() * sizeof(float);
  return t;
}

// ---- runtime-thread cost per tensor ----

void HookCost(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const std::vector<float> source = make_payload(bytes);
  const uint64_t budget = std::max<uint64_t>(uint64_t{256} << 20, 4 * bytes);
  // Two baselines. "warm": the same small buffer every time, hot in cache: the best a copy can
  // do. "fresh": successive places in an arena as large as the queue, as any hook that keeps
  // the bytes past the call must write them: the honest baseline for a copying hook.
  std::vector<uint8_t> warm(bytes, 1);
  std::vector<uint8_t> arena(budget, 1);
  uint64_t arena_at = 0;
  const std::string path = bench_path("hook.h5");
  qd_session* session = open_session(path, budget);
  if (session == nullptr) {
    state.SkipWithError(qd_last_error());
    return;
  }
  const uint64_t dims[1] = {source.size()};
  const qd_tensor tensor = float_view(source, dims);
  double warm_seconds = 0, memcpy_seconds = 0, capture_seconds = 0;
  uint64_t queued = 0, calls = 0;
  for (auto _ : state) {
    // Keep the queue from filling: the writer's disk speed is not what this measures.
    if (queued + bytes > budget / 2) {
      qd_flush(session);
      queued = 0;
    }
    auto start = Clock::now();
    std::memcpy(warm.data(), source.data(), bytes);
    benchmark::ClobberMemory();
    warm_seconds += seconds_since(start);
    if (arena_at + bytes > arena.size()) arena_at = 0;
    start = Clock::now();
    std::memcpy(arena.data() + arena_at, source.data(), bytes);
    benchmark::ClobberMemory();
    memcpy_seconds += seconds_since(start);
    arena_at += bytes;
    start = Clock::now();
    const qd_status status = qd_capture_tensor(session, &tensor);
    const double capture = seconds_since(start);
    capture_seconds += capture;
    state.SetIterationTime(capture);
    if (status != QD_OK) state.SkipWithError(qd_last_error());
    queued += bytes;
    ++calls;
  }
  qd_session_close(session);
  std::filesystem::remove(path);
  const double n = static_cast<double>(calls);
  state.counters["warm_memcpy_us"] = 1e6 * warm_seconds / n;
  state.counters["memcpy_us"] = 1e6 * memcpy_seconds / n;
  state.counters["capture_us"] = 1e6 * capture_seconds / n;
  state.counters["ratio_vs_memcpy"] = capture_seconds / memcpy_seconds;
  // The target is capture <= 1.2 x memcpy + 2 us: the margin left (positive = met).
  state.counters["target_margin_us"] = 1e6 * (1.2 * memcpy_seconds - capture_seconds) / n + 2.0;
  state.SetBytesProcessed(static_cast<int64_t>(calls * bytes));
}
BENCHMARK(HookCost)
    ->UseManualTime()
    ->Arg(1 << 10)
    ->Arg(16 << 10)
    ->Arg(256 << 10)
    ->Arg(1 << 20)
    ->Arg(16 << 20)
    ->Arg(64 << 20);

// ---- sustained, durable store throughput ----

double fwrite_seconds(const std::string& path, const std::vector<float>& payload, int count) {
  const auto start = Clock::now();
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return -1;
  for (int i = 0; i < count; ++i) std::fwrite(payload.data(), sizeof(float), payload.size(), file);
  std::fflush(file);
  fsync(fileno(file));
  std::fclose(file);
  const double seconds = seconds_since(start);
  std::filesystem::remove(path);
  return seconds;
}

// Sustained throughput: from the first capture to a closed, fsynced file. Opening (which
// allocates and pre-faults the queue once per session) is not part of it.
// `file_bytes` receives the store's size before it is removed.
double capture_seconds_keep(const std::string& path, const std::vector<float>& payload, int count,
                            uint64_t* file_bytes) {
  qd_session* session = open_session(path, uint64_t{256} << 20);
  if (session == nullptr) return -1;
  const auto start = Clock::now();
  const uint64_t dims[1] = {payload.size()};
  const qd_tensor tensor = float_view(payload, dims);
  for (int i = 0; i < count; ++i) {
    if (qd_capture_tensor(session, &tensor) != QD_OK) return -1;
  }
  if (qd_session_close(session) != QD_OK) return -1;  // drains, commits, fsyncs
  const double seconds = seconds_since(start);
  *file_bytes = std::filesystem::file_size(path);
  std::filesystem::remove(path);
  return seconds;
}

double capture_seconds(const std::string& path, const std::vector<float>& payload, int count) {
  uint64_t ignored = 0;
  return capture_seconds_keep(path, payload, count, &ignored);
}

// Arguments: tensor bytes, total bytes per iteration. Each iteration measures both writers
// over the same bytes, alternating which goes first so neither always meets a cold cache.
void StoreThroughput(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const int count = static_cast<int>(state.range(1) / state.range(0));
  const std::vector<float> payload = make_payload(bytes);
  const std::string raw_path = bench_path("raw.bin"), store_path = bench_path("store.h5");
  double raw = 0, store = 0;
  bool store_first = false;
  for (auto _ : state) {
    const double a = store_first ? capture_seconds(store_path, payload, count)
                                 : fwrite_seconds(raw_path, payload, count);
    const double b = store_first ? fwrite_seconds(raw_path, payload, count)
                                 : capture_seconds(store_path, payload, count);
    const double store_time = store_first ? a : b, raw_time = store_first ? b : a;
    if (store_time < 0 || raw_time < 0) {
      state.SkipWithError("write failed");
      break;
    }
    store += store_time;
    raw += raw_time;
    state.SetIterationTime(store_time);
    store_first = !store_first;
  }
  const double total = static_cast<double>(state.iterations()) * double(bytes) * count;
  state.counters["store_MBps"] = total / store / 1e6;
  state.counters["fwrite_MBps"] = total / raw / 1e6;
  state.counters["ratio_vs_fwrite"] = raw / store;
  state.SetBytesProcessed(static_cast<int64_t>(total));
}
BENCHMARK(StoreThroughput)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(4)
    ->Args({64 << 10, int64_t{512} << 20})
    ->Args({1 << 20, int64_t{1} << 30})
    ->Args({16 << 20, int64_t{1} << 30});

// ---- many tiny tensors: what batching flush points buys ----

// 100,000 tensors of 64 bytes through the hook, from the first capture to a closed file:
// the per-tensor cost end to end and the bytes each one takes in the store.
void TinyTensors(benchmark::State& state) {
  constexpr int kCount = 100'000;
  const std::vector<float> payload = make_payload(64);
  const std::string path = bench_path("tiny.h5");
  double seconds = 0;
  uint64_t file_bytes = 0;
  for (auto _ : state) {
    const double elapsed = capture_seconds_keep(path, payload, kCount, &file_bytes);
    if (elapsed < 0) {
      state.SkipWithError("capture failed");
      break;
    }
    seconds += elapsed;
    state.SetIterationTime(elapsed);
  }
  const double tensors = static_cast<double>(state.iterations()) * kCount;
  state.counters["us_per_tensor"] = 1e6 * seconds / tensors;
  state.counters["store_bytes_per_tensor"] = static_cast<double>(file_bytes) / kCount;
}
BENCHMARK(TinyTensors)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

QD_BENCHMARK_MAIN()
