// qd_scale_bench [--runs 50,500] [--tensors 200] [--elements 64] [--mem-limit-mib 6144]
//                [--jobs 1] [--views summary,json,html,csv] [--mixed 1]
//
// `qnn-debug diff` on many runs of small tensors (an LLM decode loop: issues 18 and 22 want 5,000
// runs x 200 tensors in time linear in the data and with flat memory; `--runs 50,500,5000` takes
// about 10 minutes). For each run count it writes a reference / device pair
// (tests/common/many_runs_stores.h) and runs the CLI on it once per view: the terminal summary
// alone, then with --json, --html and --csv (one file view each), each under an address-space
// limit (the machine may be shared). `--mixed 1` makes a third of the tensors KV caches measured
// per position and a third UFIXED_POINT_16 on the device (ManyRunsShape::mixed). Every pair passes,
// so a file's bytes per pair are its bytes per passing pair: past 16 runs, the report file's
// packed rows (docs/reports.md, "A long decode's JSON"). It prints, per run count and view: the
// wall time per compared
// pair and its ratio to the first run count's in the same view (the baseline of the same run: 1.0
// all the way down is linear time), the peak resident memory qnn-debug reports (--stats, its own
// VmHWM) and that memory per pair, and the size of the file written, whole and per pair. A diff
// that runs out of memory must say so and exit 2 (the row then shows the limit it hit). Exits 1
// when a diff fails any other way or prints no peak memory, 2 for bad usage. docs/performance.md
// records the numbers.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../common/many_runs_stores.h"
#include "bench_process.h"

namespace {

// A file view of `qnn-debug diff` (its flag without the dashes), or "summary": the terminal's.
const char* const kViews[] = {"summary", "json", "html", "csv"};

struct Options {
  std::vector<uint32_t> runs = {50, 500};
  std::vector<std::string> views = {"summary", "json", "html", "csv"};
  uint32_t tensors = 200;
  uint64_t elements = 64;
  uint64_t mem_limit_mib = 6144;  // 0: no limit
  unsigned jobs = 1;
  bool mixed = false;
};

struct Measurement {
  int exit_code = -1;
  double seconds = 0;
  double peak_mib = -1;
  uint64_t output_bytes = 0;  // the file view's size
  std::string error;          // the CLI's error line, when it failed
};

std::optional<std::vector<std::string>> parse_views(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (std::find(std::begin(kViews), std::end(kViews), item) == std::end(kViews)) {
      return std::nullopt;
    }
    out.push_back(item);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

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
    } else if (flag == "--mem-limit-mib") {
      options.mem_limit_mib = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--jobs") {
      options.jobs = static_cast<unsigned>(std::strtoul(value.c_str(), nullptr, 10));
    } else if (flag == "--mixed") {
      options.mixed = value == "1";
    } else if (flag == "--views") {
      auto views = parse_views(value);
      if (!views) return std::nullopt;
      options.views = *views;
    } else {
      return std::nullopt;
    }
  }
  if (argc % 2 == 0 || options.tensors == 0 || options.elements == 0 || options.jobs == 0) {
    return std::nullopt;
  }
  return options;
}

// Runs the CLI with its address space limited (setrlimit between fork and exec, so only the
// child is limited), stdout discarded and stderr kept.
Measurement run_limited(std::vector<std::string> args, uint64_t limit_mib,
                        const std::string& stderr_path) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  Measurement m;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    if (limit_mib != 0) {
      const rlim_t bytes = static_cast<rlim_t>(limit_mib) << 20;
      const rlimit limit{bytes, bytes};
      setrlimit(RLIMIT_AS, &limit);
    }
    const int out = open("/dev/null", O_WRONLY);
    const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid) {
    m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string err = qd::bench::slurp(stderr_path);
  m.peak_mib = qd::bench::reported_peak_mib(err);
  const size_t at = err.find("qnn-debug: error: ");
  if (at != std::string::npos) m.error = err.substr(at, err.find('\n', at) - at);
  return m;
}

Measurement measure_diff(const Options& options, const std::string& ref, const std::string& device,
                         const std::string& view) {
  std::vector<std::string> args = {
      QD_CLI, "diff", ref, device, "--stats", "--jobs", std::to_string(options.jobs)};
  const std::string out_path = qd::bench::bench_path("qd_scale_", "report." + view);
  if (view != "summary") {
    args.push_back("--" + view);
    args.push_back(out_path);
  }
  const std::string err_path = qd::bench::bench_path("qd_scale_", "stderr.txt");
  Measurement m = run_limited(args, options.mem_limit_mib, err_path);
  std::error_code ignored;
  const uintmax_t size = std::filesystem::file_size(out_path, ignored);
  if (!ignored) m.output_bytes = size;
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return m;
}

// 0 and 1 are verdicts; 2 is right only as the out-of-memory line this benchmark looks for.
bool acceptable(const Measurement& m) {
  if (m.exit_code == 0 || m.exit_code == 1) return m.peak_mib > 0;
  return m.exit_code == 2 && m.error.find("out of memory while comparing") != std::string::npos;
}

// The first run count's figures in one mode: the baseline the larger counts are measured against.
struct Baseline {
  uint64_t pairs = 0;
  double us_per_pair = 0;
  double peak_mib = 0;
};

void print_row(uint32_t runs, uint64_t pairs, const std::string& view, const Measurement& m,
               Baseline& baseline, uint64_t limit_mib) {
  const std::string flag = view == "summary" ? view : "--" + view;
  const char* mode = flag.c_str();
  if (m.exit_code == 2 || m.peak_mib <= 0) {
    std::printf("%6u %9llu %-8s exit %d after %.1f s (limit %llu MiB): %s\n", runs,
                static_cast<unsigned long long>(pairs), mode, m.exit_code, m.seconds,
                static_cast<unsigned long long>(limit_mib), m.error.c_str());
    return;
  }
  const double us_per_pair = m.seconds * 1e6 / double(pairs);
  if (baseline.pairs == 0) baseline = {pairs, us_per_pair, m.peak_mib};
  // Memory per pair beyond the baseline's: what each further pair costs, without the fixed
  // cost of the process and the store indexes that dominates small inputs.
  const std::string marginal =
      pairs > baseline.pairs
          ? std::to_string(static_cast<long long>((m.peak_mib - baseline.peak_mib) * 1048576.0 /
                                                  double(pairs - baseline.pairs))) +
                " B/pair more"
          : "(baseline)";
  std::printf("%6u %9llu %-8s exit %d %8.2f s %8.1f us/pair (x%.2f) %8.1f MiB %8.0f B/pair, %s",
              runs, static_cast<unsigned long long>(pairs), mode, m.exit_code, m.seconds,
              us_per_pair, us_per_pair / baseline.us_per_pair, m.peak_mib,
              m.peak_mib * 1048576.0 / double(pairs), marginal.c_str());
  if (view != "summary") {
    std::printf("; file %.1f MB, %.0f B/pair", double(m.output_bytes) / 1e6,
                double(m.output_bytes) / double(pairs));
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Options> options = parse_options(argc, argv);
  if (!options) {
    std::fprintf(stderr,
                 "usage: qd_scale_bench [--runs 50,500] [--tensors 200] [--elements 64] "
                 "[--mem-limit-mib 6144] [--jobs 1] [--views summary,json,html,csv] "
                 "[--mixed 1]\n");
    return 2;
  }
  std::printf("qnn-debug diff, N runs x %u tensors of %llu %s, --jobs %u, limit %llu MiB\n",
              options->tensors, static_cast<unsigned long long>(options->elements),
              options->mixed ? "elements (float32, KV caches, UFIXED_POINT_16)" : "float32",
              options->jobs, static_cast<unsigned long long>(options->mem_limit_mib));
  bool all_acceptable = true;
  Baseline baselines[std::size(kViews)];  // per view
  for (const uint32_t runs : options->runs) {
    const std::string ref = qd::bench::bench_path("qd_scale_", "ref.h5");
    const std::string device = qd::bench::bench_path("qd_scale_", "device.h5");
    const auto start = std::chrono::steady_clock::now();
    const qd::Status written =
        qd::testing::write_many_runs_pair(ref, device,
                                          {.runs = runs,
                                           .tensors_per_run = options->tensors,
                                           .elements = options->elements,
                                           .mixed = options->mixed});
    if (!written.is_ok()) {
      std::fprintf(stderr, "qd_scale_bench: %s\n", written.message().c_str());
      return 1;
    }
    std::printf("%6u runs: stores written in %.1f s (%.1f MiB each)\n", runs,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                double(std::filesystem::file_size(ref)) / 1048576.0);
    const uint64_t pairs = uint64_t{runs} * options->tensors;
    for (const std::string& view : options->views) {
      const Measurement m = measure_diff(*options, ref, device, view);
      const size_t index =
          std::find(std::begin(kViews), std::end(kViews), view) - std::begin(kViews);
      print_row(runs, pairs, view, m, baselines[index], options->mem_limit_mib);
      all_acceptable = all_acceptable && acceptable(m);
      std::fflush(stdout);
    }
    std::fflush(stdout);
    std::filesystem::remove(ref);
    std::filesystem::remove(device);
  }
  return all_acceptable ? 0 : 1;
}
