"""Sort of (uint64 key, uint32 value) pairs on the device (``sort.cl.mako``):
a bitonic sort, blocks of 2 * wg in local memory, longer strides one launch
per step. Pairs sort by (key, value)."""

import numpy as np

from ..core.build import build, program_kernel
from ..core.launch import Events, pow2_floor

TEMPLATE = "sort.cl.mako"


def block_wg(device):
    """Work-group size of the block kernels (a power of two <= 256)."""
    return pow2_floor(min(256, device.max_work_group_size))


def padded_length(device, n):
    """The length a sort of n pairs needs: a power of two >= 2 * block_wg
    (pad with the largest key and value: they sort last)."""
    return max(2 * block_wg(device), 1 << max(0, (int(n) - 1).bit_length()))


def sort_pairs(queue, keys, vals, *, wait_for=None, events=None):
    """Sort device arrays ``keys`` (uint64) and ``vals`` (uint32) in place by
    (key, value); the length must be :func:`padded_length`-shaped (a power of
    two >= 2 * block_wg). Returns Events."""
    from ..core.device import as_device

    device = as_device(queue)
    events = Events() if events is None else events
    wg = block_wg(device)
    n2 = keys.size
    block = 2 * wg
    if n2 & (n2 - 1) or n2 < block or vals.size != n2:
        raise ValueError(f"sort length must be a power of two >= {block}, got {n2}")
    prg = build(device, TEMPLATE, "sort", dict(wg_size=wg))
    nb = n2 // block
    events.add("sort", program_kernel(prg, "bitonic_block_sort")(
        queue, (nb * wg,), (wg,), keys.data, vals.data, wait_for=wait_for))
    step, merge = program_kernel(prg, "bitonic_step"), program_kernel(prg, "bitonic_block_merge")
    k = 2 * block
    while k <= n2:
        j = k // 2
        while j >= block:
            events.add("sort", step(queue, (n2 // 2,), None, keys.data, vals.data, np.uint64(k), np.uint64(j)))
            j //= 2
        events.add("sort", merge(queue, (nb * wg,), (wg,), keys.data, vals.data, np.uint64(k)))
        k *= 2
    return events
