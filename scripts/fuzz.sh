#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz, docs/reliability.md, Fuzzing) in the instrumented
# build (scripts/sanitizer-build.sh, build/asan) and runs each for SECONDS_PER_HARNESS (default
# 20), as many at once as there are cores. Each fuzzes a copy of its committed seed corpus (the
# corpus itself is never modified) and first runs every file of tests/fuzz/regressions/<harness>/
# once. Exits non-zero on any crash, leak, timeout, out-of-memory or sanitizer report, naming the
# reproducer.
#
#   bash scripts/fuzz.sh [SECONDS_PER_HARNESS] [HARNESS...]   (default: every harness)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-20}
shift || true
run_dir=build/fuzz-run  # per harness: the corpus copy, the log, the reproducers; replaced each run
jobs=$(nproc)
harnesses=("$@")
if ((${#harnesses[@]} == 0)); then
  harnesses=(store etdump etdump_import encodings qnn_net_run npz npy zip etrecord report policy
             mapping naming handle_map align layout diff)
fi

start=$SECONDS
# The instrumented build the sanitizer stage made (nothing to do after it), or its fuzzers alone.
source scripts/sanitizer-build.sh
build=$sanitizer_build_dir
sanitizer_build qd_fuzzers
echo "build: $((SECONDS - start)) s"

# The harnesses' scratch files, on tmpfs where there is one (containers may lack /dev/shm); a
# crashed harness cannot remove its own.
export QD_FUZZ_SCRATCH
scratch_base=/dev/shm
[[ -d $scratch_base && -w $scratch_base ]] || scratch_base=${TMPDIR:-/tmp}
QD_FUZZ_SCRATCH=$(mktemp -d "$scratch_base/qd-fuzz-run.XXXXXX")
trap 'rm -rf "$QD_FUZZ_SCRATCH"' EXIT

# Flags one harness needs beyond the common ones.
extra_flags() {
  case "$1" in
    store) echo "-max_len=1400000" ;;  # the store seed is 1.2 MB; libFuzzer's default cap is 1 MB
    *) ;;
  esac
}

# Runs one harness: its regressions once each, then fuzzing. Prints one summary line; the exit
# status says whether anything was found.
fuzz_one() {
  local name=$1 binary=$build/tests/fuzz/qd_fuzz_$1 dir=$run_dir/$1
  rm -rf "$dir" && mkdir -p "$dir/corpus" "$dir/artifacts"
  cp tests/fuzz/corpus/"$name"/* "$dir/corpus/"
  local flags=(-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$dir/artifacts/"
               $(extra_flags "$name"))
  [[ -f tests/fuzz/dict/$name.dict ]] && flags+=(-dict=tests/fuzz/dict/"$name".dict)
  local regressions=()
  if [[ -d tests/fuzz/regressions/$name ]]; then
    mapfile -t regressions < <(find tests/fuzz/regressions/"$name" -type f | sort)
  fi
  if ((${#regressions[@]} > 0)) &&
     ! "$binary" "${flags[@]}" "${regressions[@]}" >"$dir/regressions.log" 2>&1; then
    echo "FAIL $name: a regression input fails again; see $dir/regressions.log"
    return 1
  fi
  if ! "$binary" "${flags[@]}" -max_total_time="$seconds" -print_final_stats=1 "$dir/corpus" \
       >"$dir/fuzz.log" 2>&1; then
    local found
    found=$(find "$dir/artifacts" -type f | head -1)
    echo "FAIL $name: reproducer ${found:-(none written)}; log $dir/fuzz.log;" \
         "rerun: $binary ${found:-}"
    return 1
  fi
  local runs coverage
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/fuzz.log")
  coverage=$(grep -o 'cov: [0-9]*' "$dir/fuzz.log" | tail -1)
  echo "ok   $name: ${#regressions[@]} regressions, $runs runs, $coverage"
}

start=$SECONDS
failed=0
running=0
for name in "${harnesses[@]}"; do
  if ((running >= jobs)); then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_one "$name" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
echo "fuzzing: $((SECONDS - start)) s for ${#harnesses[@]} harnesses, ${seconds} s each"
if ((failed)); then
  echo "fuzzing found problems: add each reproducer to tests/fuzz/regressions/<harness>/" \
       "with the fix"
  exit 1
fi
