"""Point-set primitives (``points.cl.mako``): bounds on the device and the
layout of kernel coordinates.

* :func:`bounds` -- per-dimension minimum and maximum and the NaN/inf check
  of an ``(n, d)`` device array in one fused reduction, then one small read
  (the only host sync a pair statistic needs before its plan). numpy's
  ``min(axis=0)`` on an ``(n, 3)`` float32 array of 2^20 points takes 31-44 ms
  (strided reduction); this is one kernel and a read of a few hundred bytes.
* :func:`layout` -- padded SoA kernel coordinates, optionally wrapped into a
  periodic box, shifted and scaled by a power of two.
"""

import dataclasses

import numpy as np

from ..core.build import kernel
from ..core.launch import Events, global_size, groups, pow2_floor

TEMPLATE = "points.cl.mako"


def _wg(device):
    return pow2_floor(min(256, device.max_work_group_size))


def _real(dtype):
    return "double" if np.dtype(dtype) == np.float64 else "float"


@dataclasses.dataclass(frozen=True)
class Bounds:
    """Bounding box (float64) of a non-empty point set."""
    lo: np.ndarray
    hi: np.ndarray

    @property
    def extent(self):
        return self.hi - self.lo

    @property
    def maxabs(self):
        """The largest absolute coordinate."""
        return float(np.max(np.maximum(np.abs(self.lo), np.abs(self.hi))))

    @property
    def diagonal(self):
        """Length of the box diagonal (float64; inf when it overflows)."""
        with np.errstate(over="ignore"):
            e = self.extent
            m = float(np.max(e))
            if m == 0:
                return 0.0
            return float(m * np.sqrt(np.sum((e / m) ** 2)))

    @staticmethod
    def union(*bs):
        bs = [b for b in bs if b is not None]
        if not bs:
            return None
        return Bounds(np.min([b.lo for b in bs], axis=0), np.max([b.hi for b in bs], axis=0))


def bounds(queue, x, *, name="points", wait_for=None, events=None):
    """:class:`Bounds` of the device array ``x`` (n, d), or None when n == 0.
    Raises ValueError (naming ``name``) if any coordinate is NaN or inf."""
    from ..core.device import as_device

    n, d = x.shape
    if n == 0:
        return None
    device = as_device(queue)
    wg = _wg(device)
    ng = min(groups(n, wg), 4 * device.compute_units, 256)
    row = 2 * d + 1
    k = kernel(device, TEMPLATE, "bounds", "bounds", dict(orig=_real(x.dtype), dim=d, wg_size=wg))
    part = device.pool.allocate(ng * row * x.dtype.itemsize)    # a raw buffer: no Array to build
    ev = k(queue, (ng * wg,), (wg,), x.data, np.uint64(n), part,
           wait_for=list(wait_for or []) + list(x.events) or None)
    words = ng * row * x.dtype.itemsize // 4
    staged = device.staging(words)
    import pyopencl as cl

    read = cl.enqueue_copy(queue, staged[:words], part, is_blocking=True, wait_for=[ev])
    if events is not None:
        events.add("bounds", ev)
        events.add("read", read)
    rows = staged[:words].view(x.dtype).reshape(ng, row).astype(np.float64)
    if rows[:, 2 * d].any():
        raise ValueError(f"{name} contain NaN or inf")
    return Bounds(rows[:, :d].min(axis=0), rows[:, d:2 * d].max(axis=0))


def layout(queue, x, real, stride, *, shift=None, scale=1.0, box=None, offset=0, n=None,
           out=None, wait_for=None, events=None):
    """Kernel coordinates of device points ``x`` (N, d): d device buffers
    (raw pool buffers: no Array objects, which cost ~40 us each to make) of
    ``stride`` elements of dtype ``real`` (``out``: reuse these) holding points
    ``offset .. offset + n`` (default all from ``offset``), each coordinate
    wrapped into ``box`` (when given), shifted by ``shift`` (float64 per
    dimension; default 0) and multiplied by ``scale``; zeros past ``n``.
    Returns (list of arrays, Events)."""
    from ..core.device import as_device

    device = as_device(queue)
    N, d = x.shape
    n = N - offset if n is None else n
    real = np.dtype(real)
    wide = np.float64 if device.fp64 else np.float32
    if out is None:
        out = [device.pool.allocate(max(stride, 1) * real.itemsize) for _ in range(d)]
    wg = _wg(device)
    k = kernel(device, TEMPLATE, "layout", "layout",
               dict(orig=_real(x.dtype), real=_real(real), dim=d, periodic=box is not None, wg_size=wg))
    sh = np.zeros(d) if shift is None else np.asarray(shift, np.float64)
    args = [x.data, np.uint64(n), np.uint64(stride), np.uint64(offset)]
    for j in range(d):
        args.append(wide(sh[j]))
        if box is not None:
            args.append(wide(box[j]))
    args += [wide(scale)] + list(out)
    ev = k(queue, (global_size(stride, wg),), (wg,), *args,
           wait_for=list(wait_for or []) + list(x.events) or None)
    ev_list = Events() if events is None else events
    ev_list.add("layout", ev)
    return out, ev_list
