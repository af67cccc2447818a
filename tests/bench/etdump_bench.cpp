// `qnn-debug capture etdump` benchmarks, each against a baseline from the same run
// (docs/performance.md records the numbers):
//  - DebugBuffer/<MiB>: the whole capture of an ETDump whose debug buffer holds <MiB> of int8
//    tensors (4 MiB each), against `cp` of the same debug buffer, both to a name that does not
//    exist; both read from the page cache and write into it (a capture leaves durability to the
//    page cache: its inputs stay on disk), each after a sync so neither waits on the other's
//    writeback. Target: capture >= 0.5x cp. The peak memory the command reports must not grow with
//    the buffer.
//  - Rerun/<MiB>: the same, but each command writes over the file its previous iteration left
//    (the capture over its store, `cp` over its copy), as re-running a capture into the same
//    path does.
//  - ManyRuns/<runs>: <runs> runs of 200 small tensors each (an LLM decode loop's shape): the
//    time per tensor must stay flat from 500 to 5,000 runs (no quadratic cost).
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench_main.h"
#include "bench_process.h"
#include "qnn_debug/fixtures/etdump_writer.h"

namespace {

using namespace qd;
using bench::ProcessRun;
using bench::run_process;
using fixtures::EtdumpEventOut;
using fixtures::EtdumpRunOut;

std::string bench_path(const std::string& name) { return bench::bench_path("qd_etd_", name); }

constexpr int8_t kChar = 1;  // ExecuTorch ScalarType of QNN's SFIXED_POINT_8 storage
constexpr int8_t kFloat = 6;

EtdumpEventOut tensor_event(const std::string& name, int8_t scalar_type, int64_t elements,
                            int64_t offset) {
  EtdumpEventOut e;
  e.kind = EtdumpEventOut::Kind::kDebug;
  e.delegate_debug_id_str = name;
  e.instruction_id = 1;
  e.value =
      fixtures::EtdumpValueOut{5, {fixtures::EtdumpTensorOut{scalar_type, {elements}, {}, offset}}};
  return e;
}

struct Dump {
  std::string etdump = bench_path("dump.etdp");
  std::string buffer = bench_path("debug_output.bin");
  std::string encodings = bench_path("encodings.json");
  std::string store = bench_path("store.h5");
  ~Dump() {
    for (const std::string& path : {etdump, buffer, encodings, store})
      std::filesystem::remove(path);
  }
};

// One run of `tensors` int8 tensors of `tensor_bytes` each, with a scale and offset apiece.
bool write_buffer_dump(const Dump& dump, int tensors, int64_t tensor_bytes) {
  auto buffer = fixtures::DebugBufferFile::create(dump.buffer);
  if (!buffer.is_ok()) return false;
  std::vector<uint8_t> bytes(static_cast<size_t>(tensor_bytes));
  EtdumpRunOut run;
  std::string encodings = "{";
  for (int t = 0; t < tensors; ++t) {
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + t);
    const auto offset = buffer->append(bytes);
    if (!offset.is_ok()) return false;
    const std::string name = "op" + std::to_string(t) + "@0";
    run.events.push_back(tensor_event(name, kChar, tensor_bytes, *offset));
    encodings += std::string(t ? "," : "") + "\"" + name + "\": {\"scale\": 0.02, \"offset\": 0}";
  }
  std::ofstream(dump.encodings) << encodings << "}";
  const std::vector<uint8_t> etdump = fixtures::write_etdump({run});
  std::ofstream(dump.etdump, std::ios::binary)
      .write(reinterpret_cast<const char*>(etdump.data()),
             static_cast<std::streamsize>(etdump.size()));
  return buffer->finish(0).is_ok();
}

// `runs` runs of `tensors` float32 tensors of 64 elements.
bool write_many_runs(const Dump& dump, int runs, int tensors) {
  auto buffer = fixtures::DebugBufferFile::create(dump.buffer);
  if (!buffer.is_ok()) return false;
  std::vector<float> values(64);
  std::vector<EtdumpRunOut> all(static_cast<size_t>(runs));
  for (int r = 0; r < runs; ++r) {
    for (int t = 0; t < tensors; ++t) {
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(r + t + i);
      const auto offset = buffer->append(
          {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)});
      if (!offset.is_ok()) return false;
      all[static_cast<size_t>(r)].events.push_back(
          tensor_event("op" + std::to_string(t) + "@0", kFloat, 64, *offset));
    }
  }
  const std::vector<uint8_t> etdump = fixtures::write_etdump(all);
  std::ofstream(dump.etdump, std::ios::binary)
      .write(reinterpret_cast<const char*>(etdump.data()),
             static_cast<std::streamsize>(etdump.size()));
  return buffer->finish(0).is_ok();
}

// Writes in a child process, so the benchmark process (whose high-water mark a spawned command
// would inherit) never holds the dump.
template <typename Write>
bool write_in_child(Write write) {
  const pid_t pid = fork();
  if (pid == 0) _exit(write() ? 0 : 1);
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

ProcessRun capture(const Dump& dump, const std::string& stderr_path,
                   const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {QD_CLI,      "capture",        "etdump",
                                   dump.etdump, "--debug-buffer", dump.buffer,
                                   "-o",        dump.store,       "--stats"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_process(args, "/dev/null", stderr_path);
}

// Times the capture of a <MiB> debug buffer against `cp` of it. `over_existing`: both write over
// the file their previous iteration left (`cp` truncates its copy, the capture replaces its
// store); otherwise both write to a name that does not exist.
void capture_against_cp(benchmark::State& state, bool over_existing) {
  const int64_t mib = state.range(0);
  constexpr int64_t kTensorBytes = int64_t{4} << 20;
  const int tensors = static_cast<int>((mib << 20) / kTensorBytes);
  Dump dump;
  if (!write_in_child([&] { return write_buffer_dump(dump, tensors, kTensorBytes); })) {
    return state.SkipWithError("cannot write the dump");
  }
  const std::string copy = bench_path("copy.bin"), err = bench_path("capture.err");
  // Both read the buffer from the page cache, and neither waits on the writeback of the setup's
  // own writes.
  run_process({"cp", dump.buffer, copy}, "/dev/null");
  capture(dump, err, {"--encodings", dump.encodings});
  sync();
  double cp_seconds = 0, capture_seconds = 0, peak = -1;
  for (auto _ : state) {
    if (!over_existing) {
      std::filesystem::remove(copy);
      std::filesystem::remove(dump.store);
    }
    // Each command starts from a clean page cache, not waiting on the other's writeback (nor on
    // freeing what the removals above released).
    sync();
    const ProcessRun cp = run_process({"cp", dump.buffer, copy}, "/dev/null");
    sync();
    const ProcessRun captured = capture(dump, err, {"--encodings", dump.encodings});
    if (cp.exit_code != 0 || captured.exit_code != 0) state.SkipWithError("cp or capture failed");
    cp_seconds += cp.seconds;
    capture_seconds += captured.seconds;
    peak = bench::reported_peak_mib(bench::slurp(err));
    state.SetIterationTime(captured.seconds);
  }
  std::filesystem::remove(copy);
  std::filesystem::remove(err);
  const double bytes = double(mib << 20) * double(state.iterations());
  state.counters["capture_GBps"] = bytes / capture_seconds / 1e9;
  state.counters["cp_GBps"] = bytes / cp_seconds / 1e9;
  state.counters["vs_cp"] = cp_seconds / capture_seconds;
  state.counters["peak_MiB"] = peak;
}

void DebugBuffer(benchmark::State& state) { capture_against_cp(state, /*over_existing=*/false); }
BENCHMARK(DebugBuffer)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024);

void Rerun(benchmark::State& state) { capture_against_cp(state, /*over_existing=*/true); }
BENCHMARK(Rerun)->Unit(benchmark::kMillisecond)->UseManualTime()->Arg(64)->Arg(256)->Arg(1024);

void ManyRuns(benchmark::State& state) {
  const int runs = static_cast<int>(state.range(0));
  constexpr int kTensors = 200;
  Dump dump;
  if (!write_in_child([&] { return write_many_runs(dump, runs, kTensors); })) {
    return state.SkipWithError("cannot write the dump");
  }
  sync();
  const std::string err = bench_path("runs.err");
  double seconds = 0;
  for (auto _ : state) {
    const ProcessRun captured = capture(dump, err);
    if (captured.exit_code != 0) state.SkipWithError("capture failed");
    seconds += captured.seconds;
    state.SetIterationTime(captured.seconds);
  }
  std::filesystem::remove(err);
  const double tensors = double(runs) * kTensors * double(state.iterations());
  state.counters["us_per_tensor"] = seconds / tensors * 1e6;
  state.counters["etdump_MiB"] = double(std::filesystem::file_size(dump.etdump)) / (1 << 20);
}
BENCHMARK(ManyRuns)
    ->Unit(benchmark::kSecond)
    ->UseManualTime()
    ->Iterations(1)
    ->Arg(50)
    ->Arg(500)
    ->Arg(5000);

}  // namespace

QD_BENCHMARK_MAIN()
