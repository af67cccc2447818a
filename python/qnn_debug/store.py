"""Reading a qnn-debug store: runs, tensors and metadata, each tensor as numpy."""
import json

from . import _native


class Tensor:
    """One captured tensor: what the store's row says, and its values on demand."""

    __slots__ = ("_store", "seq", "run", "name", "handles", "output_index", "role", "dtype",
                 "dims", "axis_order", "quantization", "stats", "nbytes", "crc32c")

    def __init__(self, store, row):
        self._store = store
        for field in self.__slots__[1:]:
            setattr(self, field, row["data_nbytes" if field == "nbytes" else field])
        # The JSON writes non-finite statistics as "nan" / "inf" / "-inf" (docs/reports.md).
        self.stats = {k: float(v) if isinstance(v, str) else v for k, v in self.stats.items()}

    @property
    def shape(self):
        """The dims in the reference layout (the stored axis order undone)."""
        if len(self.axis_order) != len(self.dims):
            return tuple(self.dims)
        return tuple(self.dims[axis] for axis in self.axis_order)

    def numpy(self, dequantize=False, layout=None):
        """The values as a new numpy array.

        dequantize=False: the stored values, in numpy's type for them (fixed-point types as their
        storage integers, 4-bit as int8/uint8, BFLOAT_16 as float32), stored dims and layout.
        dequantize=True: float32 real values, in the reference layout (layout="stored" keeps the
        stored one). Every read checks the tensor's CRC-32C.
        """
        if not dequantize:
            if layout not in (None, "stored"):
                raise ValueError("raw values come in the stored layout; use dequantize=True")
            return self._store._native.values(self.seq)
        if layout not in (None, "reference", "stored"):
            raise ValueError(f"layout must be 'reference' or 'stored', not {layout!r}")
        return self._store._native.real_values(self.seq, layout != "stored")

    def chunks(self, piece_bytes=16 << 20):
        """The stored values as flat numpy pieces of at most `piece_bytes`, for tensors too large
        to hold at once. The CRC-32C is checked with the last piece (QnnDebugError if damaged)."""
        return self._store._native.chunks(self.seq, piece_bytes)

    def __repr__(self):
        return (f"Tensor(seq={self.seq}, run={self.run}, name={self.name!r}, dtype={self.dtype}, "
                f"dims={self.dims})")


class Run:
    __slots__ = ("id", "name", "complete", "tensors", "dropped_count")

    def __init__(self, row, tensors):
        self.id = row["id"]
        self.name = row["name"]
        self.complete = row["complete"]
        self.dropped_count = row["dropped_count"]
        self.tensors = tensors

    def tensor(self, name):
        """The first tensor of this run with `name` (KeyError naming the run if none)."""
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(f"run {self.id} ({self.name!r}) has no tensor {name!r}")

    def __repr__(self):
        return f"Run(id={self.id}, name={self.name!r}, tensors={len(self.tensors)})"


class Store:
    """A store opened for reading (`qnn-debug inspect` shows the same content).

    >>> store = Store("reference.h5")
    >>> store.runs[0].tensor("conv1").numpy(dequantize=True)
    """

    def __init__(self, path):
        self._native = _native.Store(str(path))
        doc = json.loads(self._native.inspect_json())
        self.path = str(path)
        self.format_version = doc["format_version"]
        self.metadata = doc["metadata"]
        self.warnings = doc["warnings"]
        self.graph = doc["graph_nodes"]
        self.profile_events = doc["profile_events"]
        self.memory_checkpoints = doc["memory_checkpoints"]
        self.tensors = [Tensor(self, row) for row in doc["tensors"]]
        by_run = {}
        for t in self.tensors:
            by_run.setdefault(t.run, []).append(t)
        self.runs = [Run(row, by_run.get(row["id"], [])) for row in doc["runs"]]
        self._run_by_id = {r.id: r for r in self.runs}

    def run(self, run_id):
        try:
            return self._run_by_id[run_id]
        except KeyError:
            raise KeyError(f"{self.path!r} has no run {run_id} ({len(self.runs)} runs)") from None

    def tensor(self, name, run=0):
        """The tensor `name` of run `run` (a run id)."""
        return self.run(run).tensor(name)

    def __repr__(self):
        return f"Store({self.path!r}, runs={len(self.runs)}, tensors={len(self.tensors)})"
