"""The tuner's side of the grid's pair listing (imported only by clkernels.autotune)."""

import math

import numpy as np
import pyopencl.array as cla

from .pairs import TUNABLE, degrees, within
from .plan import JOIN_TUNABLE, JoinPlan


def _problems(quick, device):
    sizes = ([1 << 18] if quick else [1 << 18, 1 << 20]) if device.is_gpu else ([1 << 12] if quick else [1 << 14])
    return [{"size": n, "dtype": "float32", "dims": 3, "pairs_per_point": 10} for n in sizes]


def _setup(device, problem):
    n = problem["size"]
    x = np.random.default_rng(3).random((n, 3), dtype=np.float32)
    r = (3.0 * problem["pairs_per_point"] / (2.0 * math.pi * n)) ** (1.0 / 3.0)
    return {"x": cla.to_device(device.queue, x), "r": r}


def _launch(device, params, state):
    (i, j), events = within(device.queue, state["x"], r=state["r"], method=params["method"],
                            page=int(params["page"]), stage=params.get("stage", "auto"))

    def output():
        # the pair set, order-free: count, wrapped sum and xor of the keys i * n + j
        # (a lexsort of 10^7 pairs per candidate took most of the op's budget)
        key = i.astype(np.uint64) * np.uint64(len(state["x"])) + j.astype(np.uint64)
        return np.array([key.size, np.sum(key, dtype=np.uint64), np.bitwise_xor.reduce(key) if key.size else 0],
                        np.uint64)
    return events, output


TUNABLE.benchmark(_problems, _setup, _launch)


def _join_problems(quick, device):
    sizes = ([1 << 18] if quick else [1 << 18, 1 << 21]) if device.is_gpu else ([1 << 12] if quick else [1 << 14])
    return [{"size": n, "dims": 2, "pairs_per_point": 10} for n in sizes]


def _join_setup(device, problem):
    # the self-join papers' exponential 2-D data (their load-imbalance case)
    n = problem["size"]
    x = np.random.default_rng(102).exponential(1 / 40, (n, 2)).astype(np.float32)
    r = math.sqrt(problem["pairs_per_point"] / (math.pi * n)) / 40
    return {"x": cla.to_device(device.queue, x), "r": r}


def _join_launch(device, params, state):
    k, order = int(params["k"]), params["order"]
    plan = JoinPlan.resolve(device, len(state["x"]), params["kernel"], k, order, dims=2)
    deg, events = degrees(device.queue, state["x"], r=state["r"], join=plan)
    return events, lambda: deg


JOIN_TUNABLE.benchmark(_join_problems, _join_setup, _join_launch)
