// StoreReader::tensors_of_run on stores of N runs x 200 tensors (an LLM decode loop's shape):
//  - TensorsOfRun/<runs>: every run's tensors read once, through the row index built at open
//    (rows are read and decoded when asked for). The time per run must not grow with the number
//    of runs (docs/performance.md, "Many runs").
//  - OnePassBaseline/<runs>: every tensor of the store read in one pass (for_each_tensor): the
//    ratio of the two is what reading run by run costs over reading the table once.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "../common/many_runs_stores.h"
#include "bench_main.h"
#include "bench_process.h"
#include "qnn_debug/etdump/store_reader.h"

namespace {

using namespace qd;

// One reference store per run count, written once per process and removed at exit.
class Stores {
 public:
  ~Stores() {
    for (const auto& [runs, paths] : paths_) {
      std::filesystem::remove(paths.first);
      std::filesystem::remove(paths.second);
    }
  }
  const std::string* reference(uint32_t runs) {
    auto found = paths_.find(runs);
    if (found == paths_.end()) {
      const std::string tag = std::to_string(runs);
      std::pair<std::string, std::string> paths{bench::bench_path("qd_index_", tag + "_ref.h5"),
                                                bench::bench_path("qd_index_", tag + "_dev.h5")};
      if (!testing::write_many_runs_pair(paths.first, paths.second, {runs, 200, 4}).is_ok()) {
        return nullptr;
      }
      found = paths_.emplace(runs, paths).first;
    }
    return &found->second.first;
  }

 private:
  std::map<uint32_t, std::pair<std::string, std::string>> paths_;
};

Stores stores;

std::unique_ptr<StoreReader> open_store(benchmark::State& state) {
  const std::string* path = stores.reference(static_cast<uint32_t>(state.range(0)));
  auto reader = path ? StoreReader::open(*path)
                     : Result<std::unique_ptr<StoreReader>>(error(ErrorCode::kIo, "not written"));
  if (!reader.is_ok()) {
    state.SkipWithError(reader.status().message().c_str());
    return nullptr;
  }
  return std::move(reader).value();
}

void report_per_run(benchmark::State& state, const StoreReader& store, uint64_t found) {
  const auto runs = static_cast<double>(store.runs().size());
  state.counters["ns_per_run"] =
      benchmark::Counter(runs * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  if (found != store.tensor_count() * state.iterations()) {
    state.SkipWithError("the runs' lists do not add up to the store's tensors");
  }
}

void TensorsOfRun(benchmark::State& state) {
  const auto store = open_store(state);
  if (!store) return;
  uint64_t found = 0;
  for (auto _ : state) {
    for (const RunInfo& run : store->runs()) {
      const auto tensors = store->tensors_of_run(run.id);
      if (!tensors.is_ok()) return state.SkipWithError(tensors.status().message().c_str());
      benchmark::DoNotOptimize(tensors->data());
      found += tensors->size();
    }
  }
  report_per_run(state, *store, found);
}
BENCHMARK(TensorsOfRun)->Arg(50)->Arg(500)->Arg(5000)->Unit(benchmark::kMicrosecond);

void OnePassBaseline(benchmark::State& state) {
  const auto store = open_store(state);
  if (!store) return;
  uint64_t found = 0;
  for (auto _ : state) {
    const Status read = store->for_each_tensor([&](const TensorEntry& t) {
      benchmark::DoNotOptimize(t.name.data());
      ++found;
      return Status::ok();
    });
    if (!read.is_ok()) return state.SkipWithError(read.message().c_str());
  }
  report_per_run(state, *store, found);
}
BENCHMARK(OnePassBaseline)->Arg(50)->Arg(500)->Arg(5000)->Unit(benchmark::kMicrosecond);

}  // namespace

QD_BENCHMARK_MAIN();
