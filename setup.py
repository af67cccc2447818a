"""Builds the qnn_debug package's extension with the project's CMake build (python/CMakeLists.txt).

`pip install .` from the repository root. The C++ dependencies come from the system (Debian:
`bash scripts/install-deps.sh all`). QNN_DEBUG_BUILD_DIR=<an already configured build folder> reuses
that build instead of configuring a new one (the tests do).
"""
import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        reuse = os.environ.get("QNN_DEBUG_BUILD_DIR")
        build = Path(reuse) if reuse else Path(self.build_temp).resolve() / "cmake"
        jobs = str(os.cpu_count() or 2)
        if not reuse:
            configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                         "-DQD_BUILD_TESTS=OFF", "-DQD_BUILD_BENCHMARKS=OFF", "-DQD_WERROR=OFF",
                         f"-DPython_EXECUTABLE={sys.executable}",
                         f"-DQD_PYTHON_DIR={build / 'python'}"]
            try:
                import pybind11  # the build requirement: its CMake package, where not installed

                configure.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
            except ImportError:
                pass
            subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build), "--target", "qd_python_native", "-j", jobs],
                       check=True)
        built = next((build / "python" / "qnn_debug").glob("_native*.so"))
        target.parent.mkdir(parents=True, exist_ok=True)
        self.copy_file(str(built), str(target))


setup(ext_modules=[Extension("qnn_debug._native", sources=[])], cmdclass={"build_ext": CMakeBuild})
