#!/usr/bin/env bash
# The whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer (gcc), every report
# fatal, in build/asan. Left out: the benchmarks; the Python package (its extension would need
# the sanitizer runtime preloaded into the interpreter); the install tests, install_* (their
# consumer programs are built without sanitizers, and a package of a sanitized build is not what
# users install). docs/reliability.md says what the runs found.
#
#   bash scripts/sanitize.sh [CTEST_ARGS...]     e.g. -R CaptureApi to run a few tests
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
build=build/asan

# -g1 (line tables) is all a sanitizer report needs, and compiles faster than -g.
mkdir -p "$build"
log=$build/build.log
if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1" \
         -DQD_SANITIZE=address,undefined -DQD_WERROR=ON -DQD_BUILD_BENCHMARKS=OFF \
         -DQD_BUILD_PYTHON=OFF && cmake --build "$build" -j"$jobs"; } >"$log" 2>&1; then
  tail -n 60 "$log" >&2
  echo "sanitize: the build failed (full log: $log)" >&2
  exit 1
fi
echo "sanitizer build: ok"

# libhdf5's own objects, left allocated at exit after a damaged file, are not our leaks.
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1"
# The golden reports pin output bytes, not memory safety: the same paths run in the other tests.
# The 5,000-run page measures size and speed (10 minutes under ASan, 45 s without); the page's
# code runs under the sanitizers in html_report_in_browser.
ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 1200 \
  -E '^install_|GoldenReport|^html_report_in_browser_5000_runs$' \
  "$@"
