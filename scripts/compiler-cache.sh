# Sourced by the build scripts (test.sh, sanitize.sh, fuzz.sh, build-aarch64.sh) from the
# repository root: sets compiler_launcher to the CMake arguments that put ccache in front of the
# compilers when it is installed (scripts/install-deps.sh all), or that take it away when it is
# not (or QD_CCACHE=0). CCACHE_BASEDIR makes the cache's keys relative to the repository, so a
# source compiled with the same compiler and flags in two build folders is compiled once: the
# capture hook in build/ and build/capture-only, the store and capture code in
# build/aarch64-capture and build/aarch64. A fresh clone starts with whatever the cache holds;
# reruns of unchanged sources are free.
if command -v ccache >/dev/null && [[ ${QD_CCACHE:-1} != 0 ]]; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  compiler_launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
else
  compiler_launcher=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER=)
fi
