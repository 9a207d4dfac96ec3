"""Enqueue the copy kernel (no decisions: the plan made them)."""

import numpy as np

from ..core.build import kernel
from ..core.launch import Events, check_launch
from .plan import TEMPLATE


def copy_kernel(device, plan):
    return kernel(device, TEMPLATE, "copy", "copy_u4", {"wg_size": plan.wg_size})


def run(device, queue, plan, src, dst, wait_for=None):
    """Copy ``src`` into ``dst`` (device arrays, a multiple of 16 bytes)."""
    events = Events()
    nwords = src.nbytes // 16
    if nwords:
        k = copy_kernel(device, plan)
        check_launch(device, k, plan.wg_size)
        events.add("kernel", k(queue, (plan.global_size(device, nwords),), (plan.wg_size,),
                               src.data, dst.data, np.uint64(nwords), wait_for=wait_for))
    return events
