#!/usr/bin/env bash
# First command of the README: install what the main job needs, build the CLI and the capture
# library (no tests, benchmarks, fuzzers or Python package: scripts/test.sh builds those), and
# run the main job on the built-in demo: a small model run as a float reference and as an
# emulated quantized device run with one injected fault, both captured through the C API, then
# `qnn-debug diff` with the JSON, HTML and CSV reports. The demo exits 0 when the report names
# the injected op.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh main
source scripts/build-settings.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
  -DQD_BUILD_TESTS=OFF -DQD_BUILD_BENCHMARKS=OFF -DQD_BUILD_PYTHON=OFF -DQD_FUZZ=OFF
cmake --build build -j"$(nproc)" --target qnn-debug qd_capture_shared qd_capture_static

./build/cli/qnn-debug demo --out out/demo
