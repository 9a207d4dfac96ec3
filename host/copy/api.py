"""The copy operation (the execution contract: queue in, events out)."""

import pyopencl.array as cla

from ..core.device import as_device
from . import execute
from .plan import Plan


def copy(queue, src, dst=None, *, wait_for=None, allocator=None, **options):
    """Copy the device array ``src`` (a multiple of 16 bytes) into ``dst`` (made
    from ``allocator``, default the device's pool, when None) with the tuned
    copy kernel on ``queue``. Returns ``(dst, events)``; ``options``
    (``wg_size``, ``groups_per_cu``) override the tuned plan."""
    if not isinstance(src, cla.Array):
        raise TypeError(f"src must be a pyopencl.array.Array, got {type(src).__name__}")
    if src.nbytes % 16:
        raise ValueError(f"src must be a multiple of 16 bytes long, got {src.nbytes}")
    device = as_device(queue)
    if dst is None:
        dst = cla.empty(queue, src.shape, src.dtype, allocator=allocator or device.pool)
    elif not isinstance(dst, cla.Array) or dst.nbytes != src.nbytes:
        raise ValueError("dst must be a pyopencl.array.Array of src's size in bytes")
    ctx = queue.context.int_ptr
    if src.context.int_ptr != ctx or dst.context.int_ptr != ctx:
        raise ValueError("src, dst and queue must live in one context")
    plan = Plan.resolve(device, src.nbytes, **options)
    waits = list(wait_for or []) + list(src.events) + list(dst.events)
    events = execute.run(device, queue, plan, src, dst, waits or None)
    return dst, events
