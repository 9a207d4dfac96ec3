"""The tuner's side of the copy op (imported only by clkernels.autotune)."""

import numpy as np
import pyopencl.array as cla

from . import execute
from .plan import TUNABLE, Plan


def _problems(quick, device):
    if device.is_gpu:
        sizes = [1 << 24] if quick else [1 << 20, 1 << 24, 1 << 28]
    else:
        sizes = [1 << 20] if quick else [1 << 16, 1 << 20, 1 << 24]
    cap = device.max_mem_alloc_size // 2
    return [{"size": min(s, cap) // 16 * 16, "dtype": "uint8", "dims": 1} for s in sizes]


def _plan(params):
    return Plan(int(params["wg_size"]), int(params["groups_per_cu"]))


def _kernels(device, params):
    plan = _plan(params)
    return [(execute.copy_kernel(device, plan), plan.wg_size)]


def _setup(device, problem):
    q = device.queue
    words = problem["size"] // 4
    src = cla.to_device(q, np.random.default_rng(1).integers(0, 2**32, words, dtype=np.uint32))
    return {"src": src, "dst": cla.empty_like(src)}


def _launch(device, params, state):
    """One copy of ``state['src']`` into ``state['dst']`` (poisoned first)."""
    src, dst = state["src"], state["dst"]
    dst.fill(np.uint32(0xDEADBEEF))
    events = execute.run(device, device.queue, _plan(params), src, dst)
    return events, dst.get


TUNABLE.benchmark(_problems, _setup, _launch, _kernels)
