# Sourced by the build scripts (demo.sh, test.sh, sanitizer-build.sh, build-aarch64.sh) from the
# repository root.
#
# New build folders use Ninja when it is installed (scripts/install-deps.sh): it starts a target's
# compiles before the libraries it links are built and keeps both cores busy to the end, where
# make leaves one idle while the last target's few large files compile. A folder configured
# before keeps the generator it has (CMake refuses to switch one).
if command -v ninja >/dev/null && [[ -z ${CMAKE_GENERATOR:-} ]]; then
  export CMAKE_GENERATOR=Ninja
fi

# compiler_launcher: the CMake arguments that put ccache in front of the
# compilers when it is installed (scripts/install-deps.sh all), or that take it away when it is
# not (or QD_CCACHE=0). A source compiled with the same compiler and flags in two build folders
# of this clone is compiled once: the capture hook in build/ and build/capture-only, the store and
# capture code in build/aarch64-capture and build/aarch64. That needs the absolute paths CMake
# writes: CCACHE_BASEDIR would rewrite them relative to each folder, and build/ and
# build/capture-only, at different depths, would then never share an object (so it is unset
# here). A fresh clone starts with whatever the cache holds; reruns of unchanged sources are free.
if command -v ccache >/dev/null && [[ ${QD_CCACHE:-1} != 0 ]]; then
  unset CCACHE_BASEDIR
  compiler_launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
else
  compiler_launcher=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER=)
fi
