"""The tuner's side of the segmented sort (imported only by clkernels.autotune):
representative problems, their device inputs, one launch, the kernels a
configuration launches."""

import numpy as np
import pyopencl.array as cla

from . import execute
from .api import sort
from .plan import TUNABLE, Plan


def powerlaw_lengths(rng, n_total, alpha, max_len):
    """Segment lengths with P(l) ~ l^-alpha on [1, max_len] summing to ~n_total."""
    ls = np.arange(1, max_len + 1, dtype=np.float64)
    p = ls ** -alpha
    p /= p.sum()
    mean = float((ls * p).sum())
    lens = rng.choice(np.arange(1, max_len + 1), size=int(n_total / mean * 1.1) + 1, p=p)
    c = np.cumsum(lens)
    cut = int(np.searchsorted(c, n_total))
    lens = lens[:cut + 1].copy()
    lens[-1] -= int(c[cut] - n_total) if cut < len(c) else 0
    return lens[lens > 0] if lens.size else lens


def problems(quick):
    """Power-law lengths (alpha 1, up to 2000: every reg and block bin) per
    size bucket; the cache keys on size, key dtype and value width only."""
    sizes = [1 << 18] if quick else [1 << 20, 1 << 22, 1 << 24, 1 << 26]
    return [{"size": s, "dtype": "uint32", "dims": 32, "lengths": "powerlaw"} for s in sizes]


def setup(device, problem):
    rng = np.random.default_rng(12345)
    n = problem["size"]
    lk = problem.get("lengths", "powerlaw")
    if lk.startswith("uniform"):
        L = int(lk[7:])
        lens = np.full(n // L, L)
    else:
        lens = powerlaw_lengths(rng, n, 1.0, 2000)
    off = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    nn = int(off[-1])
    q = device.queue
    return {"keys": cla.to_device(q, rng.integers(0, 2**32, nn, dtype=np.uint32)),
            "vals": cla.to_device(q, np.arange(nn, dtype=np.uint32)),
            "off": cla.to_device(q, off)}


def launch(device, params, state):
    """One sort of the state's device arrays with ``params``: (Events, output)."""
    (k, v), events = sort(device, state["keys"], state["off"], state["vals"], **params)
    return events, lambda: (k.get(), v.get())     # copied back only when the sweep checks it


def kernels(device, params):
    """(kernel, wg_size, 0) of every kernel a configuration launches (32-bit keys)."""
    plan = Plan.resolve(device, {"size": 1, "dtype": "uint32", "dims": 32}, **params)
    return execute.programs(device, plan).launches()


TUNABLE.benchmark(problems, setup, launch, kernels)
