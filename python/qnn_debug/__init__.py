"""qnn_debug: numerical debugging of quantized models on Qualcomm NPUs, from Python.

Capture a PyTorch reference run (`capture_torch`, quantized with `encodings=`; run by run in a
`capture_session`, teacher-forced with another store's inputs by `teacher_inputs`), replay each op
on a device's values (`replay`), read and write qnn-debug stores (`Store`, `StoreWriter`) and
diff two runs (`diff`) with the same C++ code the `qnn-debug` command runs; predict a change to
the encodings and search for the fewest that reach a target (`fix`, docs/fix.md).
docs/python.md has the guide.
"""
from ._native import QnnDebugError, version as __version__
from .diff import Report, diff
from .replay import ReplaySummary, replay
from .store import Run, Store, Tensor
from .torch_capture import (CaptureSession, CaptureSummary, CaptureWarning, TeacherInputs,
                            TorchTraceError, capture_session, capture_torch, teacher_inputs)
from .writer import StoreWriter
from . import fix  # noqa: E402  (fix.predict, fix.search: docs/fix.md)

__all__ = ["CaptureSession", "CaptureSummary", "CaptureWarning", "QnnDebugError", "ReplaySummary",
           "Report", "Run", "Store", "StoreWriter", "TeacherInputs", "Tensor", "TorchTraceError",
           "capture_session", "capture_torch", "diff", "fix", "replay", "teacher_inputs", "__version__"]
