#!/usr/bin/env bash
# First command of the README: install what is missing, build, run the main job on the
# built-in example (a store captured through the C API, then listed with `qnn-debug inspect`).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"

mkdir -p out
./build/fixtures/qd-example-capture out/example.h5
./build/cli/qnn-debug inspect out/example.h5
