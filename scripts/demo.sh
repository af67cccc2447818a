#!/usr/bin/env bash
# First command of the README: install what is missing, build, and run the main job on the
# built-in demo: a small model run as a float reference and as an emulated quantized device run
# with one injected fault, both captured through the C API, then `qnn-debug diff` with the JSON,
# HTML and CSV reports. The demo exits 0 when the report names the injected op.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"

./build/cli/qnn-debug demo --out out/demo
