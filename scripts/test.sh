#!/usr/bin/env bash
# Second command of the README (and what CI runs, .ci/run): install what is missing, then every
# stage below, each timed; the first failing stage stops the run with its name.
#   build+tests  build everything with warnings as errors and run every test (ctest)
#   capture-only the capture hook builds alone (it ships inside runtimes: no Eigen, JSON or CLI)
#   sanitizers   the whole suite again under clang's ASan + UBSan, in the build that also holds
#                the fuzzers (scripts/sanitize.sh, scripts/sanitizer-build.sh)
#   fuzz         every libFuzzer harness for 20 s, and every kept regression input (scripts/fuzz.sh)
#   aarch64      the device build, its capture and store tests under qemu (scripts/build-aarch64.sh)
# QD_STAGES="build+tests fuzz" runs only the named stages (for local work; CI runs them all).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh all
source scripts/build-settings.sh
jobs=$(nproc)
all_stages=(build+tests capture-only sanitizers fuzz aarch64)
read -r -a stages <<<"${QD_STAGES:-${all_stages[*]}}"

stage_build_and_tests() {
  # Every part ON explicitly: the README's first command (scripts/demo.sh) configures the same
  # build folder with them OFF. The libraries and programs are built as users build them (unity
  # batches, the default); the test programs as unity builds too (about 40% less compile).
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DQD_WERROR=ON -DQD_UNITY_TEST_PROGRAMS=ON \
    -DQD_BUILD_TESTS=ON -DQD_BUILD_BENCHMARKS=ON -DQD_BUILD_PYTHON=ON "${compiler_launcher[@]}"
  cmake --build build -j"$jobs"
  ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600
}

stage_capture_only() {
  cmake -S . -B build/capture-only -DCMAKE_BUILD_TYPE=Release -DQD_CAPTURE_ONLY=ON \
    -DQD_BUILD_TESTS=OFF -DQD_BUILD_BENCHMARKS=OFF -DQD_WERROR=ON "${compiler_launcher[@]}" \
    >/dev/null
  cmake --build build/capture-only -j"$jobs" >/dev/null
}

for stage in "${stages[@]}"; do
  case "$stage" in
    build+tests | capture-only | sanitizers | fuzz | aarch64) ;;
    *) echo "test.sh: unknown stage '$stage' (stages: ${all_stages[*]})" >&2; exit 2 ;;
  esac
done

# Stages run under errexit (not in an `||` list, which would switch it off inside them); the
# EXIT trap names the stage that stopped the run.
stage=""
trap 'status=$?; if ((status != 0)) && [[ -n $stage ]]; then
        echo "test.sh: stage $stage FAILED after $((SECONDS - start)) s" >&2; fi' EXIT
timings=()
for stage in "${stages[@]}"; do
  echo "== test.sh: $stage"
  start=$SECONDS
  case "$stage" in
    build+tests) stage_build_and_tests ;;
    capture-only) stage_capture_only ;;
    sanitizers) bash scripts/sanitize.sh ;;
    fuzz) bash scripts/fuzz.sh 20 ;;
    aarch64) bash scripts/build-aarch64.sh ;;
  esac
  timings+=("$(printf '%-13s %5d s' "$stage" $((SECONDS - start)))")
done
stage=""
echo "== test.sh: every stage passed"
printf '  %s\n' "${timings[@]}"
echo "  total         $(printf '%5d' "$SECONDS") s"
