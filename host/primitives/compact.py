"""Stream compaction on the device (``compact.cl.mako``): runs of equal keys
in a sorted uint64 array (flags, an exclusive scan, and a scatter of each
run's key, start and length), and the rows of a point set whose first
coordinate lies in a range (:func:`select_rows`)."""

import dataclasses

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core.build import build, program_kernel
from ..core.launch import Events, global_size, pow2_floor
from .scan import exclusive_scan

TEMPLATE = "compact.cl.mako"


@dataclasses.dataclass
class Runs:
    """``keys``/``start``/``length`` per run (device arrays of ``count``
    entries), ``index``: the run of each element (device, n entries), and
    ``longest``: a device word holding the longest run's length, final
    after the event ``done`` (read it with :meth:`longest_length`)."""
    count: int
    keys: object
    start: object
    length: object
    index: object
    longest: object
    done: object

    def longest_length(self, queue):
        """The longest run's length (one small blocking read; 0 without runs)."""
        if not self.count:
            return 0
        h = np.empty(1, np.uint32)
        cl.enqueue_copy(queue, h, self.longest, is_blocking=True, wait_for=[self.done])
        return int(h[0])


def runs(queue, keys, n, *, events=None):
    """The runs of the first ``n`` (sorted) keys; one small read (the run count); the
    longest run's length stays on the device (:meth:`Runs.longest_length`)."""
    from ..core.device import as_device

    device = as_device(queue)
    events = Events() if events is None else events
    wg = pow2_floor(min(256, device.max_work_group_size))
    prg = build(device, TEMPLATE, "runs", dict(wg_size=wg))
    gsz = (global_size(n, wg),)
    pos = cla.empty(queue, max(n, 1), np.uint32, allocator=device.pool)
    longest = device.pool(4)
    events.add("compact", program_kernel(prg, "run_flags")(queue, gsz, (wg,), keys.data, np.uint32(n),
                                                            pos.data, longest))
    count, _ = exclusive_scan(queue, pos, n, events=events)
    rk = cla.empty(queue, max(count, 1), np.uint64, allocator=device.pool)
    rs = cla.empty(queue, max(count, 1), np.uint32, allocator=device.pool)
    rl = cla.empty(queue, max(count, 1), np.uint32, allocator=device.pool)
    events.add("compact", program_kernel(prg, "run_scatter")(queue, gsz, (wg,), keys.data, np.uint32(n),
                                                              pos.data, rk.data, rs.data))
    done = events.add("compact", program_kernel(prg, "run_lengths")(queue, (global_size(count, wg),), (wg,),
                                                                     rs.data, np.uint32(count), np.uint32(n),
                                                                     rl.data, longest))
    return Runs(count, rk[:count], rs[:count], rl[:count], pos[:n], longest, done), events


def select_rows(queue, x, lo, hi, *, rest=False, start=0, events=None):
    """The rows of the (n, d) float32/float64 device array ``x`` whose first
    coordinate s has lo <= s < hi, compared in x's dtype (``lo``, ``hi``:
    values of it; -inf / inf open the ends; ``rest``: every row whose s is
    not below lo, NaN and +inf included): (rows, an (m, d) device array in
    x's order; their positions plus ``start``, int64 device array). n <
    2^32. One small read (m)."""
    from ..core.device import as_device

    device = as_device(queue)
    events = Events() if events is None else events
    n, d = x.shape
    if n >= 2 ** 32:
        raise ValueError(f"select_rows takes fewer than 2^32 rows, got {n}")
    real = np.dtype(x.dtype).type
    if n == 0:
        return x, cla.empty(queue, 0, np.int64, allocator=device.pool)
    wg = pow2_floor(min(256, device.max_work_group_size))
    prg = build(device, TEMPLATE, "select", dict(real="double" if x.dtype == np.float64 else "float", dims=d,
                                                 wg_size=wg))
    gsz = (global_size(n, wg),)
    pos = cla.empty(queue, n, np.uint32, allocator=device.pool)
    args = (real(lo), real(hi), np.uint32(bool(rest)))
    events.add("select", program_kernel(prg, "select_flags")(queue, gsz, (wg,), x.data, np.uint32(n), *args,
                                                              pos.data))
    m, _ = exclusive_scan(queue, pos, n, events=events)
    rows = cla.empty(queue, (max(m, 1), d), x.dtype, allocator=device.pool)
    ids = cla.empty(queue, max(m, 1), np.int64, allocator=device.pool)
    if m:
        events.add("select", program_kernel(prg, "select_gather")(queue, gsz, (wg,), x.data, np.uint32(n),
                                                                   *args, pos.data, np.int64(start), rows.data,
                                                                   ids.data))
    return rows[:m], ids[:m]
