# Sourced by sanitize.sh and fuzz.sh from the repository root: the one instrumented build both
# stages use, in build/asan. clang with -DQD_FUZZ=ON instruments every library with
# AddressSanitizer, UndefinedBehaviorSanitizer (every report fatal) and libFuzzer's coverage, so
# the same objects serve the test suite under the sanitizers and the libFuzzer harnesses
# (tests/fuzz): the code is compiled once, not once per stage. clang, not gcc: gcc takes about
# 2.7 times as long to compile this code with the sanitizers (68 s against 25 s for
# report/src/json_codec.cpp), and clang's UBSan checks more (enum loads, for one). gcc still
# builds everything with warnings as errors in test.sh's first stage.
#
# A unity build (CMake joins a target's sources into a few translation units, each header and
# template instantiated once per batch): this build compiles in about half the time. It is safe
# here and only here: test.sh's first stage compiles every source as its own translation unit, as
# users do, and runs every test on that; a batch in which one source's internal name hid another
# source's (a real case, docs/performance.md) can only make a test fail here, never pass there.
#
#   sanitizer_build TARGET...   configures and builds the targets; on failure, the log's tail
source scripts/build-settings.sh
sanitizer_build_dir=build/asan

sanitizer_build() {
  local log=$sanitizer_build_dir/build.log
  mkdir -p "$sanitizer_build_dir"
  # -g1 (line tables) is all a sanitizer report or a crash's stack needs, and compiles faster
  # than -g. Tests on: fuzz.sh alone configures the tree the sanitizer stage builds on.
  if ! { CC=clang CXX=clang++ cmake -S . -B "$sanitizer_build_dir" \
           -DCMAKE_BUILD_TYPE=RelWithDebInfo "${compiler_launcher[@]}" \
           -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1" \
           -DCMAKE_UNITY_BUILD=ON -DQD_FUZZ=ON -DQD_WERROR=ON -DQD_BUILD_TESTS=ON -DQD_BUILD_BENCHMARKS=OFF \
           -DQD_BUILD_PYTHON=OFF &&
         cmake --build "$sanitizer_build_dir" -j"$(nproc)" --target "$@"; } >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "the instrumented build failed (full log: $log)" >&2
    return 1
  fi
}
