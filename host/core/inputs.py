"""Input checks shared by every family: one set of rules, clear errors before
anything is enqueued.

* :func:`points` -- an ``(n, d)`` point set, numpy or ``pyopencl.array.Array``
  (never copied to the host); integers become float64, float16 float32.
  Finiteness is checked on the device (the bounds reduction) for both.
* :func:`scalar`, :func:`radii` -- numbers with their rule in the message.
* :func:`box` -- an orthorhombic periodic box.
* :func:`histogram_edges` -- ``numpy.histogram``'s ``bins``/``range`` rules.
* :func:`device_for` -- the device of a call (``device=`` or the arrays' queue).
"""

import dataclasses
import math
import numbers

import numpy as np
import pyopencl.array as cla


def is_device_array(a):
    return isinstance(a, cla.Array)


def _typename(v):
    return type(v).__name__


@dataclasses.dataclass(frozen=True)
class Points:
    """A checked point set: ``array`` is C-contiguous ``(n, d)``, numpy or device."""
    array: object
    n: int
    d: int
    dtype: np.dtype
    on_device: bool


def points(x, name="x", *, dims=None, max_dims=8, max_n=None):
    """Check ``x`` as an ``(n, d)`` point set (a 1-D array is ``(n, 1)``)."""
    if x is None:
        raise TypeError(f"{name} is required")
    if is_device_array(x):
        a = x
        if a.dtype not in (np.float32, np.float64):
            raise TypeError(f"{name} must be float32 or float64 on the device, got {a.dtype}")
        if a.ndim == 1:
            a = a.reshape(a.shape[0], 1)
        if a.ndim != 2:
            raise ValueError(f"{name} must be an (n, d) array, got shape {a.shape}")
        if not a.flags.c_contiguous:
            raise ValueError(f"{name} must be a C-contiguous (n, d) device array")
        on_dev = True
    else:
        try:
            a = np.asarray(x)
        except Exception:
            raise TypeError(f"{name} must be an (n, d) array of numbers, got {_typename(x)}") from None
        if a.dtype.kind in "biu":
            a = a.astype(np.float64)
        elif a.dtype == np.float16:
            a = a.astype(np.float32)
        elif a.dtype not in (np.float32, np.float64):
            raise TypeError(f"{name} must be a float32 or float64 array (integers are converted to "
                            f"float64), got {a.dtype}")
        if a.ndim == 1:
            a = a.reshape(-1, 1)
        if a.ndim != 2:
            raise ValueError(f"{name} must be an (n, d) array, got shape {a.shape}")
        a = np.ascontiguousarray(a)
        on_dev = False
    n, d = int(a.shape[0]), int(a.shape[1])
    if not 1 <= d <= max_dims:
        raise ValueError(f"{name} has {d} dimensions; 1 to {max_dims} are supported")
    if dims is not None and d != dims:
        raise ValueError(f"{name} has {d} dimensions, expected {dims}")
    if max_n is not None and n > max_n:
        raise ValueError(f"{name}: at most {max_n} points, got {n}")
    return Points(a, n, d, np.dtype(a.dtype), on_dev)


def point_pair(x, y, *, dims=None, max_n=None):
    """(X, Y or None) checked together: same dimensions; the common dtype (numpy
    arrays are converted to it; device arrays must already share it)."""
    X = points(x, "x", dims=dims, max_n=max_n)
    if y is None:
        return X, None
    Y = points(y, "y", dims=X.d, max_n=max_n)
    if X.dtype != Y.dtype:
        if X.on_device and Y.on_device:
            raise TypeError(f"x and y have different dtypes ({X.dtype} and {Y.dtype})")
        dt = np.result_type(X.dtype, Y.dtype)
        X, Y = (P if P.on_device or P.dtype == dt else
                dataclasses.replace(P, array=P.array.astype(dt), dtype=np.dtype(dt)) for P in (X, Y))
        if X.dtype != Y.dtype:
            raise TypeError(f"x and y have different dtypes ({X.dtype} and {Y.dtype}); "
                            "convert the host array to the device array's dtype")
    return X, Y


def scalar(v, name, *, nonneg=True, positive=False):
    """A finite real number (``nonneg``: >= 0; ``positive``: > 0)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.number)) or \
            isinstance(v, (complex, np.complexfloating)):
        if not (isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iuf"):
            raise TypeError(f"{name} must be a real number, got {_typename(v)}")
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"{name} must be finite, got {f}")
    if positive and not f > 0:
        raise ValueError(f"{name} must be > 0, got {f}")
    if nonneg and f < 0:
        raise ValueError(f"{name} must be >= 0, got {f}")
    return f


def radii(r, name="r"):
    """(float64 array of radii, scalar given): a number, or a 1-D array of finite
    radii >= 0 in non-decreasing order (cumulative counts, as
    ``scipy.spatial.cKDTree.count_neighbors``)."""
    if np.ndim(r) == 0:
        return np.array([scalar(r, name)]), True
    try:
        a = np.asarray(r, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number or a 1-D array of numbers") from None
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a number or a non-empty 1-D array, got shape {a.shape}")
    if not np.isfinite(a).all() or (a < 0).any():
        raise ValueError(f"{name} must be finite and >= 0")
    if (np.diff(a) < 0).any():
        raise ValueError(f"{name} must be non-decreasing")
    return a, False


def box(b, d):
    """An orthorhombic periodic box as d float64 side lengths (None: no box).
    A scalar means a cube."""
    if b is None:
        return None
    try:
        if isinstance(b, (str, bytes)) or np.asarray(b).dtype.kind in "USV":   # numpy parses '1'
            raise TypeError
        a = np.asarray(b, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"box must be a number or {d} side lengths, got {_typename(b)} {b!r:.40}") from None
    if a.ndim == 0:
        a = np.full(d, float(a))
    if a.shape != (d,):
        raise ValueError(f"box must be a number or {d} side lengths, got shape {a.shape}")
    if not (np.isfinite(a).all() and (a > 0).all()):
        raise ValueError("box side lengths must be finite and > 0")
    return a


@dataclasses.dataclass(frozen=True)
class Edges:
    """Histogram edges (float64) and their shape."""
    edges: np.ndarray
    uniform: bool

    @property
    def lo(self):
        return float(self.edges[0])

    @property
    def hi(self):
        return float(self.edges[-1])

    @property
    def nbins(self):
        return len(self.edges) - 1


def histogram_edges(bins, range=None, default_range=None):
    """Edges by ``numpy.histogram``'s rules: an int ``bins`` is uniform over
    ``range`` (default ``default_range``; lo == hi widens by 0.5 each side);
    an array of edges must be 1-D and non-decreasing (``range`` is then
    ignored, as in numpy). Bins are [e_i, e_i+1), the last one closed."""
    if isinstance(bins, str):
        raise ValueError(f"bins={bins!r}: string estimators need the distances themselves and are "
                         "not supported; give a number of bins or an array of edges")
    if isinstance(bins, (bool, np.bool_)):
        raise TypeError("bins must be a positive integer or a 1-D array of edges, got a bool")
    if np.ndim(bins) == 0:
        if not isinstance(bins, (numbers.Integral, np.integer)):
            raise TypeError(f"bins must be a positive integer or a 1-D array of edges, got {bins!r}")
        nb = int(bins)
        if nb <= 0:
            raise ValueError(f"bins must be positive, when an integer; got {nb}")
        rng = range if range is not None else default_range
        if rng is None:
            raise ValueError("range=(lo, hi) is required for this histogram")
        try:
            lo, hi = (float(v) for v in rng)
        except (TypeError, ValueError):
            raise ValueError(f"range must be a pair (lo, hi) of numbers, got {rng!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"range must be finite, got {rng!r}")
        if lo > hi:
            raise ValueError(f"range must have lo <= hi, got {rng!r}")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        e = np.linspace(lo, hi, nb + 1)
        if not np.isfinite(e).all() or not (np.diff(e) > 0).all():
            raise ValueError(f"range {rng!r} cannot be cut into {nb} bins of positive width in float64")
        return Edges(e, True)
    try:
        e = np.asarray(bins, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError("bins must be a positive integer or a 1-D array of edges") from None
    if e.ndim != 1 or e.size < 2:
        raise ValueError(f"bins must be a 1-D array of at least 2 edges, got shape {e.shape}")
    if not np.isfinite(e).all():
        raise ValueError("bin edges must be finite")
    if (np.diff(e) < 0).any():
        raise ValueError("bins must increase monotonically, when an array")
    return Edges(e, False)


def device_for(device, *arrays):
    """The :class:`Device` of a call: ``device`` (None, a spec string, a
    Device, a pyopencl Device/Queue/Context), else the queue of the first
    device array among ``arrays``, else the default device. Raises TypeError
    for anything else, naming ``device=``."""
    from .device import as_device

    if device is None:
        for a in arrays:
            if is_device_array(a) and a.queue is not None:
                return as_device(a.queue)
    return as_device(device)


def check_context(device, *arrays):
    """Raise ValueError if a device array lives in another context than ``device``."""
    for a in arrays:
        if is_device_array(a) and a.context.int_ptr != device.context.int_ptr:
            raise ValueError("device arrays must live in the context of the chosen device")


__all__ = ["Points", "points", "point_pair", "scalar", "radii", "box", "Edges", "histogram_edges",
           "device_for", "check_context", "is_device_array"]

