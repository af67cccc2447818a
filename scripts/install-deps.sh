#!/usr/bin/env bash
# Installs the Debian 12 packages qnn-debug needs, only those missing (apt, sudo if not root).
#   install-deps.sh main   what the CLI and the capture library build with (scripts/demo.sh)
#   install-deps.sh all    that, plus what the tests, benchmarks, fuzzers, the Python package and
#                          the device build use (scripts/test.sh, CI); the default
set -euo pipefail

# The main job: CMake finds these with tests, benchmarks and Python off (CMakeLists.txt).
main_packages=(
  cmake g++ make ninja-build pkg-config
  libhdf5-dev libre2-dev  # the store and the capture hook (also all a device build needs)
  libfmt-dev nlohmann-json3-dev libeigen3-dev libcli11-dev zlib1g-dev  # the CLI
)
test_packages=(
  hdf5-tools libgtest-dev libgmock-dev libbenchmark-dev
  flatbuffers-compiler  # tests write and decode ETDumps with flatc, independently of our reader
  python3-h5py python3-numpy  # the h5py test reads a store with nothing but docs/store-format.md
  python3-dev pybind11-dev  # the qnn_debug Python package's extension (python/)
  python3-torch python3-pytest python3-pandas  # its tests: PyTorch capture, pytest, to_pandas
  python3-torchvision  # tests/python/emulated_cnn.py: the torchvision CNNs it emulates
  python3-pip python3-setuptools  # `pip install .` of the package, tested offline
  chromium  # the HTML report's browser test (headless)
  clang libclang-rt-14-dev  # the libFuzzer harnesses (scripts/fuzz.sh): clang, libFuzzer, ASan
  g++-aarch64-linux-gnu qemu-user file  # the device build, tested under qemu (build-aarch64.sh)
  ccache  # compiles a source the test command's builds share once (scripts/build-settings.sh)
)

case "${1:-all}" in
  main) packages=("${main_packages[@]}") ;;
  all) packages=("${main_packages[@]}" "${test_packages[@]}") ;;
  *) echo "usage: install-deps.sh [main|all]" >&2; exit 2 ;;
esac

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
