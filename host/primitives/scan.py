"""Exclusive prefix sum of uint32 on the device (``scan.cl.mako``), in place,
multi-level: blocks of wg * ITEMS, their totals scanned the same way, added back."""

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core.build import build, program_kernel
from ..core.launch import Events, global_size, groups, pow2_floor

TEMPLATE = "scan.cl.mako"
ITEMS = 8


def exclusive_scan(queue, data, n=None, *, events=None, read_total=True):
    """Scan the first ``n`` (default all) uint32 of ``data`` in place. Returns
    (total or None, Events): with ``read_total`` the grand total is read back
    (one small blocking read), else it stays on the device (``None``)."""
    from ..core.device import as_device

    device = as_device(queue)
    events = Events() if events is None else events
    wg = pow2_floor(min(256, device.max_work_group_size))
    n = data.size if n is None else n
    if n == 0:
        return 0, events
    prg = build(device, TEMPLATE, "scan", dict(wg_size=wg, items=ITEMS))
    chunk = wg * ITEMS
    ng = groups(n, chunk)
    sums = cla.empty(queue, ng, np.uint32, allocator=device.pool)
    events.add("scan", program_kernel(prg, "scan_block")(queue, (ng * wg,), (wg,), data.data, np.uint32(n),
                                                          sums.data))
    if ng == 1:
        if not read_total:
            return None, events
        h = device.staging(1)
        events.add("read", cl.enqueue_copy(queue, h, sums.data, is_blocking=True))
        return int(h[0]), events
    total, _ = exclusive_scan(queue, sums, ng, events=events, read_total=read_total)
    events.add("scan", program_kernel(prg, "scan_add")(queue, (global_size(n, wg),), (wg,), data.data,
                                                        np.uint32(n), sums.data))
    return total, events
