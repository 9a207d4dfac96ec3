"""Planning of two-body statistics (2-BS paper, section 3.3 and Figure 9).

* :func:`output_plan` -- the decision tree of Figure 9: a Type-I output (a
  count or a sum) lives in registers and is reduced per sub-group; a Type-II
  output (a histogram) that fits local memory gets private local copies per
  work-group (``hist_mode='local'``), with the number of copies from the
  paper's model (:func:`copies_model`, equations 1-5); otherwise global
  atomics (``hist_mode='global'``).
* :func:`choose_method` -- all pairs vs cell lists from the expected fraction
  of pairs within the distance of interest (the hook the cell-list grid plugs
  into).
* :func:`local_bytes` -- local memory a configuration uses (for fitting).
"""

import math

import numpy as np

VARIANTS = ("naive", "readonly", "lrshm", "regshm", "shuffle")
DIAGS = ("mask", "triangle", "balanced")
HIST_MODES = ("global", "local")
FLUSHES = ("reduce", "atomic")
COPIES = (1, 2, 4, 8, 16, 32)

#: below this expected pair fraction, cell lists beat all pairs (when available)
CELLS_FRACTION = 0.05


def local_bytes(params, dims, itemsize, nbins, out, device):
    """Bytes of local memory a kernel configuration declares."""
    wg, ppw, variant = params["wg_size"], params["ppw"], params["variant"]
    b = 0
    if variant in ("lrshm", "regshm"):      # the partner tile (d = 3 padded to a 4-vector)
        b += (4 if dims == 3 else dims) * wg * itemsize
    if variant == "lrshm":
        b += dims * wg * ppw * itemsize
    if device.sg_backend == "local":
        b += 4 * wg
    if out == "sum":
        b += wg * itemsize
    if out == "hist":
        if not params.get("uniform", True):
            b += (nbins + 1) * itemsize
        if params.get("hist_mode") == "local":
            b += 4 * (nbins + 1) * (params.get("copies") or 1)
    return b


def _latency(k, h, cl=1.0, clp=1.0):
    """Equations 2-5: latency of one round with k work-items of a warp on one
    copy of an h-bin output (unit: the collision-free latency C_L)."""
    if k <= 1:
        return cl
    pk = math.exp(-k * (k - 1) / (2.0 * h))
    return pk * cl + (1.0 - pk) * _latency(k - 1, h, cl + clp, clp)


def copies_model(device, nbins, wg_size, base_local, warp=32):
    """The number of private copies minimizing rounds x latency (equations 1-5).

    Occupancy (eq. 1): work-groups resident per compute unit are limited by
    local memory (``device.local_mem_per_cu`` over the group's bytes) and by
    ``device.max_threads_per_cu``; rounds are proportional to 1 / resident
    work-items. Latency (eq. 2-5): the birthday-problem collision model with
    k = warp / copies work-items of a warp sharing one copy.
    Returns (copies, {copies: modelled cost}).
    """
    per_cu = getattr(device, "local_mem_per_cu", device.local_mem_size)
    threads = getattr(device, "max_threads_per_cu", device.max_work_group_size)
    costs = {}
    for c in COPIES:
        lm = base_local + 4 * (nbins + 1) * c
        if lm > device.local_mem_size:
            break
        groups = min(per_cu // max(lm, 1), max(threads // wg_size, 1))
        if groups < 1:
            break
        alpha = groups * wg_size
        k = max(1, warp // c)
        costs[c] = _latency(k, max(nbins, 1)) / alpha
    if not costs:
        return None, costs
    best = min(costs, key=lambda c: (round(costs[c], 12), c))
    return best, costs


def output_plan(device, params, dims, itemsize, nbins, out):
    """Figure 9 for the output stage; fills hist_mode / copies where unset.

    Returns params (a new dict). Forced values (``hist_mode``/``copies`` given)
    are kept if they fit local memory; otherwise ValueError.
    """
    p = dict(params)
    if out != "hist":
        p.pop("hist_mode", None)
        p.pop("copies", None)
        return p
    budget = device.local_mem_size
    base = local_bytes({**p, "hist_mode": "global"}, dims, itemsize, nbins, out, device)
    forced_mode = p.get("hist_mode")
    if forced_mode is None:
        p["hist_mode"] = "local" if base + 4 * (nbins + 1) <= budget else "global"
    if p["hist_mode"] == "local":
        if p.get("copies") is None:
            c, _ = copies_model(device, nbins, p["wg_size"], base,
                                warp=device.warp_size or 32)
            p["copies"] = c or 1
        if base + 4 * (nbins + 1) * p["copies"] > budget:
            raise ValueError(f"{nbins} bins x {p['copies']} copies do not fit the local memory "
                             f"of {device.name} ({budget} bytes); use fewer copies or hist_mode='global'")
    else:
        p["copies"] = 1
    return p


def expected_fraction(r, extent, box=None):
    """Expected fraction of pairs within distance r for uniform points in a
    box of side lengths ``extent`` (or the periodic ``box``)."""
    sides = np.asarray(box if box is not None else extent, dtype=np.float64)
    d = sides.size
    if r <= 0:
        return 0.0
    vol = float(np.prod(np.maximum(sides, r)))     # a flat side counts as one cell
    ball = math.pi ** (d / 2) / math.gamma(d / 2 + 1) * float(r) ** d
    return min(1.0, ball / vol)


#: the cell-list entry points of clkernels.host.grid, per statistic
GRID_ENTRY = {"count": "pair_count_grid", "hist": "distance_histogram_grid"}


def grid_entry(what):
    """The cell-list function for ``what`` ('count' | 'hist') from
    clkernels.host.grid, or None where that module or function is missing."""
    try:
        from .. import cellgrid as grid
    except ImportError:
        return None
    return getattr(grid, GRID_ENTRY[what], None)


def choose_method(fraction, what="count", method=None):
    """'allpairs' or 'cells' for a problem whose expected pair fraction is
    ``fraction``. ``method`` ('auto' | 'allpairs' | 'cells') forces a choice;
    'cells' needs the grid module."""
    fn = grid_entry(what)
    if method not in (None, "auto"):
        if method not in ("allpairs", "cells"):
            raise ValueError("method must be 'auto', 'allpairs' or 'cells'")
        if method == "cells" and fn is None:
            raise ValueError("method='cells' needs clkernels.host.grid." + GRID_ENTRY[what]
                             + ", which is not available")
        return method
    if fraction < CELLS_FRACTION and fn is not None:
        return "cells"
    return "allpairs"
