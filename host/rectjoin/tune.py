"""The tuner's side of the rectangle join (imported only by clkernels.autotune):
the brute-force count of map-like 2-D float32 boxes on device arrays, swept
over the work-group size and the count variant (the thesis sweeps 64..1024)."""

import numpy as np
import pyopencl.array as cla

from ..core.launch import Events
from ..core.transfer import zeros
from . import execute
from .plan import TUNABLE, RectPlan


def _problems(quick, device):
    if device.is_gpu:
        # the thesis's scale is 190K x 1.9M (140 ms a run): a tenth of it and a third
        sizes = [(19_000, 190_000)] if quick else [(19_000, 190_000), (60_000, 600_000)]
    else:
        sizes = [(1_000, 10_000)] if quick else [(1_000, 10_000), (4_000, 40_000)]
    return [{"size": nq * nb, "dtype": "float32", "dims": 2, "nq": nq, "nb": nb} for nq, nb in sizes]


def _boxes(rng, n):
    lo = rng.random((n, 2)) * 1000.0
    ext = rng.lognormal(np.log(0.5), 0.8, (n, 2))
    return np.hstack([lo, lo + ext]).astype(np.float32)


def _plan(params):
    return RectPlan("brute", params["variant"], "count", 2, "float", int(params["wg_size"]), vec=bool(params["vec"]))


def _kernels(device, params):
    plan = _plan(params)
    return [(execute.kernel(device, plan, "count"), plan.wg_size)]


def _setup(device, problem):
    q, rng = device.queue, np.random.default_rng(16)
    ev = Events()
    cols = []
    for n in (problem["nq"], problem["nb"]):
        soa, _ = execute.layout(q, device, "float", 2, cla.to_device(q, _boxes(rng, n)), n, ev)
        cols.append(soa)
    ev.wait()
    return {"q": cols[0], "b": cols[1], "nq": problem["nq"], "nb": problem["nb"],
            "none": zeros(q, 1, np.uint32)}


def _launch(device, params, state):
    plan, q = _plan(params), device.queue
    events = Events()
    total = zeros(q, 1, np.uint64, events=events)
    execute.join(q, device, plan, "count", state["q"], state["nq"], state["b"], state["nb"], None,
                 state["nq"], 0, state["none"], False, [total.data], events)
    return events.all("join"), lambda: int(total.get()[0])


TUNABLE.benchmark(_problems, _setup, _launch, _kernels)
