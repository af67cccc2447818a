"""Writing a store from Python, through the same writer the capture hook uses."""
import numpy as np

from . import _dtypes, _native

_ROLES = {"intermediate": 0, "graph_input": 1, "graph_output": 2}


def _as_numpy(array):
    """A numpy array of `array`: numpy as is, a torch tensor detached and on the CPU."""
    if hasattr(array, "detach") and hasattr(array, "cpu"):  # a torch tensor, without importing torch
        array = array.detach().cpu()
        if getattr(array, "is_quantized", False):
            raise TypeError("a quantized torch tensor: pass tensor.int_repr() with its scale and "
                            "zero_point")
        return array.numpy()
    return np.asarray(array)


def _sequence(value, what):
    if value is None:
        return []
    if np.ndim(value) == 0:
        return [value]
    return list(np.asarray(value).reshape(-1).tolist())


class CommitOnExit:
    """A `with` block that commits what was written (close()) when it ends normally and leaves
    nothing (abort()) when it ends with an exception."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False


class StoreWriter(CommitOnExit):
    """Writes a store: runs of tensors (numpy arrays or torch tensors) with their dtype,
    quantization and layout, and the op graph. The file appears at `path` only when the writer is
    closed without error; an exception inside a `with` block leaves nothing.

    >>> with StoreWriter("device.h5", backend="emulated") as w:
    ...     w.begin_run("run0")
    ...     w.write("conv@0", q, dtype="SFIXED_POINT_8", scale=0.02, offset=0, handles=[1])
    ...     w.end_run()
    """

    def __init__(self, path, *, producer="qnn_debug python", backend="cpu", model="",
                 naming="debug-id"):
        self.path = str(path)
        self._native = _native.Writer(self.path, producer, backend, model, naming)

    def begin_run(self, name):
        self._native.begin_run(str(name))

    def end_run(self):
        self._native.end_run()

    def write(self, name, array, *, dtype=None, handles=None, output_index=-1,
              role=None, scale=None, offset=None, zero_point=None, axis=None,
              bitwidth=0, axis_order=None):
        """Stores one tensor in the open run.

        dtype: a QNN dtype name ("UFIXED_POINT_8"...) for the array's values, when it is not the
        plain type of the array's numpy dtype. handles: debug handles as given (None: parsed from
        the name by the writer's naming preset). role: "intermediate", "graph_input" or
        "graph_output" (None: from the name, as the naming preset reads it). scale with offset (QNN: real = (q + offset) *
        scale) or zero_point (real = (q - zero_point) * scale): numbers, or one per channel of
        `axis`. axis_order: reference axis i is stored axis axis_order[i].
        """
        values = _as_numpy(array)
        stored = _dtypes.store_dtype(values.dtype, dtype)
        if role is not None and role not in _ROLES:
            raise ValueError(f"role must be one of {', '.join(_ROLES)}, not {role!r}")
        if offset is not None and zero_point is not None:
            raise ValueError("give offset (QNN convention) or zero_point, not both")
        scales = [float(s) for s in _sequence(scale, "scale")]
        offsets = [int(o) for o in _sequence(zero_point if zero_point is not None else offset,
                                              "offset")]
        if scales and not offsets:
            offsets = [0] * len(scales)
        values = values.astype(values.dtype.newbyteorder("<"), order="C", copy=False)
        self._native.write(
            str(name), values, _dtypes.code_of(stored),
            None if handles is None else [int(h) for h in handles], int(output_index),
            -1 if role is None else _ROLES[role], scales, offsets, -1 if axis is None else int(axis), int(bitwidth),
            1 if zero_point is not None else 0, [int(a) for a in (axis_order or [])])

    def graph_node(self, name, op_type, inputs, outputs, handles=()):
        """One op of the model's graph: its name, type, input and output tensor names."""
        self._native.graph_node(str(name), str(op_type), [str(i) for i in inputs],
                                [str(o) for o in outputs], [int(h) for h in handles])

    def close(self):
        """Finishes the store and puts it at its path."""
        if self._native.is_open:
            self._native.commit()

    def abort(self):
        """Drops everything written: no file appears at the path."""
        self._native.abort()
