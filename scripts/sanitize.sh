#!/usr/bin/env bash
# The whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer (clang), every report
# fatal, in build/asan (scripts/sanitizer-build.sh: the build fuzz.sh shares). Left out: the
# benchmarks; the Python package (its extension would need the sanitizer runtime preloaded into
# the interpreter); the install tests, install_* (their consumer programs are built without
# sanitizers, and a package of a sanitized build is not what users install); Chromium's clicks
# through the report pages (html_report_pages writes every page the browser tests open).
# Repetition-heavy tests run a share of their repetitions (QD_TEST_SCALE, below).
# docs/reliability.md says what the runs found, and how long they take.
#
#   bash scripts/sanitize.sh [CTEST_ARGS...]     e.g. -R CaptureApi to run a few tests
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

source scripts/sanitizer-build.sh
build=$sanitizer_build_dir
# The fuzzers too: fuzz.sh, the next stage, then only runs them.
sanitizer_build all qd_fuzzers
echo "sanitizer build: ok"

# libhdf5's own objects, left allocated at exit after a damaged file, are not our leaks.
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1"
# The sanitizers need every code path, not every repetition of it: tests that repeat one path
# thousands of times run a share of the repetitions (tests/common/test_scale.h; each says which).
# One in seven: SavedReport.MutatedReports... then mutates each kind of report field once.
export QD_TEST_SCALE=${QD_TEST_SCALE:-0.14}
# The golden reports pin output bytes, not memory safety: the same paths run in the other tests.
# The browser tests are not defined in this build: html_report_pages writes every page they open
# (the C++ side) without Chromium, whose clicks test the page's script (tests/integration).
ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 1200 \
  -E '^install_|GoldenReport' \
  "$@"
