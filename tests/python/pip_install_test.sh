#!/bin/sh
# pip_install_test.sh PYTHON SOURCE_DIR TARGET: installs the package with pip into TARGET (no
# network, no build isolation) and uses it from there, with nothing else on PYTHONPATH.
set -eu
python=$1 source=$2 target=$3
rm -rf "$target"
cd "$source"
"$python" -m pip install --quiet --no-build-isolation --no-deps --no-index --target "$target" .
rm -rf "$source/python/qnn_debug.egg-info"
cd "$target"
PYTHONPATH="$target" "$python" - <<'PY'
import os, tempfile
import numpy as np
import qnn_debug
assert os.path.dirname(qnn_debug.__file__) == os.path.join(os.getcwd(), "qnn_debug"), qnn_debug.__file__
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "s.h5")
    with qnn_debug.StoreWriter(path) as w:
        w.begin_run("r")
        w.write("x", np.arange(6, dtype=np.int8).reshape(2, 3), dtype="SFIXED_POINT_8", scale=0.5)
        w.end_run()
    back = qnn_debug.Store(path).tensor("x").numpy(dequantize=True)
    assert back.tolist() == [[0.0, 0.5, 1.0], [1.5, 2.0, 2.5]], back
print("pip-installed qnn_debug", qnn_debug.__version__, "works")
PY
