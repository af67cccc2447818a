#!/usr/bin/env bash
# The device build: cross-compiles qnn-debug for aarch64 Linux with Debian's g++-aarch64-linux-gnu
# and runs the capture and store unit tests under qemu-user. Installs what is missing (apt, sudo if
# not root), then:
#   build/aarch64-sysroot   Debian's arm64 libraries, unpacked (apt-get download + dpkg -x)
#   build/aarch64-capture   -DQD_CAPTURE_ONLY=ON: libqd_capture.so/.a as shipped, + qd_unit_tests
#   build/aarch64           everything else but tests, benchmarks and Python: importers, CLI, ...
#   build/aarch64-capture/packages   the device package: qnn-debug-capture_<version>_arm64.deb
# and checks that the outputs are aarch64 ELF files. Exit status 0 only if all of it passed.
#
# Why a sysroot folder and not `apt-get install libhdf5-dev:arm64`: Debian 12's libhdf5-dev and
# hdf5-helpers are not Multi-Arch: same, so the arm64 ones replace the amd64 ones the host build
# needs; and arm64 libraries with amd64 twins (libssl3, libkrb5-3, ...) must be the very same
# version, which makes apt upgrade about 27 amd64 packages. The sysroot changes nothing on the host
# but the foreign architecture apt knows (for `apt-get download`) and the cross tools.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)
sysroot=$root/build/aarch64-sysroot
toolchain=$root/cmake/aarch64-linux-gnu.cmake

phase="start"
fail() { echo "build-aarch64: FAILED in '$phase': $*" >&2; exit 1; }
trap 'echo "build-aarch64: FAILED in '"'"'$phase'"'"' (line $LINENO, exit $?)" >&2' ERR
timings=()
begin() { phase=$1; phase_start=$SECONDS; echo "== build-aarch64: $phase"; }
end() { timings+=("$(printf '%-38s %4ds' "$phase" $((SECONDS - phase_start)))"); }

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
quiet_log=$root/build/aarch64-logs
mkdir -p "$quiet_log"
# Runs a command with its output in a log file, shown only if it fails.
run_logged() {
  local log=$quiet_log/$1.log
  shift
  if ! "$@" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    fail "$* (full log: ${log#"$root"/})"
  fi
}

# ---- 1. Host tools and the arm64 package lists ----------------------------------------------
begin "install host tools"
# The cross compiler and qemu-user are in the project's install step, with everything else.
run_logged install-deps bash scripts/install-deps.sh all
need_update=0
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "adding the arm64 architecture to dpkg/apt (package lists only; nothing arm64 is installed)"
  $sudo dpkg --add-architecture arm64
  need_update=1
elif ! apt-cache show libhdf5-dev:arm64 >/dev/null 2>&1; then
  need_update=1
fi
if ((need_update)); then
  run_logged apt-update $sudo apt-get update -qq
fi
command -v aarch64-linux-gnu-g++ >/dev/null || fail "aarch64-linux-gnu-g++ not found"
command -v qemu-aarch64 >/dev/null || fail "qemu-aarch64 not found"
end

# ---- 2. The arm64 sysroot ----------------------------------------------------------------------
begin "arm64 sysroot"
# What the builds link or include, unpacked without their dependencies (only the headers, .so
# links, .pc and CMake files are used) ...
dev_packages=(libhdf5-dev:arm64 libre2-dev:arm64 zlib1g-dev:arm64 libfmt-dev:arm64
              libgtest-dev:arm64 libgmock-dev:arm64 nlohmann-json3-dev libeigen3-dev libcli11-dev)
# ... and the shared libraries they load, with everything those load in turn (libhdf5 -> libcurl
# -> libssl, krb5, ...), but for glibc and the GCC runtime, which the cross toolchain provides
# (its loader must not meet a different glibc build).
runtime_roots=(libhdf5-103-1 libre2-9 zlib1g libfmt9)
toolchain_provided=" gcc-12-base libc6 libc6-dev libgcc-s1 libstdc++6 "
mapfile -t runtime_packages < <(
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "${runtime_roots[@]/%/:arm64}" |
  sed -n 's/^\([a-z0-9][^ ]*\):arm64$/\1/p' | sort -u |
  while read -r p; do [[ $toolchain_provided == *" $p "* ]] || echo "$p:arm64"; done)
((${#runtime_packages[@]} > 5)) || fail "could not resolve the arm64 runtime libraries (apt-cache)"

apt_download=(apt-get download)
if [[ $(id -u) -eq 0 ]]; then apt_download+=(-o APT::Sandbox::User=root); fi
# The exact .deb files (names carry the versions): the sysroot is remade when they change.
uris=$("${apt_download[@]}" --print-uris "${dev_packages[@]}" "${runtime_packages[@]}") ||
  fail "apt-get download --print-uris failed (is the arm64 package list there? apt-get update)"
wanted=$(sed -n "s/^'[^']*' \([^ ]*\.deb\) .*/\1/p" <<<"$uris" | sort)
if [[ -f $sysroot/.packages && "$(cat "$sysroot/.packages")" == "$wanted" ]]; then
  echo "up to date: $(wc -l <<<"$wanted") packages"
else
  debs=$root/build/aarch64-debs
  rm -rf "$debs" "$sysroot.new"
  mkdir -p "$debs" "$sysroot.new"
  echo "downloading $(wc -l <<<"$wanted") Debian packages (arm64 and arch-independent)"
  pushd "$debs" >/dev/null
  if ! "${apt_download[@]}" "${dev_packages[@]}" "${runtime_packages[@]}" \
       >"$quiet_log/apt-download.log" 2>&1; then
    # Package lists older than the mirror name files it no longer has: refresh them once.
    echo "download failed; refreshing the package lists and retrying"
    run_logged apt-update $sudo apt-get update -qq
    rm -f ./*.deb
    run_logged apt-download "${apt_download[@]}" "${dev_packages[@]}" "${runtime_packages[@]}"
  fi
  popd >/dev/null
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$sysroot.new"; done
  # Absolute symlinks (libz.so -> /lib/aarch64-linux-gnu/libz.so.1.2.13) point into the sysroot.
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    if [[ $target == /* ]]; then ln -sfn "$sysroot$target" "$link"; fi
  done < <(find "$sysroot.new" -type l -print0)
  [[ -f $sysroot.new/usr/include/hdf5/serial/hdf5.h ]] || fail "no arm64 HDF5 headers unpacked"
  echo "$wanted" >"$sysroot.new/.packages"
  rm -rf "$sysroot" "$debs"
  mv "$sysroot.new" "$sysroot"
fi
end

# ---- 3. Configure and build ---------------------------------------------------------------------
# Every library and program is a unity build, the default (docs/performance.md, "First run"), and
# so are the capture build's test programs.
source scripts/build-settings.sh
common=(-DCMAKE_TOOLCHAIN_FILE="$toolchain" -DQD_AARCH64_SYSROOT="$sysroot"
        -DCMAKE_BUILD_TYPE=Release -DQD_WERROR=ON -DQD_BUILD_BENCHMARKS=OFF -DQD_BUILD_PYTHON=OFF
        "${compiler_launcher[@]}")

begin "build aarch64-capture"
run_logged configure-capture cmake -S . -B build/aarch64-capture "${common[@]}" \
  -DQD_CAPTURE_ONLY=ON -DQD_BUILD_TESTS=ON -DQD_UNITY_TEST_PROGRAMS=ON
run_logged build-capture cmake --build build/aarch64-capture -j"$jobs"
end

# A unity build (158 CPU-seconds against 246 one source at a time, 2026-12-02, ccache off); the
# libraries the capture build compiled are the same batches, so ccache gives them back.
begin "build aarch64 (importers, CLI)"
run_logged configure-full cmake -S . -B build/aarch64 "${common[@]}" -DQD_BUILD_TESTS=OFF
run_logged build-full cmake --build build/aarch64 -j"$jobs"
end

# ---- 4. Tests under qemu ------------------------------------------------------------------------
begin "capture/store tests under qemu"
ctest --test-dir build/aarch64-capture --output-on-failure -j"$jobs" --timeout 600 ||
  fail "unit tests failed under qemu-aarch64 (build/aarch64-capture)"
end

# The shipped libraries as an integrator links them: docs/examples/capture_minimal.c (plain C99)
# against libqd_capture.so, and against libqd_capture.a with HDF5 and RE2; each writes a store,
# and the aarch64 qnn-debug verifies it (every CRC) under qemu.
begin "shipped libraries and CLI under qemu"
package=$root/build/aarch64-capture/capture/package
arch_libs=$sysroot/usr/lib/aarch64-linux-gnu
smoke=$root/build/aarch64-capture/smoke
rm -rf "$smoke" && mkdir -p "$smoke"
cc=(aarch64-linux-gnu-gcc -std=c99 -O2 -Wall -Wextra -Wpedantic -Werror
    -Icapture/include -Ibase/include docs/examples/capture_minimal.c
    "-Wl,-rpath-link,$arch_libs:$sysroot/lib/aarch64-linux-gnu")
run_logged link-shared "${cc[@]}" -o "$smoke/minimal-shared" -L"$package" -lqd_capture
run_logged link-static "${cc[@]}" -o "$smoke/minimal-static" "$package/libqd_capture.a" \
  "$arch_libs/hdf5/serial/libhdf5.so" "$arch_libs/libre2.so" -lstdc++ -lm -lpthread
qemu=(qemu-aarch64 -L /usr/aarch64-linux-gnu -E
      "LD_LIBRARY_PATH=$package:$arch_libs:$sysroot/lib/aarch64-linux-gnu")
"${qemu[@]}" build/aarch64/cli/qnn-debug --version >/dev/null ||
  fail "build/aarch64/cli/qnn-debug --version failed under qemu-aarch64"
for kind in shared static; do
  "${qemu[@]}" "$smoke/minimal-$kind" "$smoke/minimal-$kind.h5" ||
    fail "capture_minimal linked to libqd_capture ($kind) failed under qemu-aarch64"
  run_logged "inspect-$kind" "${qemu[@]}" build/aarch64/cli/qnn-debug inspect --verify \
    "$smoke/minimal-$kind.h5"
  echo "capture_minimal ($kind libqd_capture): store written and verified"
done
end

# ---- 5. The device package ---------------------------------------------------------------------
# The capture library's .deb for arm64 (cmake/packaging.cmake): what a device installs.
begin "device package"
packages=$root/build/aarch64-capture/packages
rm -rf "$packages"
run_logged cpack cpack --config build/aarch64-capture/CPackConfig.cmake -G DEB -B "$packages"
device_deb=$(echo "$packages"/qnn-debug-capture_*_arm64.deb)
[[ -f $device_deb ]] || fail "cpack wrote no qnn-debug-capture_*_arm64.deb: $(ls "$packages")"
[[ $(dpkg-deb -f "$device_deb" Architecture) == arm64 ]] || fail "$device_deb is not arm64"
rm -rf "$packages/root" && dpkg -x "$device_deb" "$packages/root"
# The CMake package must name HDF5 and RE2 where the device has them, not in this sysroot.
if grep -rl "$sysroot" "$packages/root"; then fail "the device package names $sysroot"; fi
echo "${device_deb#"$root"/}: $(dpkg-deb -f "$device_deb" Package) $(dpkg-deb -f "$device_deb" \
  Version) arm64, Depends: $(dpkg-deb -f "$device_deb" Depends)"
end

# ---- 6. The outputs are aarch64 ------------------------------------------------------------------
begin "check outputs"
outputs=(build/aarch64-capture/capture/package/libqd_capture.so
         build/aarch64-capture/capture/package/libqd_capture.a
         build/aarch64-capture/packages/root/usr/lib/libqd_capture.so
         build/aarch64/cli/qnn-debug build/aarch64/fixtures/qd-fixture-gen)
for output in "${outputs[@]}"; do
  [[ -e $output ]] || fail "missing output $output"
  if [[ $output == *.a ]]; then
    # An archive: every member must be an aarch64 object.
    tmp=$(mktemp -d)
    (cd "$tmp" && aarch64-linux-gnu-ar x "$root/$output")
    bad=$(file "$tmp"/*.o | grep -v 'ELF 64-bit LSB relocatable, ARM aarch64' || true)
    rm -rf "$tmp"
    [[ -z $bad ]] || fail "$output holds non-aarch64 members: $bad"
    echo "$output: current ar archive, aarch64 objects only"
  else
    description=$(file -L "$output")
    [[ $description == *"ELF 64-bit LSB"*"ARM aarch64"* ]] || fail "not aarch64 ELF: $description"
    echo "${description/#"$root"\//}"
  fi
done
end

echo "== build-aarch64: timings"
printf '  %s\n' "${timings[@]}"
echo "build-aarch64: ok (${SECONDS}s)"
