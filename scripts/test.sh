#!/usr/bin/env bash
# Second command of the README (and what CI runs): install what is missing, build everything
# with warnings as errors, check that the capture hook builds alone, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
jobs=$(nproc)

# The capture hook must build without Eigen, JSON or CLI code (it ships inside runtimes).
cmake -S . -B build/capture-only -DCMAKE_BUILD_TYPE=Release -DQD_CAPTURE_ONLY=ON \
  -DQD_BUILD_TESTS=OFF -DQD_BUILD_BENCHMARKS=OFF -DQD_WERROR=ON >/dev/null
cmake --build build/capture-only -j"$jobs" >/dev/null
echo "capture-only build: ok"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DQD_WERROR=ON
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600
