"""Two-body statistics: pair counts, distance histograms, RDF, and a framework
for user-defined 2-BS (the 2-BS paper, sections 3-4).

Every statistic here runs the one template ``twobody.cl.mako``: a 2-D launch
over (L block, R block) pairs, a selectable pairwise stage and a selectable
output stage. See :class:`TwoBody` for the framework and
:func:`pair_count`, :func:`distance_histogram`, :func:`rdf` for the built-ins.

Advanced keyword options (every function and ``TwoBody.__call__`` take them;
each defaults to the planner's choice: tuned parameters where the tuning cache
has them, model-based defaults otherwise):

``variant``  pairwise stage: 'naive' (anchor in registers, partners from
             global memory), 'readonly' (same through ``const restrict``
             pointers: the read-only path), 'lrshm' (both blocks in local
             memory), 'regshm' (anchors in registers, partner tile in local
             memory), 'shuffle' (partners broadcast by sub-group shuffles,
             Algorithm 6; no local memory)
``ppw``      anchor points per work-item (register tiling)
``vec``      1, 2, 4: vector loads of partner points (naive/readonly)
``wg_size``  work-group size
``diag``     diagonal blocks of a self join: 'mask' (full block, i < j
             predicate), 'triangle' (j from i + 1: divergent), 'balanced'
             ((i + s) % B for s = 1 .. B/2, Section 3.4.1)
``output``   histograms only: 'local' (private local-memory histograms,
             Algorithms 3/4) or 'global' (global atomics)
``copies``   private local copies per work-group (lane % copies, Algorithm 4)
``flush``    'reduce' (per-group histograms + a reduction kernel, the paper's)
             or 'atomic' (each group adds its histogram with global atomics)
``chunk_points``  points per device-resident chunk (streaming path: chunk
             pairs with uploads on a second queue overlapping the kernels)
``launch_blocks`` blocks per side of one launch
``plan``     a dict of the above (the "advanced object"); keywords win

Any kernel option implies ``method='allpairs'`` in :func:`pair_count` and
:func:`distance_histogram`, whose default ``method='auto'`` hands problems
with a small expected pair fraction to the cell-list grid
(``clkernels.host.grid``) when that module is present
(:func:`clkernels.host.twobody_plan.choose_method`).

Several devices: ``device=[d1, d2, ...]`` spreads the block-pair launches
round-robin over the devices (each holds its own copy of the points, or its
own chunks) and sums the results; the plan is made for the first device.

Precision: distances are computed in the input precision. Pairs whose
distance ties r or a bin edge within float rounding may go either way
(float32 histograms take ``native_sqrt``; float64 uses the correctly
rounded ``sqrt``, so exact ties follow numpy there).
"""

import math

import numpy as np
import pyopencl as cl

from ..core import tuning
from ..core.launch import check_launch
from ..core.build import build, program_kernel
from ..core.inputs import box as check_box
from ..core.device import as_device
from .plan import (DIAGS, FLUSHES, HIST_MODES, VARIANTS, choose_method,
                           expected_fraction, grid_entry, local_bytes, output_plan)

TEMPLATE = "twobody.cl.mako"
MAX_DIMS = 8
OPTION_NAMES = ("variant", "ppw", "vec", "wg_size", "diag", "output", "copies", "flush",
                "chunk_points", "launch_blocks")

# ----------------------------------------------------------------- outputs


class Count:
    """Type-I output: the number of pairs whose value ``d`` satisfies
    ``predicate``, an OpenCL C expression over ``d`` (the pair's distance) and
    the run-time parameter ``t`` (default ``"d < t"``)."""

    kind = "count"

    def __init__(self, predicate=None):
        if predicate is not None and not isinstance(predicate, str):
            raise TypeError("predicate must be an OpenCL C expression string")
        self.predicate = predicate


class Histogram:
    """Type-II output: a histogram of ``d`` like numpy.histogram (bins
    [e_i, e_i+1), the last one closed). ``bins``: an int (uniform over
    ``range``) or increasing edges."""

    kind = "hist"

    def __init__(self, bins, range=None):
        self.bins = bins
        self.range = range


class Sum:
    """Type-I output: the sum over pairs of ``weight``, an OpenCL C
    expression over ``d`` and ``t`` (accumulated in the input precision per
    work-item, per group in the device, in float64 on the host)."""

    kind = "sum"

    def __init__(self, weight):
        if not isinstance(weight, str) or not weight.strip():
            raise TypeError("weight must be a non-empty OpenCL C expression string")
        self.weight = weight


# ------------------------------------------------------------ validation


def _points(x, name, dims=None):
    if x is None:
        raise TypeError(f"{name} is required")
    if hasattr(x, "get") and hasattr(x, "queue"):     # pyopencl.array.Array: copied back
        x = x.get()
    a = np.asarray(x)
    if a.dtype.kind in "biu":
        a = a.astype(np.float64)
    elif a.dtype == np.float16:
        a = a.astype(np.float32)
    elif a.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be a float32 or float64 array (integers are converted to "
                        f"float64), got {a.dtype}")
    if a.ndim == 1:
        a = a.reshape(-1, 1)
    if a.ndim != 2:
        raise ValueError(f"{name} must be an (n, d) array, got shape {a.shape}")
    d = a.shape[1]
    if not 1 <= d <= MAX_DIMS:
        raise ValueError(f"{name} has {d} dimensions; 1 to {MAX_DIMS} are supported")
    if dims is not None and d != dims:
        raise ValueError(f"{name} has {d} dimensions, expected {dims}")
    if a.size and not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or inf")
    return a


def _pair_inputs(x, y, dims=None):
    X = _points(x, "x", dims)
    Y = None if y is None else _points(y, "y", X.shape[1])
    dtype = X.dtype if Y is None else np.result_type(X.dtype, Y.dtype)
    X = np.ascontiguousarray(X, dtype=dtype)
    if Y is not None:
        Y = np.ascontiguousarray(Y, dtype=dtype)
    return X, Y, np.dtype(dtype)


def _scalar(v, name, nonneg=True):
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number") from None
    if not math.isfinite(f):
        raise ValueError(f"{name} must be finite")
    if nonneg and f < 0:
        raise ValueError(f"{name} must be >= 0, got {f}")
    return f


def _edges(bins, range_, default_hi):
    """(edges float64, uniform, lo, hi) like numpy.histogram's bins/range."""
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        nb = int(bins)
        if nb <= 0:
            raise ValueError(f"bins must be a positive integer, got {nb}")
        if range_ is None:
            if default_hi is None:
                raise ValueError("range is required for this histogram")
            lo, hi = 0.0, default_hi
        else:
            try:
                lo, hi = (float(v) for v in range_)
            except (TypeError, ValueError):
                raise ValueError("range must be a pair (lo, hi)") from None
            if not (math.isfinite(lo) and math.isfinite(hi)) or not lo < hi:
                raise ValueError(f"range must be finite with lo < hi, got {range_!r}")
        return np.linspace(lo, hi, nb + 1), True, lo, hi
    e = np.asarray(bins, dtype=np.float64)
    if e.ndim != 1 or e.size < 2:
        raise ValueError("bins must be a positive int or a 1-D array of at least 2 edges")
    if not np.isfinite(e).all():
        raise ValueError("bin edges must be finite")
    if not (np.diff(e) > 0).all():
        raise ValueError("bin edges must increase strictly")
    if range_ is not None:
        raise ValueError("range cannot be given with explicit bin edges")
    return e, False, float(e[0]), float(e[-1])


def _extent(X, Y):
    """Side lengths (float64) of the points' bounding box; None without points."""
    pts = [a for a in (X, Y) if a is not None and len(a)]
    if not pts:
        return None
    lo = np.min([a.min(axis=0) for a in pts], axis=0).astype(np.float64)
    hi = np.max([a.max(axis=0) for a in pts], axis=0).astype(np.float64)
    return hi - lo


def _max_distance(X, Y, box, ext=False):
    """The largest pair distance there can be (``ext``: :func:`_extent`, if known)."""
    if box is not None:
        return float(np.sqrt(np.sum((box / 2) ** 2)))
    if ext is False:
        ext = _extent(X, Y)
    if ext is None:
        return 1.0
    m = float(np.sqrt(np.sum(ext ** 2)))
    return m if m > 0 else 1.0


# ------------------------------------------------------------ parameters


def _default_params(device, problem):
    """Model-based defaults (the Tunables' ``default``)."""
    out = problem.get("out", "count")
    if device.is_gpu:
        # Reg-SHM with a 4-vector tile: one broadcast local load per partner. (The paper's
        # best SDH kernel on Pascal read the input through the read-only cache; on
        # Hopper L1 and local memory are one array: the tuner may pick 'readonly'.)
        p = dict(wg_size=256, ppw=4, variant="regshm", vec=1,
                 diag="balanced", flush="reduce")
    else:
        p = dict(wg_size=64, ppw=2, variant="readonly", vec=1, diag="mask", flush="reduce")
    p["wg_size"] = min(p["wg_size"], device.max_work_group_size)
    if out == "hist":
        p["hist_mode"] = None
        p["copies"] = None
    else:
        p.pop("flush")
    return p


def _restrict(params, device):
    wg = params.get("wg_size", 64)
    if wg > device.max_work_group_size or wg & (wg - 1) or wg < 1:
        return False
    if device.sg_backend == "nv" and wg % 32:
        return False
    if params.get("variant") not in VARIANTS or params.get("diag") not in DIAGS:
        return False
    if params.get("vec", 1) > 1 and params.get("variant") not in ("naive", "readonly"):
        return False
    return params.get("ppw", 1) in (1, 2, 3, 4, 6, 8)


def resolve_params(device, out, dims, dtype, n, nbins=0, uniform=True, options=None):
    """Planner: tuned/default parameters, user overrides, Figure 9 output plan."""
    options = dict(options or {})
    op = "twobody.histogram" if out == "hist" else "twobody.count"
    problem = {"size": max(int(n), 1), "dtype": np.dtype(dtype).name, "dims": dims,
               "nbins": nbins, "out": out}
    params, source = TUNABLES[op].resolve(device, problem)
    keep = ("wg_size", "ppw", "variant", "vec", "diag") + (("flush", "hist_mode", "copies")
                                                          if out == "hist" else ())
    params = {k: v for k, v in params.items() if k in keep}
    forced = {k: options[k] for k in ("variant", "ppw", "vec", "wg_size", "diag", "flush", "copies")
              if options.get(k) is not None}
    if out != "hist":
        extra = [k for k in ("output", "copies", "flush") if options.get(k) is not None]
        if extra:
            raise ValueError(f"{', '.join(extra)} apply to histograms only")
    if options.get("output") is not None:
        forced["hist_mode"] = options["output"]
    if forced and "vec" not in forced and forced.get("variant") not in (None, "naive", "readonly"):
        params["vec"] = 1
    if forced.get("copies") is not None and "hist_mode" not in forced:
        forced["hist_mode"] = "local"
    params.update(forced)
    if out == "hist" and "hist_mode" in forced and "copies" not in forced:
        params["copies"] = None       # a forced output stage re-plans the copies
    if params["variant"] not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {params['variant']!r}")
    if params["diag"] not in DIAGS:
        raise ValueError(f"diag must be one of {DIAGS}, got {params['diag']!r}")
    if params.get("flush", "reduce") not in FLUSHES:
        raise ValueError(f"flush must be one of {FLUSHES}")
    if params["vec"] not in (1, 2, 4):
        raise ValueError("vec must be 1, 2 or 4")
    if params["vec"] > 1 and params["variant"] not in ("naive", "readonly"):
        raise ValueError("vector loads (vec > 1) apply to the naive and readonly variants")
    if int(params["ppw"]) < 1 or int(params["ppw"]) > 16:
        raise ValueError("ppw must be 1..16")
    if int(params["wg_size"]) * int(params["ppw"]) > 16384:
        raise ValueError("wg_size * ppw must be <= 16384 (32-bit counts per block pair)")
    if (int(params["wg_size"]) * int(params["ppw"])) % params["vec"]:
        raise ValueError("vec must divide the block size wg_size * ppw")
    wg = int(params["wg_size"])
    if wg < 1 or wg & (wg - 1) or wg > device.max_work_group_size:
        raise ValueError(f"wg_size must be a power of two <= {device.max_work_group_size}, got {wg}")
    if device.sg_backend == "nv" and wg % 32:
        raise ValueError("wg_size must be a multiple of 32 on this device")
    if out == "hist":
        hm = params.get("hist_mode")
        if hm is not None and hm not in HIST_MODES:
            raise ValueError(f"output must be one of {HIST_MODES}, got {hm!r}")
        c = params.get("copies")
        if c is not None and c not in (1, 2, 4, 8, 16, 32):
            raise ValueError("copies must be 1, 2, 4, 8, 16 or 32")
        if c is not None and wg < c:
            raise ValueError("copies must not exceed wg_size")
    params["uniform"] = uniform
    try:
        params = output_plan(device, params, dims, np.dtype(dtype).itemsize, nbins, out)
    except ValueError:
        if out != "hist" or "hist_mode" in forced or "copies" in forced:
            raise
        # a tuned output stage (tuned for another number of bins) that does not fit: re-plan
        params = output_plan(device, {**params, "hist_mode": None, "copies": None}, dims,
                             np.dtype(dtype).itemsize, nbins, out)
    need = local_bytes(params, dims, np.dtype(dtype).itemsize, nbins, out, device)
    if need > device.local_mem_size:
        raise ValueError(f"this configuration needs {need} bytes of local memory; "
                         f"{device.name} has {device.local_mem_size}")
    params["source"] = source if not forced else "forced"
    return params


def _render_params(params, spec, dims, dtype, nbins, box):
    return dict(real="float" if dtype == np.float32 else "double", dims=dims,
                wg_size=int(params["wg_size"]), ppw=int(params["ppw"]), variant=params["variant"],
                vec=int(params["vec"]), diag=params["diag"], box=box is not None, out=spec["out"],
                hist_mode=params.get("hist_mode") or "global", copies=int(params.get("copies") or 1),
                flush=params.get("flush", "reduce"), nbins=max(nbins, 1),
                uniform=bool(params.get("uniform", True)), fullrange=bool(params.get("fullrange")),
                sq=spec["sq"],
                dist_code=spec.get("dist_code"), pred_code=spec.get("pred_code"),
                weight_code=spec.get("weight_code"))


# ------------------------------------------------------------- execution

def _soa(A, length, dtype):
    """One padded contiguous array per dimension (zeros past the points)."""
    out = []
    for k in range(A.shape[1]):
        v = np.zeros(length, dtype=dtype)
        v[: len(A)] = A[:, k]
        out.append(v)
    return out


class _Chunks:
    """A point set cut into chunks of ``size`` points (host SoA, padded)."""

    def __init__(self, A, size, dtype):
        self.n = len(A)
        self.size = size
        self.count = max(1, -(-self.n // size))
        self.soa = _soa(A, self.count * size, dtype)

    def length(self, i):
        return min(self.size, self.n - i * self.size)


def _run(devices, spec, X, Y, dtype, *, t=0.0, box=None, hist=None, options=None, events=None):
    """Run one statistic over all pairs; returns the raw result (int, ulong
    histogram array, or float). ``events`` (a list) collects kernel events."""
    options = dict(options or {})
    plan_opts = dict(options.pop("plan", None) or {})
    plan_opts.update({k: v for k, v in options.items() if v is not None})
    unknown = set(plan_opts) - set(OPTION_NAMES)
    if unknown:
        raise TypeError(f"unknown option(s): {', '.join(sorted(unknown))}")
    devs = list(devices) if isinstance(devices, (list, tuple)) else [devices]
    if not devs:
        raise ValueError("device list is empty")
    devs = [as_device(d) for d in devs]
    for d in devs:
        d.check_dtype(dtype)
    dims = X.shape[1]
    nbins = hist["nbins"] if hist else 0
    n_total = len(X) if Y is None else max(len(X), len(Y))
    out = spec["out"]
    params = resolve_params(devs[0], out, dims, dtype, n_total, nbins,
                            hist["uniform"] if hist else True, plan_opts)
    # full range: [0, hi] holds every distance there can be -> no range test in the kernel
    params["fullrange"] = bool(hist and spec["sq"] and hist["uniform"] and hist["lo"] == 0
                               and nbins <= (1 << 20)
                               and hist["hi"] >= (hist["maxd"] if "maxd" in hist
                                                  else _max_distance(X, Y, box)))
    for d in devs[1:]:
        if local_bytes(params, dims, dtype.itemsize, nbins, out, d) > d.local_mem_size:
            raise ValueError(f"the plan for {devs[0].name} does not fit the local memory of {d.name}")
    B = int(params["wg_size"]) * int(params["ppw"])
    chunk = plan_opts.get("chunk_points")
    nL, nR = len(X), len(X) if Y is None else len(Y)
    if chunk is None:
        # resident when all the points take at most a quarter of the smallest device's
        # memory; else chunks (three resident at a time: L and two R slots)
        bytes_all = (nL + (0 if Y is None else nR)) * dims * dtype.itemsize
        budget = min(d.global_mem_size for d in devs) // 4
        max_points = min(d.max_mem_alloc_size for d in devs) // dtype.itemsize
        if bytes_all <= budget and max(nL, nR) <= max_points:
            chunk = max(nL, nR, 1)
        else:
            chunk = max(B, min(budget // (3 * dims * dtype.itemsize), max_points))
    chunk = max(B, -(-int(chunk) // B) * B)
    Lc = _Chunks(X, chunk, dtype)
    Rc = Lc if Y is None else _Chunks(Y, chunk, dtype)
    self_join = Y is None

    T = plan_opts.get("launch_blocks")
    if T is None:
        T = 256
        if out == "hist" and params.get("hist_mode") == "local" and params.get("flush") == "reduce":
            T = max(1, min(T, int(math.sqrt((64 << 20) / (4 * nbins)))))
        if len(devs) > 1:     # enough launches to spread over the devices
            nb = -(-min(chunk, max(nL, nR)) // B)
            T = max(1, min(T, nb // (2 * len(devs))))
    T = max(1, int(T))

    # work items: (I, J, l0, r0, gx, gy, self_mode), sorted by chunk pair
    items = []
    for I in range(Lc.count):
        for J in range(I if self_join else 0, Rc.count):
            nl, nr = Lc.length(I), Rc.length(J)
            if nl <= 0 or nr <= 0:
                continue
            nbl, nbr = -(-nl // B), -(-nr // B)
            same = self_join and I == J
            for ti in range(-(-nbl // T)):
                for tj in range(-(-nbr // T)):
                    if same and tj < ti:
                        continue
                    gx, gy = min(T, nbl - ti * T), min(T, nbr - tj * T)
                    items.append((I, J, ti * T * B, tj * T * B, gx, gy, 1 if same else 0))
    if not items:
        return _empty(out, nbins)

    rp = _render_params(params, spec, dims, dtype, nbins, box)
    if box is not None:
        box_args = []
        for L in box:
            box_args += [dtype.type(L), dtype.type(1.0 / L)]
    else:
        box_args = []
    tval = dtype.type(t)
    per_dev = [items[i::len(devs)] for i in range(len(devs))]
    for dev, its in zip(devs, per_dev):     # build and check everywhere before enqueueing anywhere
        if its:
            check_launch(dev, _kernel(build(dev, TEMPLATE, "pairs_kernel", rp), "pairs"), rp["wg_size"])
    states = []
    for dev, its in zip(devs, per_dev):
        if its:
            states.append(_enqueue_device(dev, its, rp, Lc, Rc, self_join, box_args, tval, hist,
                                          dtype, nbins, events))
    return _combine(out, states, nbins)


def _empty(out, nbins):
    if out == "count":
        return 0
    if out == "sum":
        return 0.0
    return np.zeros(nbins, dtype=np.uint64)


_kernel = program_kernel     # a cached cl.Kernel per (program, name, thread)


def _enqueue_device(dev, items, rp, Lc, Rc, self_join, box_args, tval, hist, dtype, nbins, events):
    kern = _kernel(build(dev, TEMPLATE, "pairs_kernel", rp), "pairs")     # checked by _run
    q, cq = dev.queue, dev.side_queue
    ctx = dev.context
    mf = cl.mem_flags
    dims, wg = rp["dims"], rp["wg_size"]
    csize = Lc.size * dtype.itemsize
    out = rp["out"]
    st = {"dev": dev, "reads": []}
    if out == "count":
        acc = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.zeros(1, np.uint64))
    elif out == "hist":
        acc = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.zeros(nbins, np.uint64))
        edges = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=hist["edges"].astype(dtype))
        scale = nbins / (hist["hi"] - hist["lo"])
        offs = -hist["lo"] * scale
        hargs = [edges, dtype.type(hist["lo"]), dtype.type(hist["hi"]), dtype.type(scale),
                 dtype.type(offs)]
        reduce_mode = rp["hist_mode"] == "local" and rp["flush"] == "reduce"
        if reduce_mode:
            rwg = min(64, dev.max_work_group_size)
            rk = _kernel(build(dev, TEMPLATE, "hist_reduce", dict(wg_size=rwg)), "hist_reduce")
            gmax = max(gx * gy for (_, _, _, _, gx, gy, _) in items)
            part = cl.Buffer(ctx, mf.READ_WRITE, size=4 * nbins * gmax)
            # poisoned: a group that fails to write its histogram shows up in the result
            cl.enqueue_fill_buffer(q, part, np.uint32(0xFFFFFFFF), 0, 4 * nbins * gmax)
    else:
        acc = None
    st["acc"] = acc

    def new_slot():
        return [cl.Buffer(ctx, mf.READ_ONLY, size=csize) for _ in range(dims)]

    # L slot: the current anchor chunk; R slots: two, double-buffered
    slots = {"L": [new_slot(), None, [], []]}           # bufs, chunk id, upload evts, use evts
    rslots = [[None, None, [], []], [None, None, [], []]]
    rnext = 0

    def upload(slot, chunks, ci):
        if slot[0] is None:
            slot[0] = new_slot()
        lo = ci * chunks.size
        evs = []
        for k in range(dims):
            host = chunks.soa[k][lo: lo + chunks.size]
            evs.append(cl.enqueue_copy(cq, slot[0][k], host, is_blocking=False,
                                       wait_for=slot[3] or None))
        slot[1], slot[2], slot[3] = ci, evs, []

    for (I, J, l0, r0, gx, gy, same) in items:
        Ls = slots["L"]
        if Ls[1] != I:
            upload(Ls, Lc, I)
        if self_join and I == J:
            Rs = Ls
        else:
            Rs = next((s for s in rslots if s[1] == J), None)
            if Rs is None:
                Rs = rslots[rnext]
                rnext ^= 1
                upload(Rs, Rc, J)
        nl, nr = Lc.length(I), Rc.length(J)
        args = list(Ls[0]) + list(Rs[0]) + box_args + [
            np.uint64(nl), np.uint64(nr), np.uint64(l0), np.uint64(r0), np.int32(same), tval]
        wait = (Ls[2] + (Rs[2] if Rs is not Ls else [])) or None
        if out == "count":
            args.append(acc)
        elif out == "sum":
            pb = cl.Buffer(ctx, mf.READ_WRITE, size=dtype.itemsize * gx * gy)
            cl.enqueue_fill_buffer(q, pb, dtype.type(np.nan), 0, dtype.itemsize * gx * gy)
            args.append(pb)
        else:
            args += hargs + [part if reduce_mode else acc]
        ev = kern(q, (gx * wg, gy), (wg, 1), *args, wait_for=wait)
        Ls[3].append(ev)
        if Rs is not Ls:
            Rs[3].append(ev)
        if events is not None:
            events.append(ev)
        if out == "sum":
            host = np.empty(gx * gy, dtype=dtype)
            st["reads"].append((host, cl.enqueue_copy(q, host, pb, is_blocking=False)))
        elif out == "hist" and reduce_mode:
            ng = gx * gy
            per = 64
            rev = rk(q, (-(-nbins // rwg) * rwg, -(-ng // per)), (rwg, 1), part, np.uint32(ng),
                     np.uint32(nbins), np.uint32(per), acc)
            if events is not None:
                events.append(rev)
    q.flush()
    cq.flush()
    return st


def _combine(out, states, nbins):
    if out == "count":
        total = 0
        for st in states:
            h = np.zeros(1, np.uint64)
            cl.enqueue_copy(st["dev"].queue, h, st["acc"], is_blocking=True)
            total += int(h[0])
        return total
    if out == "sum":
        total = 0.0
        for st in states:
            for host, ev in st["reads"]:
                ev.wait()
                total += float(np.sum(host, dtype=np.float64))
        return total
    res = np.zeros(nbins, np.uint64)
    for st in states:
        h = np.zeros(nbins, np.uint64)
        cl.enqueue_copy(st["dev"].queue, h, st["acc"], is_blocking=True)
        res += h
    return res


# ------------------------------------------------------------- framework

class TwoBody:
    """A user-defined two-body statistic (2-BS paper, section 4).

    ``distance``: the body of an OpenCL C function
    ``REAL f(const REAL a[DIMS], const REAL b[DIMS])`` returning the pair's
    value (``REAL`` is float or double per ``dtype``; ``DIMS`` is ``dims``),
    or None for the built-in Euclidean distance (which honours ``box``).
    ``output``: :class:`Count`, :class:`Histogram` or :class:`Sum`.

    Calling it: ``tb(x, y=None, *, t=0.0, box=None, device=None, **options)``
    -> int (Count), (counts int64, edges) (Histogram) or float (Sum). ``t`` is
    the run-time parameter the predicate / weight expressions may use. Self
    pairs are i < j; with ``y`` all (i, j). ``device`` may be a list of devices.
    """

    def __init__(self, distance=None, output=None, dims=None, dtype=np.float32):
        if output is None:
            output = Count()
        if not isinstance(output, (Count, Histogram, Sum)):
            raise TypeError("output must be Count(...), Histogram(...) or Sum(...)")
        if distance is not None and (not isinstance(distance, str) or "return" not in distance):
            raise TypeError("distance must be an OpenCL C function body with a return statement")
        if dims is not None and not 1 <= int(dims) <= MAX_DIMS:
            raise ValueError(f"dims must be 1..{MAX_DIMS}")
        if np.dtype(dtype) not in (np.float32, np.float64):
            raise TypeError("dtype must be float32 or float64")
        self.distance = distance
        self.output = output
        self.dims = None if dims is None else int(dims)
        self.dtype = np.dtype(dtype)
        if isinstance(output, Histogram):
            # validate bins/range now; a user distance has no default range
            _edges(output.bins, output.range, None if distance is not None else 1.0)

    def _spec(self):
        o = self.output
        return dict(out=o.kind, sq=self.distance is None,
                    dist_code=self.distance,
                    pred_code=getattr(o, "predicate", None) if o.kind == "count" else None,
                    weight_code=o.weight if o.kind == "sum" else None)

    def __call__(self, x, y=None, *, t=0.0, box=None, device=None, **options):
        X, Y, dtype = _pair_inputs(x, y, self.dims)
        X, Y = X.astype(self.dtype, copy=False), None if Y is None else Y.astype(self.dtype, copy=False)
        b = check_box(box, X.shape[1])
        if b is not None and self.distance is not None:
            raise ValueError("box applies to the built-in distance only")
        spec = self._spec()
        tv = _scalar(t, "t", nonneg=False)
        o = self.output
        hist = None
        if o.kind == "count" and o.predicate is None and spec["sq"]:
            if tv < 0:
                raise ValueError("t (the radius) must be >= 0")
            tv = tv * tv
        if o.kind == "hist":
            dh = _max_distance(X, Y, b) if self.distance is None else None
            edges, uniform, lo, hi = _edges(o.bins, o.range, dh)
            hist = dict(nbins=len(edges) - 1, uniform=uniform, edges=edges, lo=lo, hi=hi)
            if dh is not None:
                hist["maxd"] = dh
        r = _run(device, spec, X, Y, self.dtype, t=tv, box=b, hist=hist, options=options)
        if o.kind == "hist":
            return r.astype(np.int64), hist["edges"]
        return r


# -------------------------------------------------------------- built-ins


def pair_count(x, r, y=None, *, box=None, device=None, method="auto", **options):
    """Number of pairs at distance < r (self: i < j; with ``y``: all (i, j)).

    x, y: (n, d) float32/float64 arrays (d = 1..8; computed in their
    precision; integers are converted to float64). ``box``: orthorhombic
    periodic side lengths (minimum image). Squared distances are compared
    with r*r (no square root). ``device`` may be a list of devices.
    ``method``: 'auto' | 'allpairs' | 'cells' (cell lists, when available).
    Advanced options: see the module docstring.
    """
    X, Y, dtype = _pair_inputs(x, y)
    rr = _scalar(r, "r")
    b = check_box(box, X.shape[1])
    if options and method in (None, "auto"):
        method = "allpairs"        # kernel options force the all-pairs kernels
    if options and method == "cells":
        raise TypeError("kernel options apply to method='allpairs'")
    if len(X) < 2 and Y is None or (Y is not None and (len(X) == 0 or len(Y) == 0)):
        choose_method(1.0, "count", method)
        return 0
    if choose_method(_fraction(X, Y, rr, b), "count", method) == "cells":
        return int(grid_entry("count")(X, rr, Y, box=b, device=device))
    spec = dict(out="count", sq=True, dist_code=None, pred_code=None, weight_code=None)
    return int(_run(device, spec, X, Y, dtype, t=rr * rr, box=b, options=options))


def _fraction(X, Y, r, box, ext=False):
    """Expected fraction of pairs within r (``ext``: :func:`_extent`, if known)."""
    if len(X) + (0 if Y is None else len(Y)) == 0:
        return 1.0
    if box is None and ext is False:
        ext = _extent(X, Y)
    return expected_fraction(r, None if ext is False else ext, box)


def distance_histogram(x, bins, y=None, *, range=None, box=None, device=None, method="auto",
                       **options):
    """Histogram of all pairwise distances, like ``numpy.histogram``.

    ``bins``: an int (uniform over ``range``; default 0 .. the largest
    possible distance -- the bounding-box diagonal, or the half-box diagonal
    with ``box`` -- widened by a relative 1e-6 so the farthest pair stays
    inside) or increasing edges (non-uniform; binary search in the kernel).
    Bins are [e_i, e_i+1), the last one closed. Returns (counts int64, edges).
    """
    X, Y, dtype = _pair_inputs(x, y)
    b = check_box(box, X.shape[1])
    ext = _extent(X, Y) if b is None else None      # one pass over the points
    maxd = _max_distance(X, Y, b, ext)
    dh = None
    if range is None and isinstance(bins, (int, np.integer)):
        dh = maxd * (1 + 1e-6)
    edges, uniform, lo, hi = _edges(bins, range, dh)
    hist = dict(nbins=len(edges) - 1, uniform=uniform, edges=edges, lo=lo, hi=hi, maxd=maxd)
    if options and method in (None, "auto"):
        method = "allpairs"
    if options and method == "cells":
        raise TypeError("kernel options apply to method='allpairs'")
    if choose_method(_fraction(X, Y, hi, b, ext), "hist", method) == "cells":
        counts, edges2 = grid_entry("hist")(X, edges, Y, box=b, device=device)
        return np.asarray(counts, dtype=np.int64), edges
    spec = dict(out="hist", sq=True, dist_code=None, pred_code=None, weight_code=None)
    counts = _run(device, spec, X, Y, dtype, box=b, hist=hist, options=options)
    return counts.astype(np.int64), edges


def shell_volumes(edges, d):
    """Volumes of the d-dimensional shells between consecutive edges."""
    e = np.asarray(edges, dtype=np.float64)
    c = math.pi ** (d / 2) / math.gamma(d / 2 + 1)
    return c * (e[1:] ** d - e[:-1] ** d)


def rdf(x, bins, y=None, *, range=None, box=None, device=None, **options):
    """Radial distribution function g(r) of points in a periodic box.

    Normalization (as MDAnalysis ``InterRDF`` and freud: pair counts over the
    ideal-gas counts of each shell, with the density from the box volume V):

    * self (``y`` None, n points): g_i = 2 * c_i / (n (n - 1) / V * v_i)
    * cross (n_x, n_y points):     g_i = c_i / (n_x n_y / V * v_i)

    where c_i counts unordered (self) or ordered (cross) pairs in shell i and
    v_i is the shell's volume in d dimensions. Self pairs are excluded
    (MDAnalysis divides by n^2 and counts i == j at distance 0; with n (n - 1)
    uniform random points give g -> 1). ``box`` and ``range`` (or edges) are
    required. Returns (g float64, edges).
    """
    X, Y, _ = _pair_inputs(x, y)
    if box is None:
        raise ValueError("rdf needs the periodic box (its volume gives the density)")
    b = check_box(box, X.shape[1])
    if range is None and isinstance(bins, (int, np.integer)):
        raise ValueError("rdf needs range=(r_min, r_max) with an integer bins")
    counts, edges = distance_histogram(X, bins, Y, range=range, box=b, device=device, **options)
    V = float(np.prod(b))
    vols = shell_volumes(edges, X.shape[1])
    if Y is None:
        ideal = len(X) * (len(X) - 1) / V * vols / 2.0
    else:
        ideal = len(X) * len(Y) / V * vols
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(ideal > 0, counts / np.where(ideal > 0, ideal, 1.0), 0.0)
    return g, edges


# Built-in user-level statistics shipped with the framework (section 6 of the paper).

#: angle between unit vectors (radians); points on the unit sphere
ANGULAR_DISTANCE = ("REAL c = (REAL)0;\n"
                    "for (int k = 0; k < DIMS; ++k) c += a[k] * b[k];\n"
                    "return acos(clamp(c, (REAL)-1, (REAL)1));")


def angular_pair_count(x, theta, y=None, *, device=None, **options):
    """Pairs of unit vectors (n, 3) at angular separation < theta (radians):
    the angular 2-point function's pair count, through :class:`TwoBody`."""
    X, Y, dtype = _pair_inputs(x, y)
    th = _scalar(theta, "theta")
    tb = TwoBody(distance=ANGULAR_DISTANCE, output=Count("d < t"), dims=X.shape[1], dtype=dtype)
    return tb(X, Y, t=th, device=device, **options)


def kde_sum(x, bandwidth, y=None, *, device=None, **options):
    """Sum over pairs of the Gaussian kernel exp(-d^2 / (2 h^2)) (a kernel
    density sum; float accumulation), through :class:`TwoBody`."""
    X, Y, dtype = _pair_inputs(x, y)
    h = _scalar(bandwidth, "bandwidth")
    if h <= 0:
        raise ValueError("bandwidth must be > 0")
    tb = TwoBody(distance=None, output=Sum("exp(-d * d / (2 * t * t))"), dims=X.shape[1], dtype=dtype)
    return tb(X, Y, t=h, device=device, **options)


# ---------------------------------------------------------------- tuning


def _problems(quick, device=None):
    sizes = [1 << 12] if quick else [1 << 17, 1 << 20]
    return [{"size": n, "dtype": "float32", "dims": 3, "nbins": 256} for n in sizes]


def _setup(device, problem):
    rng = np.random.default_rng(1)
    X = rng.random((problem["size"], problem["dims"])).astype(problem["dtype"])
    return {"X": X, "problem": problem}


def timed(device, stat, X, Y=None, **kw):
    """(events, result) of one run: the benchmark/tuner entry (kernel events only)."""
    events = []
    kw = dict(kw)
    X_, Y_, dtype = _pair_inputs(X, Y)
    if stat == "count":
        r = kw.pop("r")
        spec = dict(out="count", sq=True, dist_code=None, pred_code=None, weight_code=None)
        res = _run(device, spec, X_, Y_, dtype, t=r * r, options=kw, events=events)
    else:
        bins, rng = kw.pop("bins"), kw.pop("range")
        edges, uniform, lo, hi = _edges(bins, rng, None)
        hist = dict(nbins=len(edges) - 1, uniform=uniform, edges=edges, lo=lo, hi=hi)
        spec = dict(out="hist", sq=True, dist_code=None, pred_code=None, weight_code=None)
        res = _run(device, spec, X_, Y_, dtype, hist=hist, options=kw, events=events)
    return events, res


def _launch_timed(stat):
    def launch(device, params, state):
        names = ("variant", "ppw", "vec", "wg_size", "diag") + (("copies", "flush") if stat == "hist" else ())
        kw = {k: params[k] for k in names if params.get(k) is not None}
        if stat == "count":
            kw["r"] = 0.1
        else:
            kw["bins"], kw["range"] = state["problem"]["nbins"], (0.0, 1.8)
            if params.get("hist_mode"):
                kw["output"] = params["hist_mode"]
        ev, res = timed(device, stat, state["X"], **kw)
        return ev, res
    return launch


_SPACE = {"wg_size": [64, 128, 256, 512], "ppw": [1, 2, 4, 8], "variant": list(VARIANTS),
          "vec": [1, 2, 4], "diag": ["mask", "balanced"]}

TUNABLES = {
    "twobody.count": tuning.register(tuning.Tunable(
        "twobody.count", [TEMPLATE], _SPACE, _default_params, restrict=_restrict,
        problems=_problems, setup=_setup, launch=_launch_timed("count"))),
    "twobody.histogram": tuning.register(tuning.Tunable(
        "twobody.histogram", [TEMPLATE], {**_SPACE, "ppw": [1, 2, 4], "hist_mode": ["local", "global"],
                                          "copies": [1, 2, 4, 8, 16, 32], "flush": list(FLUSHES)},
        lambda device, problem: _default_params(device, {**problem, "out": "hist"}), restrict=_restrict,
        problems=_problems, setup=_setup, launch=_launch_timed("hist"))),
}

__all__ = ["Count", "Histogram", "Sum", "TwoBody", "pair_count", "distance_histogram", "rdf",
           "angular_pair_count", "kde_sum", "shell_volumes", "resolve_params"]
