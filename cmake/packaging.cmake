# Debian packages of what `cmake --install` installs, one per CPack component:
#   tools    qnn-debug      the qnn-debug CLI (statically linked to the project's own libraries)
#   capture  qnn-debug-capture  the capture hook: headers, libqd_capture.so and .a, the CMake
#                           package (find_package(qnn_debug)) and pkg-config file
# `cpack --config build/CPackConfig.cmake` (in the build folder: `cpack`) writes
# qnn-debug_<version>_<arch>.deb and qnn-debug-capture_<version>_<arch>.deb; a capture-only
# build (-DQD_CAPTURE_ONLY=ON, the device build) writes the capture package alone, for the
# target's architecture. docs/user-guide.md, "Packages", says how to install them.

# The Debian 12 packages of the shared libraries each package's files load (readelf -d, NEEDED).
# tests/install/run_deb_test.sh checks that every NEEDED library belongs to one of them.
set(QD_DEB_CAPTURE_DEPENDS "libhdf5-103-1, libre2-9, libstdc++6, libgcc-s1, libc6")
set(QD_DEB_TOOLS_DEPENDS "${QD_DEB_CAPTURE_DEPENDS}, libfmt9, zlib1g")

# Debian's name for the target's architecture (cross builds package for the target, not the host).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(QD_DEB_ARCHITECTURE arm64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(QD_DEB_ARCHITECTURE amd64)
else()
  message(STATUS "packaging: no Debian architecture known for ${CMAKE_SYSTEM_PROCESSOR}; "
                 "CPack asks dpkg")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME qnn-debug)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "qnn-debug maintainers <qnn-debug@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
if(QD_DEB_ARCHITECTURE)
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${QD_DEB_ARCHITECTURE})
endif()

set(CPACK_COMPONENTS_ALL capture)
if(NOT QD_CAPTURE_ONLY)
  list(APPEND CPACK_COMPONENTS_ALL tools)
endif()

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME qnn-debug)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${QD_DEB_TOOLS_DEPENDS}")
# Each description follows the synopsis line CPack takes from the project's DESCRIPTION.
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "The qnn-debug CLI: captures dumps (ExecuTorch ETDump, qnn-net-run folders, npz) into a store,
diffs a device run against a reference op by op, and writes JSON, HTML and CSV reports.")

set(CPACK_DEBIAN_CAPTURE_PACKAGE_NAME qnn-debug-capture)
set(CPACK_DEBIAN_CAPTURE_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_CAPTURE_PACKAGE_DEPENDS "${QD_DEB_CAPTURE_DEPENDS}")
# libqd_capture.a and the pkg-config file name HDF5's and RE2's development files.
set(CPACK_DEBIAN_CAPTURE_PACKAGE_RECOMMENDS "libhdf5-dev, libre2-dev")
set(CPACK_COMPONENT_CAPTURE_DESCRIPTION "The capture hook a runtime links: its intermediate tensors into an HDF5 store.
libqd_capture.so and libqd_capture.a (C ABI, qnn_debug/capture.h), a CMake package
(find_package(qnn_debug)) and a pkg-config file (qnn-debug-capture).")

include(CPack)
