"""The store's dtypes (QNN data-type names and codes) as the C++ library defines them, and their
numpy equivalents: read from the library, never restated here."""
import numpy as np

from . import _native

_ALL = {d["name"]: d for d in _native.dtypes()}

# The dtype a numpy array is stored as when the caller names none: the library's plain dtype of
# that numpy type (INT_8 for int8, never SFIXED_POINT_8).
_FROM_NUMPY = {np.dtype(d["numpy"]): name for name, d in _ALL.items() if d["plain"]}


def names():
    return list(_ALL)


def code_of(name):
    return _ALL[name]["code"]


def info(name):
    return _ALL[name]


def store_dtype(array_dtype, requested=None):
    """The QNN dtype name an array of `array_dtype` is stored as: `requested` when given (it must
    hold the same numpy values: UFIXED_POINT_8 for uint8, ...), else the plain type."""
    array_dtype = np.dtype(array_dtype).newbyteorder("=")
    if requested is None:
        if array_dtype not in _FROM_NUMPY:
            raise TypeError(f"arrays of dtype {array_dtype} cannot be stored (bool, int8-64, "
                            f"uint8-64 and float16/32/64 can)")
        return _FROM_NUMPY[array_dtype]
    if requested not in _ALL:
        raise ValueError(f"unknown dtype {requested!r}; known: {', '.join(_ALL)}")
    if requested == "BFLOAT_16":  # numpy has none: its bits, as a 16-bit integer view
        if array_dtype not in (np.dtype(np.uint16), np.dtype(np.int16)):
            raise TypeError("BFLOAT_16 is written from its bits: a uint16 or int16 view "
                            f"(torch: t.view(torch.int16).numpy()), not {array_dtype}")
        return requested
    wanted = np.dtype(_ALL[requested]["numpy"])
    if _ALL[requested]["bits"] == 4:
        raise ValueError(f"{requested} cannot be written from numpy (it has no 4-bit type)")
    if wanted != array_dtype:
        raise TypeError(f"dtype {requested} holds {wanted} values, the array holds {array_dtype}")
    return requested
