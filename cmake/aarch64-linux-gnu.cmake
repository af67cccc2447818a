# CMake toolchain file: qnn-debug for aarch64 Linux, cross-compiled on an x86-64 Debian 12 host
# with Debian's g++-aarch64-linux-gnu (C library and libstdc++ under /usr/aarch64-linux-gnu).
#
#   cmake -S . -B build/aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake ...
#
# The arm64 libraries (HDF5, RE2, zlib, fmt, GoogleTest, and the header-only nlohmann-json,
# Eigen, CLI11) are searched in QD_AARCH64_SYSROOT only: a folder holding Debian's arm64
# packages unpacked with `dpkg -x`, which scripts/build-aarch64.sh makes in build/aarch64-sysroot
# (the default). On a machine where they are installed through multiarch instead
# (apt-get install libhdf5-dev:arm64 ..., which replaces the amd64 libhdf5-dev), pass
# -DQD_AARCH64_SYSROOT=/ .
# The compiler is not given --sysroot: glibc and libstdc++ stay the cross toolchain's own.
# Tests run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR), so ctest works on the host.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# The sysroot: -D, else the environment, else build/aarch64-sysroot beside this file's project.
# (try_compile projects re-read this file: they get the value through the environment.)
if(NOT QD_AARCH64_SYSROOT)
  if(DEFINED ENV{QD_AARCH64_SYSROOT})
    set(QD_AARCH64_SYSROOT "$ENV{QD_AARCH64_SYSROOT}")
  else()
    get_filename_component(QD_AARCH64_SYSROOT "${CMAKE_CURRENT_LIST_DIR}/../build/aarch64-sysroot"
                           ABSOLUTE)
  endif()
endif()
set(QD_AARCH64_SYSROOT "${QD_AARCH64_SYSROOT}" CACHE PATH
    "Folder holding Debian's arm64 packages (unpacked), or / for multiarch")
set(ENV{QD_AARCH64_SYSROOT} "${QD_AARCH64_SYSROOT}")
if(NOT EXISTS "${QD_AARCH64_SYSROOT}/usr/include/hdf5/serial/hdf5.h")
  message(FATAL_ERROR "aarch64 toolchain: no arm64 HDF5 in QD_AARCH64_SYSROOT=${QD_AARCH64_SYSROOT} "
                      "(scripts/build-aarch64.sh makes it)")
endif()
set(_qd_arch_libs "${QD_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu")

# Libraries, headers and CMake packages only from the arm64 roots; programs (pkg-config, flatc,
# ...) from the host.
set(CMAKE_FIND_ROOT_PATH "${QD_AARCH64_SYSROOT}" /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# RE2 is found through pkg-config: the arm64 .pc files only, paths prefixed with the sysroot.
set(ENV{PKG_CONFIG_LIBDIR} "${_qd_arch_libs}/pkgconfig:${QD_AARCH64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
if(NOT QD_AARCH64_SYSROOT STREQUAL "/")
  set(ENV{PKG_CONFIG_SYSROOT_DIR} "${QD_AARCH64_SYSROOT}")
endif()

# HDF5: FindHDF5 would run the host's h5cc and get the amd64 paths. An empty (not NOTFOUND)
# wrapper makes it skip the wrapper and search the roots above, which finds the arm64 headers
# (usr/include/hdf5/serial: H5pubconf.h differs between amd64 and arm64) and libraries
# (usr/lib/aarch64-linux-gnu/hdf5/serial).
set(HDF5_C_COMPILER_EXECUTABLE "" CACHE FILEPATH "No h5cc when cross-compiling" FORCE)
set(HDF5_NO_FIND_PACKAGE_CONFIG_FILE TRUE)

# The linker resolves the arm64 libraries' own dependencies (libhdf5 -> libcurl, libsz, ...)
# in the sysroot; nothing of it is recorded in the outputs.
set(_qd_rpath_link "-Wl,-rpath-link,${_qd_arch_libs}:${QD_AARCH64_SYSROOT}/lib/aarch64-linux-gnu")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_qd_rpath_link}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_qd_rpath_link}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${_qd_rpath_link}")

# ctest and gtest_discover_tests run the aarch64 programs under qemu-user: glibc and libstdc++
# from the cross toolchain (-L), the other arm64 libraries from the sysroot.
find_program(QD_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(QD_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${QD_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu;-E;LD_LIBRARY_PATH=${_qd_arch_libs}:${_qd_arch_libs}/hdf5/serial:${QD_AARCH64_SYSROOT}/lib/aarch64-linux-gnu")
endif()
