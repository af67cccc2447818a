#!/usr/bin/env bash
# `cmake --install` of the build tree into an empty prefix, then docs/examples/capture_minimal.c
# (and .cpp) built against that prefix only: through find_package(qnn_debug) (shared and static)
# and through pkg-config (shared and static). Every program must write a store that the
# installed qnn-debug reads back.
# Usage: run_install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1 source=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/qnn_debug/capture.h"
test -f "$prefix/lib/libqd_capture.a"
test -L "$prefix/lib/libqd_capture.so"
# The shared library exports the C ABI and nothing else.
leaked=$(nm -D --defined-only "$prefix/lib/libqd_capture.so" | awk '{print $3}' | grep -v '^qd_' || true)
if [[ -n "$leaked" ]]; then echo "libqd_capture.so exports more than qd_*: $leaked" >&2; exit 1; fi

# No source-tree path may reach the consumer: it sees the prefix only.
cmake -S "$source/tests/install" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" -j2 >/dev/null
if grep -rqE -- "$source/[a-z]+/include" "$work/consumer/CMakeFiles"; then
  echo "the consumer build used the source tree's headers" >&2; exit 1
fi

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c99 -o "$work/minimal_pc_shared" "$source/docs/examples/capture_minimal.c" \
  $(pkg-config --cflags --libs qnn-debug-capture) -Wl,-rpath,"$prefix/lib"
cc -std=c99 -o "$work/minimal_pc_static" "$source/docs/examples/capture_minimal.c" \
  $(pkg-config --cflags qnn-debug-capture) "$prefix/lib/libqd_capture.a" \
  $(pkg-config --static --libs-only-L --libs-only-other qnn-debug-capture) \
  $(pkg-config --static --libs-only-l qnn-debug-capture | sed 's/-lqd_capture//')
# ldd's output is captured first: `ldd | grep -q` under pipefail fails at random when grep exits
# before ldd has written everything (SIGPIPE).
if [[ $(ldd "$work/minimal_pc_static") == *libqd_capture* ]]; then
  echo "the static build links libqd_capture.so" >&2; exit 1
fi
shared_libs=$(ldd "$work/minimal_pc_shared")
if [[ $shared_libs != *"$prefix/lib/libqd_capture.so.2 "* ]]; then
  echo "the shared build does not load $prefix/lib/libqd_capture.so.2: $shared_libs" >&2; exit 1
fi

for program in consumer/minimal_c_shared consumer/minimal_c_static consumer/minimal_cpp_shared \
               minimal_pc_shared minimal_pc_static; do
  store=$work/$(basename "$program").h5
  "$work/$program" "$store" >/dev/null
  listing=$("$prefix/bin/qnn-debug" inspect --verify "$store")
  [[ $listing == *"tensors 2 "* ]] || {
    echo "$program: the installed qnn-debug does not read its store: $listing" >&2; exit 1; }
done
echo "install test ok"
