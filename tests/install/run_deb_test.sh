#!/usr/bin/env bash
# The Debian packages as a user gets them: `cpack` of the build tree, then
#   - each .deb's control fields: Package, Architecture (this machine's), and Depends naming
#     the Debian package of every shared library its programs and libraries load (NEEDED),
#     each of them a package dpkg knows here;
#   - the host tools' .deb unpacked into an empty root (`dpkg -x`) and `qnn-debug demo` run from
#     there, with nothing of the build tree: it exits 0 and its report names the injected op;
#   - the capture library's .deb holds the headers, the .so and .a, the CMake package and the
#     pkg-config file; the tools' .deb holds the CLI alone.
# Usage: run_deb_test.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$(cd "$1" && pwd) work=$2
rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
fail() { echo "deb test: $*" >&2; exit 1; }

cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/packages" >"$work/cpack.log" 2>&1 ||
  { tail -n 30 "$work/cpack.log" >&2; fail "cpack failed"; }
arch=$(dpkg --print-architecture)
tools_deb=$(echo "$work"/packages/qnn-debug_*_"$arch".deb)
capture_deb=$(echo "$work"/packages/qnn-debug-capture_*_"$arch".deb)
[[ -f $tools_deb ]] || fail "no qnn-debug_*_$arch.deb: $(ls "$work/packages")"
[[ -f $capture_deb ]] || fail "no qnn-debug-capture_*_$arch.deb: $(ls "$work/packages")"

# The Debian package that holds the library FILE loads as SONAME (libz.so.1 -> zlib1g): the
# path the loader resolves (ldd), as dpkg lists it (/lib or, merged /usr, /usr/lib).
owner_of() {
  local file=$1 soname=$2 path owner=""
  path=$(ldd "$file" | awk -v soname="$soname" '
    $1 == soname && $2 == "=>" {print $3}
    substr($1, length($1) - length(soname)) == "/" soname {print $1}  # the loader: no "=>"')
  [[ -n $path ]] || fail "${file#"$work"/} loads $soname, which is not found here"
  for candidate in "$path" "/usr$path" "$(realpath "$path")"; do
    owner=$(dpkg -S "$candidate" 2>/dev/null | head -n 1 || true)
    [[ -z $owner ]] || break
  done
  [[ -n $owner ]] || fail "no installed package holds $path ($soname)"
  owner=${owner%%:*}  # "zlib1g:amd64: /lib/...": the package name
  echo "${owner%%,*}"
}

# check_deb DEB PACKAGE ROOT: fields, and every NEEDED library of ROOT's ELF files in Depends.
check_deb() {
  local deb=$1 package=$2 root=$3
  [[ $(dpkg-deb -f "$deb" Package) == "$package" ]] ||
    fail "$deb: Package is '$(dpkg-deb -f "$deb" Package)', not $package"
  [[ $(dpkg-deb -f "$deb" Architecture) == "$arch" ]] ||
    fail "$deb: Architecture is '$(dpkg-deb -f "$deb" Architecture)', not $arch"
  local depends
  depends=" $(dpkg-deb -f "$deb" Depends | sed 's/([^)]*)//g; s/,/ /g') "
  for dependency in $depends; do
    dpkg-query -W "$dependency" >/dev/null 2>&1 ||
      fail "$package Depends on $dependency, which is no package dpkg knows here"
  done
  local elf_files
  elf_files=$(find "$root" -type f -exec sh -c 'head -c 4 "$1" | grep -q ELF' _ {} \; -print)
  [[ -n $elf_files ]] || fail "$deb holds no ELF file"
  for file in $elf_files; do
    if readelf -d "$file" | grep -qE '\((RPATH|RUNPATH)\)'; then
      fail "${file#"$root"} carries an RPATH: $(readelf -d "$file" | grep -E 'R(UN)?PATH')"
    fi
    for soname in $(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      local owner
      owner=$(owner_of "$file" "$soname")
      [[ $depends == *" $owner "* ]] ||
        fail "${file#"$root"} loads $soname (package $owner), not in $package's Depends:$depends"
    done
  done
  echo "$package: Package, Architecture $arch, Depends:$depends cover every NEEDED library"
}

# The host tools: the CLI alone, and the demo from the unpacked root.
tools_root=$work/tools-root
dpkg -x "$tools_deb" "$tools_root"
files=$(cd "$tools_root" && find . -type f -o -type l | sort)
[[ $files == "./usr/bin/qnn-debug" ]] || fail "the tools package holds more than the CLI: $files"
check_deb "$tools_deb" qnn-debug "$tools_root"
# An empty environment but PATH: no LD_LIBRARY_PATH into the build tree.
if ! env -i PATH=/usr/bin:/bin "$tools_root/usr/bin/qnn-debug" demo --out "$work/demo" \
       --fault layout --at conv2 >"$work/demo.log" 2>&1; then
  cat "$work/demo.log" >&2
  fail "qnn-debug demo from the unpacked package failed"
fi
grep -q '^first divergence: group h[0-9]* (conv2__debugID_' "$work/demo.log" ||
  { cat "$work/demo.log" >&2; fail "the demo's report does not name conv2 first"; }
grep -q '^demo ok: injected layout at conv2' "$work/demo.log" ||
  { cat "$work/demo.log" >&2; fail "the demo does not say ok"; }
[[ -s $work/demo/report.html && -s $work/demo/report.json ]] || fail "no demo report"
echo "qnn-debug demo from the package: exit 0, first divergence conv2"

# The capture library: everything an integrator links.
capture_root=$work/capture-root
dpkg -x "$capture_deb" "$capture_root"
for path in usr/include/qnn_debug/capture.h usr/include/qnn_debug/capture.hpp \
            usr/include/qnn_debug/base/status.h usr/lib/libqd_capture.a usr/lib/libqd_capture.so \
            usr/lib/cmake/qnn_debug/qnn_debugConfig.cmake \
            usr/lib/pkgconfig/qnn-debug-capture.pc; do
  [[ -e $capture_root/$path ]] || fail "the capture package has no /$path"
done
[[ ! -e $capture_root/usr/bin ]] || fail "the capture package holds programs: $(ls "$capture_root/usr/bin")"
check_deb "$capture_deb" qnn-debug-capture "$capture_root"
echo "deb test ok"
