// Hostile tensor names (the unit tests' HostileNames, tests/unit/naming_test.cpp, check what they
// parse to; this measures how long that takes). Each iteration times NameParser::parse of one
// name and, as the baseline, a scan of the same bytes for the "_debugID_" marker and '@' (the
// least any parser of that name reads), and reports both and their ratio
// (docs/performance.md, "Hostile names"):
//  - HostileName/<kind>/<bytes>: kind 0 'a' filler, 1 "_debugID_1" repeated, 2 "_debugID_"
//    followed by nines; bytes from 64 KiB to 4 MiB. Linear parsing keeps the time per byte, and
//    the ratio, flat as the name grows.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <string>
#include <string_view>

#include "bench_main.h"
#include "qnn_debug/naming/naming.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string hostile_name(int64_t kind, size_t bytes) {
  switch (kind) {
    case 0:
      return std::string(bytes, 'a') + "_debugID_5";
    case 1: {
      std::string name;
      name.reserve(bytes + 10);
      while (name.size() < bytes) name += "_debugID_1";
      return name;
    }
    default:
      return "_debugID_" + std::string(bytes, '9');
  }
}

// The baseline: every occurrence of the marker, and the last '@', found by the C library.
size_t scan(std::string_view name) {
  size_t found = 0;
  for (size_t at = name.find("_debugID_"); at != std::string_view::npos;
       at = name.find("_debugID_", at + 1)) {
    ++found;
  }
  const void* at_sign = std::memchr(name.data(), '@', name.size());
  return found + (at_sign != nullptr ? 1 : 0);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void HostileName(benchmark::State& state) {
  const std::string name = hostile_name(state.range(0), static_cast<size_t>(state.range(1)));
  auto parser = qd::naming::NameParser::create("executorch-qnn", "", "");
  if (!parser.is_ok()) {
    state.SkipWithError(parser.status().message().c_str());
    return;
  }
  double parse_seconds = 0, scan_seconds = 0;
  uint64_t calls = 0;
  for (auto _ : state) {
    auto start = Clock::now();
    const size_t found = scan(name);
    benchmark::DoNotOptimize(found);
    scan_seconds += seconds_since(start);
    start = Clock::now();
    const qd::naming::ParsedName parsed = parser->parse(name);
    benchmark::DoNotOptimize(parsed.handles.data());
    const double parse = seconds_since(start);
    parse_seconds += parse;
    state.SetIterationTime(parse);
    ++calls;
  }
  const double n = static_cast<double>(calls);
  state.counters["parse_ms"] = 1e3 * parse_seconds / n;
  state.counters["scan_ms"] = 1e3 * scan_seconds / n;
  state.counters["parse_ns_per_byte"] = 1e9 * parse_seconds / n / static_cast<double>(name.size());
  state.counters["ratio_vs_scan"] = parse_seconds / scan_seconds;
  state.SetBytesProcessed(static_cast<int64_t>(calls * name.size()));
}
BENCHMARK(HostileName)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->ArgsProduct({{0, 1, 2}, {64 << 10, 1 << 20, 4 << 20}});

}  // namespace

QD_BENCHMARK_MAIN();
