"""Device-to-device copy (the bench kernel ``bench.cl.mako:copy``), tuned.

The smallest real operation of the library: it gives the autotuner one op that
is always present (``autotune --ops copy``) and measures the device's bandwidth
ceiling. Tuning space: the work-group size and the number of work-groups per
compute unit of the grid-stride loop.
"""

import numpy as np
import pyopencl.array as cla

from . import build
from .device import as_device
from .tuning import Tunable, check_launch, register, wg_candidates

TEMPLATE = "bench.cl.mako"


def _default(device, problem):
    return {"wg_size": device.default_wg_size(), "groups_per_cu": 64}


def _problems(quick, device):
    if device.is_gpu:
        sizes = [1 << 24] if quick else [1 << 20, 1 << 24, 1 << 28]
    else:
        sizes = [1 << 20] if quick else [1 << 16, 1 << 20, 1 << 24]
    cap = device.max_mem_alloc_size // 2
    return [{"size": min(s, cap) // 16 * 16, "dtype": "uint8", "dims": 1} for s in sizes]


def _kernels(device, params):
    return [(build.kernel(device, TEMPLATE, "copy", "copy_u4", {"wg_size": params["wg_size"]}),
             params["wg_size"])]


def _grid(device, params, n):
    wg = params["wg_size"]
    return min(-(-n // wg), device.compute_units * params["groups_per_cu"]) * wg


def _launch(device, params, state):
    """One copy of ``state['src']`` into ``state['dst']`` (poisoned first)."""
    src, dst = state["src"], state["dst"]
    q = device.queue
    n = src.nbytes // 16
    k = _kernels(device, params)[0][0]
    check_launch(device, k, params["wg_size"])
    dst.fill(np.uint32(0xDEADBEEF))
    ev = k(q, (_grid(device, params, n),), (params["wg_size"],), src.data, dst.data, np.uint64(n))
    return [ev], dst.get


def _setup(device, problem):
    q = device.queue
    words = problem["size"] // 4
    src = cla.to_device(q, np.random.default_rng(1).integers(0, 2**32, words, dtype=np.uint32))
    return {"src": src, "dst": cla.empty_like(src)}


TUNABLE = register(Tunable(
    op="copy",
    templates=[TEMPLATE],
    space={"wg_size": lambda device: wg_candidates(device, 64, 1024),
           "groups_per_cu": [4, 8, 16, 32, 64, 128]},
    default=_default,
    problems=_problems,
    setup=_setup,
    launch=_launch,
    kernels=_kernels,
    problem_defaults={"dtype": "uint8", "dims": 1},
))


def copy(src, dst=None, device=None, queue=None, events=None):
    """Copy a device array (``pyopencl.array.Array``, size a multiple of 16
    bytes) into ``dst`` (made if None) with the tuned copy kernel on ``device``
    (the default device if None; the arrays must live in its context); returns
    ``dst``. ``queue`` defaults to the device's queue; ``events`` (a list)
    collects the kernel's event (the benchmark times it)."""
    if not isinstance(src, cla.Array):
        raise TypeError(f"src must be a pyopencl.array.Array, got {type(src).__name__}")
    if src.nbytes % 16:
        raise ValueError(f"src must be a multiple of 16 bytes long, got {src.nbytes}")
    if dst is None:
        dst = cla.empty_like(src)
    elif not isinstance(dst, cla.Array) or dst.nbytes != src.nbytes:
        raise ValueError("dst must be a pyopencl.array.Array of src's size in bytes")
    dev = as_device(device)
    q = queue or dev.queue
    ctx = dev.context.int_ptr
    if src.context.int_ptr != ctx or dst.context.int_ptr != ctx or q.context.int_ptr != ctx:
        raise ValueError("src, dst and queue must live in the device's context")
    params, _ = TUNABLE.resolve(dev, {"size": src.nbytes})
    k = _kernels(dev, params)[0][0]
    check_launch(dev, k, params["wg_size"])
    n = src.nbytes // 16
    if n:
        ev = k(q, (_grid(dev, params, n),), (params["wg_size"],), src.data, dst.data, np.uint64(n))
        if events is not None:
            events.append(ev)
    return dst


__all__ = ["copy", "TUNABLE"]
