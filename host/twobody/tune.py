"""The tuner's side of the two-body ops (imported only by clkernels.autotune):
3-D uniform float32 points, a 2-point count at r = 0.1 and a 256-bin
distance histogram over the full range, on device arrays."""

import numpy as np
import pyopencl.array as cla

from .api import count, histogram
from .plan import TUNABLES


def _problems(quick, device=None):
    sizes = [1 << 12] if quick else [1 << 17, 1 << 20]
    return [{"size": n, "dtype": "float32", "dims": 3, "nbins": 256} for n in sizes]


def _setup(device, problem):
    rng = np.random.default_rng(1)
    x = rng.random((problem["size"], problem["dims"])).astype(problem["dtype"])
    return {"x": cla.to_device(device.queue, x), "problem": problem}


def _options(params):
    names = ("variant", "ppw", "vec", "wg_size", "diag", "copies", "flush")
    opts = {k: params[k] for k in names if params.get(k) is not None}
    if params.get("hist_mode"):
        opts["output"] = params["hist_mode"]
    return opts


def _launch(stat):
    def launch(device, params, state):
        opts = _options(params)
        if stat == "count":
            res, ev = count(device.queue, state["x"], r=0.1, method="allpairs", **opts)
        else:
            (res, _), ev = histogram(device.queue, state["x"], bins=state["problem"]["nbins"],
                                     method="allpairs", **opts)
        return ev.all("kernel", "reduce"), res
    return launch


TUNABLES["twobody.count"].benchmark(_problems, _setup, _launch("count"))
TUNABLES["twobody.histogram"].benchmark(_problems, _setup, _launch("hist"))
