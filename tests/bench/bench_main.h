// main() for the benchmarks: like BENCHMARK_MAIN, but a benchmark that reports an error (a failed
// write, numbers that disagree with the baseline) makes the program exit 1, so the ctest smoke
// runs catch a broken benchmark instead of printing its error and passing.
#pragma once

#include <benchmark/benchmark.h>

namespace qd::bench {

class ErrorCountingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) errors_ += run.error_occurred ? 1 : 0;
    ConsoleReporter::ReportRuns(runs);
  }
  int errors() const { return errors_; }

 private:
  int errors_ = 0;
};

inline int run_benchmarks(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  ErrorCountingReporter reporter;
  const size_t ran = benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return ran == 0 || reporter.errors() > 0 ? 1 : 0;
}

}  // namespace qd::bench

#define QD_BENCHMARK_MAIN() \
  int main(int argc, char** argv) { return qd::bench::run_benchmarks(argc, argv); }
