"""Runs of equal keys in a sorted uint64 device array (``compact.cl.mako``):
flags, an exclusive scan, and a scatter of each run's key, start and length."""

import dataclasses

import numpy as np
import pyopencl.array as cla

from ..core.build import build, program_kernel
from ..core.launch import Events, global_size, pow2_floor
from .scan import exclusive_scan

TEMPLATE = "compact.cl.mako"


@dataclasses.dataclass
class Runs:
    """``keys``/``start``/``length`` per run (device arrays of ``count``
    entries) and ``index``: the run of each element (device, n entries)."""
    count: int
    keys: object
    start: object
    length: object
    index: object


def runs(queue, keys, n, *, events=None):
    """The runs of the first ``n`` (sorted) keys; one small read (the run count)."""
    from ..core.device import as_device

    device = as_device(queue)
    events = Events() if events is None else events
    wg = pow2_floor(min(256, device.max_work_group_size))
    prg = build(device, TEMPLATE, "runs", dict(wg_size=wg))
    gsz = (global_size(n, wg),)
    pos = cla.empty(queue, max(n, 1), np.uint32, allocator=device.pool)
    events.add("compact", program_kernel(prg, "run_flags")(queue, gsz, (wg,), keys.data, np.uint32(n),
                                                            pos.data))
    count, _ = exclusive_scan(queue, pos, n, events=events)
    rk = cla.empty(queue, max(count, 1), np.uint64, allocator=device.pool)
    rs = cla.empty(queue, max(count, 1), np.uint32, allocator=device.pool)
    rl = cla.empty(queue, max(count, 1), np.uint32, allocator=device.pool)
    events.add("compact", program_kernel(prg, "run_scatter")(queue, gsz, (wg,), keys.data, np.uint32(n),
                                                              pos.data, rk.data, rs.data))
    events.add("compact", program_kernel(prg, "run_lengths")(queue, (global_size(count, wg),), (wg,),
                                                              rs.data, np.uint32(count), np.uint32(n),
                                                              rl.data))
    return Runs(count, rk[:count], rs[:count], rl[:count], pos[:n]), events
