"""Planning of two-body statistics (2-BS paper, section 3.3 and Figure 9).

:meth:`Plan.resolve` makes every decision of a call -- pairwise variant,
anchors per work-item, work-group size, the output stage of Figure 9 (a
Type-I output in registers; a Type-II output in private local-memory copies
when it fits, the number of copies from the paper's model, equations 1-5;
else global atomics), the squared-distance form, chunks and launch blocks --
into a frozen :class:`Plan`; :meth:`Plan.validate` is the only check and is
also the tuner's restriction (a cached configuration that fails it is
ignored with a warning). :func:`choose_method` picks all pairs or the cell
grid from the expected fraction of pairs within the distance of interest.
"""

import dataclasses
import functools
import math

import numpy as np

from ..core import tuning
from ..core.device import common_fast_sqrt
from ..core.launch import check_wg_size
from ..outputs.exact import RANGE, choose_scaling, frac_bits
from ..primitives.points import Bounds

TEMPLATE = "twobody.cl.mako"
TEMPLATES = (TEMPLATE, "outputs.cl.mako")
VARIANTS = ("naive", "readonly", "lrshm", "regshm", "shuffle")
DIAGS = ("mask", "triangle", "balanced")
HIST_MODES = ("global", "local")
FLUSHES = ("reduce", "atomic")
COPIES = (1, 2, 4, 8, 16, 32)
FORMS = ("diff", "dot")
MAX_DIMS = 8
#: a full-range local magic histogram of at most this many bins adds every pair
#: without clamping its slot: x = d * scale is at most nbins (1 + 1e-5) there
#: (hi covers the largest distance; float32's distance error is ~1e-6 relative,
#: the coordinates' 2^-24 nbins absolute), so the slot is at most nbins, the
#: copy's extra slot for d == hi
UNCLAMPED_MAX_BINS = 1 << 14
#: the options a call may force (everything else is the planner's)
OPTION_NAMES = ("variant", "ppw", "vec", "wg_size", "diag", "output", "copies", "flush",
                "chunk_points", "launch_blocks", "form")
#: memoized plans (Plan.resolve), cleared when full
_MEMO = {}
MEMO_SIZE = 256
#: below this expected pair fraction the cell grid beats all pairs...
CELLS_FRACTION = 0.05
#: ...once there are enough pairs to pay for building it (a dozen launches and
#: two host reads): below this many pairs all pairs take microseconds on a GPU
#: (on a CPU device the grid pays much sooner)
CELLS_MIN_PAIRS = {"gpu": 1 << 24, "cpu": 1 << 16}


def cells_min_pairs(device):
    return CELLS_MIN_PAIRS["gpu" if device.is_gpu else "cpu"]


#: a count of one radius over at most this many pairs takes the direct kernel
#: (method 'auto'): every distance in double from the original coordinates, one
#: launch between a parameter upload and the result's read, no bounds read in
#: between (a few microseconds of kernel on a GPU; the host path is the cost)
DIRECT_MAX_PAIRS = 1 << 22
#: partners per work-item of the direct kernel
DIRECT_BLOCK = 64


def direct_limit(real, dims, r, box):
    """The magnitude below which every coordinate lets the direct kernel's
    unscaled float64 evaluation equal the library's (scaled) one for radius
    ``r`` and ``box``; None where no magnitude does (then the direct kernel
    is not used). float32 inputs: inf (their differences, squares and sums
    never leave double's normal range). Memoized (a small call's hot path)."""
    real = np.dtype(real)
    if real == np.float32:
        return math.inf
    return _direct_limit(real, int(dims), float(r), None if box is None else tuple(float(b) for b in box))


@functools.lru_cache(maxsize=256)
def _direct_limit(real, dims, r, box):
    if not r > 0:
        return None          # r = 0: the smallest non-zero difference decides the scale
    # the scale is 1 for every magnitude in [0, limit) iff it is at both ends
    # (choose_scaling: r bounds it from below, the magnitude from above)
    limit = math.ldexp(1.0, RANGE[real][0] - 1)
    box = None if box is None else np.array(box)
    ends = [choose_scaling(real, dims, Bounds(-e, e), box=box, thresholds=[r]).exact_scale
            for e in (np.zeros(dims), np.full(dims, limit))]
    return limit if ends == [1.0, 1.0] else None


@dataclasses.dataclass(frozen=True)
class Problem:
    """What is computed, as far as the kernels care (hashable)."""
    out: str                     # 'count' | 'hist' | 'sum'
    dims: int
    real: str                    # 'float32' | 'float64': the kernels' precision (the input's)
    nl: int
    nr: int = None               # None: the pairs i < j of one set
    box: bool = False
    images: str = "nearest"      # 'nearest' | 'all'
    nimg: tuple = ()             # images='all': K per dimension
    nbins: int = 0
    binning: str = None          # hist: 'magic' | 'search' | 'user'
    closed: str = "left"         # 'right': cumulative radii
    uniform: bool = True
    fullrange: bool = False
    exact: bool = True
    dot_ok: bool = False         # exact 3-D count whose band allows the dot form
    dist_code: str = None        # user distance (no exactness)
    pred_code: str = None
    weight_code: str = None

    @property
    def op(self):
        return "twobody.histogram" if self.out == "hist" else "twobody.count"

    @property
    def magic(self):
        """A histogram binned by the magic-number floor (uniform bins from 0)."""
        return self.out == "hist" and (self.binning or "magic") == "magic"

    @property
    def size(self):
        return max(self.nl, self.nr or 0, 1)

    @property
    def itemsize(self):
        return np.dtype(self.real).itemsize


@dataclasses.dataclass(frozen=True)
class Launch:
    """One launch: block pairs (gx x gy) from points l0 of chunk li and r0 of chunk rj."""
    li: int
    rj: int
    l0: int
    r0: int
    gx: int
    gy: int
    same: bool                   # the diagonal chunk pair of a self join


@dataclasses.dataclass(frozen=True)
class Plan:
    variant: str
    ppw: int
    vec: int
    wg_size: int
    diag: str
    hist_mode: str = None
    copies: int = 1
    flush: str = "reduce"
    form: str = "diff"
    chunk: int = 0               # points per device-resident chunk
    launch_blocks: int = 256     # blocks per side of one launch
    sqrt_fn: str = "sqrt"
    sqrt_ulp: float = 3.0
    source: str = "default"

    @property
    def block(self):
        return self.wg_size * self.ppw

    # ---------------------------------------------------------------- resolve
    @classmethod
    def resolve(cls, device, problem, devices=None, **overrides):
        """The plan of ``problem`` on ``device`` (and the other ``devices`` a
        call spreads over): tuned or model parameters, then ``overrides``.
        Memoized per (devices, problem, overrides, tuning-cache state): a
        repeated call plans in microseconds."""
        try:
            key = (device, problem, tuple(devices or ()), tuple(sorted(overrides.items())),
                   tuning.generation())
            plan = _MEMO.get(key)
        except TypeError:                 # an unhashable override: plan afresh (it will be refused)
            return cls._resolve(device, problem, devices, **overrides)
        if plan is None:
            plan = cls._resolve(device, problem, devices, **overrides)
            if len(_MEMO) >= MEMO_SIZE:
                _MEMO.clear()
            _MEMO[key] = plan
        return plan

    @classmethod
    def _resolve(cls, device, problem, devices=None, **overrides):
        given = {k: v for k, v in overrides.items() if v is not None}
        unknown = set(given) - set(OPTION_NAMES)
        if unknown:
            raise TypeError(f"unknown option(s): {', '.join(sorted(unknown))}")
        hist = problem.out == "hist"
        if not hist:
            extra = [k for k in ("output", "copies", "flush") if k in given]
            if extra:
                raise ValueError(f"{', '.join(extra)} apply to histograms only")
        params, source = TUNABLES[problem.op].resolve(
            device, {"size": problem.size, "dtype": problem.real, "dims": problem.dims,
                     "nbins": problem.nbins})
        params = {k: params.get(k) for k in ("variant", "ppw", "vec", "wg_size", "diag", "hist_mode",
                                            "copies", "flush")}
        forced = {k: given[k] for k in ("variant", "ppw", "vec", "wg_size", "diag", "copies", "flush")
                  if k in given}
        if "output" in given:
            forced["hist_mode"] = given["output"]
        if forced and "vec" not in forced and forced.get("variant") not in (None, "naive", "readonly"):
            params["vec"] = 1
        if "copies" in forced and "hist_mode" not in forced:
            forced["hist_mode"] = "local"
        params.update(forced)
        if hist and "hist_mode" in forced and "copies" not in forced:
            params["copies"] = None           # a forced output stage re-plans the copies
        if "ppw" not in forced and "wg_size" not in forced:
            params["ppw"], params["wg_size"] = fill_device(device, problem, int(params["ppw"]),
                                                           int(params["wg_size"]))
        if problem.images == "all" and problem.out == "count" and problem.exact and "diag" not in forced:
            params["diag"] = "mask"           # image loops run inside the masked block loop only
        p = dict(params)
        _check_names(p)
        sq_fn, ulp = common_fast_sqrt(devices or [device]) if problem.binning == "magic" else ("sqrt", 3.0)
        form = given.get("form")
        if form is None:
            form = "dot" if (problem.dot_ok and p["variant"] in ("regshm", "lrshm")) else "diff"
        plan = cls(variant=p["variant"], ppw=int(p["ppw"]), vec=int(p["vec"]), wg_size=int(p["wg_size"]),
                   diag=p["diag"], form=form, sqrt_fn=sq_fn, sqrt_ulp=ulp,
                   flush=p.get("flush") or "reduce", source="forced" if forced else source)
        if hist:
            try:
                plan = _output_stage(device, plan, problem, p.get("hist_mode"), p.get("copies"))
            except ValueError:
                if "hist_mode" in forced or "copies" in forced:
                    raise
                # a tuned output stage (tuned for another number of bins) that does not fit: re-plan
                plan = _output_stage(device, plan, problem, None, None)
        for k in ("chunk_points", "launch_blocks"):
            v = given.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
                raise ValueError(f"{k} must be a positive integer, got {v!r}")
        plan.validate(device, problem)               # before sizes: they divide by the block
        plan = dataclasses.replace(plan, **_sizes(plan, problem, devices or [device], given))
        plan.validate(device, problem)
        for d in (devices or [])[1:]:
            if plan.local_bytes(problem, d) > d.local_mem_size:
                raise ValueError(f"the plan for {device.name} does not fit the local memory of {d.name}")
        return plan

    # --------------------------------------------------------------- validate
    def validate(self, device, problem):
        """Raise ValueError if this plan cannot run ``problem`` on ``device``."""
        _check_names(dataclasses.asdict(self))
        wg = self.wg_size
        check_wg_size(device, wg)
        if device.sg_backend == "nv" and wg % 32:
            raise ValueError("wg_size must be a multiple of 32 on this device")
        if not 1 <= self.ppw <= 16:
            raise ValueError("ppw must be 1..16")
        if self.block > 16384:
            raise ValueError("wg_size * ppw must be <= 16384 (32-bit counts per block pair)")
        if self.vec not in (1, 2, 4):
            raise ValueError("vec must be 1, 2 or 4")
        if self.vec > 1 and self.variant not in ("naive", "readonly"):
            raise ValueError("vector loads (vec > 1) apply to the naive and readonly variants")
        if self.block % self.vec:
            raise ValueError("vec must divide the block size wg_size * ppw")
        if self.form == "dot" and not (problem.dims == 3 and self.variant in ("regshm", "lrshm")
                                       and problem.out == "count" and problem.exact and not problem.box
                                       and problem.dist_code is None and problem.pred_code is None):
            raise ValueError("form='dot' applies to exact 3-D counts with regshm/lrshm and no box")
        if problem.images == "all" and self.diag != "mask" and problem.out == "count" and problem.exact:
            raise ValueError("images='all' counts need diag='mask'")
        if problem.out == "hist":
            if self.hist_mode not in HIST_MODES:
                raise ValueError(f"output must be one of {HIST_MODES}, got {self.hist_mode!r}")
            if self.copies not in COPIES:
                raise ValueError(f"copies must be one of {COPIES}")
            if self.copies > wg:
                raise ValueError("copies must not exceed wg_size")
            if self.flush not in FLUSHES:
                raise ValueError(f"flush must be one of {FLUSHES}")
        need = self.local_bytes(problem, device)
        if need > device.local_mem_size:
            raise ValueError(f"this configuration needs {need} bytes of local memory; "
                             f"{device.name} has {device.local_mem_size}")
        if self.chunk < 0 or (self.chunk and self.chunk % self.block):
            raise ValueError("chunk_points must be a multiple of wg_size * ppw")
        if self.launch_blocks < 1:
            raise ValueError("launch_blocks must be >= 1")

    def local_bytes(self, problem, device):
        """Bytes of local memory the kernel declares."""
        wg, dims, item = self.wg_size, problem.dims, problem.itemsize
        b = 0
        if self.variant in ("lrshm", "regshm"):     # the partner tile (d = 3 padded to a 4-vector)
            b += (4 if dims == 3 else dims) * wg * item
        if self.variant == "lrshm":
            b += dims * wg * self.ppw * item
        if device.sg_backend == "local":
            b += 4 * wg
        if problem.out == "sum":
            b += wg * item
        if problem.out == "hist":
            nb = problem.nbins
            if problem.binning != "magic" and not (problem.binning == "user" and problem.uniform):
                b += (nb + 1) * item * (2 if problem.exact and problem.binning == "search" else 1)
            if self.hist_mode == "local":
                b += 4 * (nb + 2) * self.copies      # + the d == hi and trash slots
        return b + 16

    # ---------------------------------------------------------------- launches
    def launches(self, nl, nr, self_join):
        """The launches over all block pairs, chunk pair by chunk pair."""
        B, T, C = self.block, self.launch_blocks, self.chunk
        out = []
        nci, ncj = max(1, -(-nl // C)), max(1, -(-nr // C))
        for I in range(nci):
            for J in range(I if self_join else 0, ncj):
                ln, rn = min(C, nl - I * C), min(C, nr - J * C)
                if ln <= 0 or rn <= 0:
                    continue
                nbl, nbr = -(-ln // B), -(-rn // B)
                same = self_join and I == J
                for ti in range(-(-nbl // T)):
                    for tj in range(-(-nbr // T)):
                        if same and tj < ti:
                            continue
                        out.append(Launch(I, J, ti * T * B, tj * T * B, min(T, nbl - ti * T),
                                          min(T, nbr - tj * T), same))
        return out

    def unclamped(self, problem):
        """A full-range local magic histogram of at most UNCLAMPED_MAX_BINS bins."""
        return (problem.magic and problem.fullrange and self.hist_mode == "local"
                and problem.nbins <= UNCLAMPED_MAX_BINS)

    def floor_bins(self, problem):
        """exact=False on an unclamped histogram: the bin is floor(d * scale)
        by one FFMA onto a grid of 2^-F (``frac_bits``), x below 2^-(F+1)
        into a guard slot before bin 0 (``hist_tally``)."""
        return self.unclamped(problem) and not problem.exact and frac_bits(problem.nbins) is not None

    def render_params(self, problem, device):
        floor = self.floor_bins(problem)
        return dict(real="float" if problem.real == "float32" else "double", dims=problem.dims,
                    wg_size=self.wg_size, ppw=self.ppw, variant=self.variant, vec=self.vec,
                    diag=self.diag, box=problem.box, images=problem.images, nimg=tuple(problem.nimg),
                    out=problem.out, hist_mode=self.hist_mode or "global", copies=self.copies,
                    flush=self.flush, nbins=max(problem.nbins, 1), binning=problem.binning or "magic",
                    uniform=problem.uniform, fullrange=problem.fullrange, closed=problem.closed,
                    sq=problem.dist_code is None, dist_code=problem.dist_code, pred_code=problem.pred_code,
                    weight_code=problem.weight_code, exact=problem.exact, form=self.form,
                    orig="float" if problem.real == "float32" else "double", sqrt_fn=self.sqrt_fn,
                    fbits=(frac_bits(problem.nbins) or 0) if problem.magic and (problem.exact or floor) else 0,
                    clamp=not self.unclamped(problem), floor=floor)


def fill_device(device, problem, ppw, wg_size):
    """(ppw, wg_size) for a problem too small to give every compute unit two
    work-groups (block pairs) with blocks of ``ppw * wg_size`` points: anchors
    per work-item halved first, then the work-group (down to 64 work-items, or
    the given size if smaller). 2,000 points in one 2048-point block were one
    work-group on one of the H100's 132 SMs."""
    want = 2 * device.compute_units
    least = min(wg_size, 64)

    def blocks(b):
        nl = -(-problem.nl // b)
        return nl * (nl + 1) // 2 if problem.nr is None else nl * -(-problem.nr // b)

    while blocks(ppw * wg_size) < want:
        if ppw > 1:
            ppw //= 2
        elif wg_size > least:
            wg_size //= 2
        else:
            break
    return ppw, wg_size


def _check_names(p):
    if p.get("variant") not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {p.get('variant')!r}")
    if p.get("diag") not in DIAGS:
        raise ValueError(f"diag must be one of {DIAGS}, got {p.get('diag')!r}")
    if p.get("form", "diff") not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {p.get('form')!r}")
    for k in ("ppw", "vec", "wg_size"):
        if not isinstance(p.get(k), (int, np.integer)) or isinstance(p.get(k), bool) or p.get(k) < 1:
            raise ValueError(f"{k} must be a positive integer, got {p.get(k)!r}")


def _output_stage(device, plan, problem, hist_mode, copies):
    """Figure 9 for a histogram: local copies when they fit, else global atomics."""
    base = dataclasses.replace(plan, hist_mode="global", copies=1).local_bytes(problem, device)
    budget = device.local_mem_size
    nb = problem.nbins
    mode = hist_mode or ("local" if base + 4 * (nb + 2) <= budget else "global")
    if mode == "local":
        if copies is None:
            c, _ = copies_model(device, nb, plan.wg_size, base, warp=device.warp_size or 32)
            copies = c or 1
        if base + 4 * (nb + 2) * copies > budget:
            raise ValueError(f"{nb} bins x {copies} copies do not fit the local memory of "
                             f"{device.name} ({budget} bytes); use fewer copies or output='global'")
    else:
        copies = 1
    return dataclasses.replace(plan, hist_mode=mode, copies=int(copies))


def _sizes(plan, problem, devices, given):
    """Chunk (points per device-resident chunk) and launch blocks."""
    B = plan.block
    nl, nr = problem.nl, problem.nr or 0
    chunk = given.get("chunk_points")
    if chunk is None:
        # resident when the points (original + kernel layout) take at most a quarter of
        # the smallest device's memory; else chunks (three resident: L and two R slots)
        item = problem.itemsize * problem.dims
        bytes_all = 2 * (nl + nr) * item
        budget = min(d.global_mem_size for d in devices) // 4
        max_points = min(d.max_mem_alloc_size for d in devices) // problem.itemsize // problem.dims
        if bytes_all <= budget and max(nl, nr) <= max_points:
            chunk = max(nl, nr, 1)
        else:
            chunk = max(B, min(budget // (6 * item), max_points))
    chunk = max(B, -(-int(chunk) // B) * B)
    T = given.get("launch_blocks")
    if T is None:
        T = 256
        if problem.out == "hist" and plan.hist_mode == "local" and plan.flush == "reduce":
            T = max(1, min(T, int(math.sqrt((64 << 20) / (4 * max(problem.nbins, 1))))))
        if len(devices) > 1:      # enough launches to spread over the devices
            nb = -(-min(chunk, max(nl, nr)) // B)
            T = max(1, min(T, nb // (2 * len(devices))))
    return {"chunk": chunk, "launch_blocks": max(1, int(T))}


# ------------------------------------------------------------- copies model
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
        if c > wg_size:
            break
        lm = base_local + 4 * (nbins + 2) * c
        if lm > device.local_mem_size:
            break
        groups = min(per_cu // max(lm, 1), max(threads // wg_size, 1))
        if groups < 1:
            break
        costs[c] = _latency(max(1, warp // c), max(nbins, 1)) / (groups * wg_size)
    if not costs:
        return None, costs
    best = min(costs, key=lambda c: (round(costs[c], 12), c))
    return best, costs


# ------------------------------------------------------------------ method
def expected_fraction(r, extent, box=None):
    """Expected fraction of pairs within distance r for uniform points in a
    box of side lengths ``extent`` (or the periodic ``box``)."""
    sides = np.asarray(box if box is not None else extent, dtype=np.float64)
    d = sides.size
    if r <= 0:
        return 0.0
    # ball / volume as a product of ratios <= 1 (no overflow at any scale); a flat
    # side counts as one cell
    ratios = float(r) / np.maximum(sides, float(r))
    frac = math.pi ** (d / 2) / math.gamma(d / 2 + 1) * float(np.prod(ratios))
    return min(1.0, frac)


def choose_method(fraction, method=None, pairs=None, min_pairs=CELLS_MIN_PAIRS["gpu"]):
    """'allpairs' or 'cells' for a problem of ``pairs`` pairs whose expected
    fraction within the distance of interest is ``fraction``; ``method``
    ('auto' | 'allpairs' | 'cells') forces a choice."""
    if method not in (None, "auto"):
        if method not in ("allpairs", "cells"):
            raise ValueError(f"method must be 'auto', 'allpairs' or 'cells', got {method!r}")
        return method
    if pairs is not None and pairs < min_pairs:
        return "allpairs"
    return "cells" if fraction < CELLS_FRACTION else "allpairs"


# ------------------------------------------------------------------ tuning
def _default_params(device, problem):
    """Model-based defaults (the Tunables' ``default``)."""
    if device.is_gpu:
        # Reg-SHM with a 4-vector tile: one broadcast local load per partner. (The paper's
        # best SDH kernel on Pascal read the input through the read-only cache; on
        # Hopper L1 and local memory are one array: the tuner may pick 'readonly'.)
        p = dict(wg_size=256, ppw=4, variant="regshm", vec=1, diag="balanced")
        if problem.get("out", "count") == "count":
            p["ppw"] = 8        # exact counts (the default): 3.34e12 pairs/s at ppw 8, 3.23e12 at 4 (H100)
    else:
        p = dict(wg_size=64, ppw=2, variant="readonly", vec=1, diag="mask")
    p["wg_size"] = min(p["wg_size"], device.max_work_group_size)
    if problem.get("out", "count") == "hist":
        p.update(hist_mode=None, copies=None, flush="reduce")
    return p


#: canonical problems the tuner's restriction validates against (3-D float32, 256 bins)
_CANON = {"twobody.count": Problem("count", 3, "float32", 1 << 20),
          "twobody.histogram": Problem("hist", 3, "float32", 1 << 20, nbins=256, binning="magic",
                                       fullrange=True)}


def _restrict(op):
    def restrict(params, device):
        prob = _CANON[op]
        plan = Plan(variant=params["variant"], ppw=params["ppw"], vec=params["vec"],
                    wg_size=params["wg_size"], diag=params["diag"])
        if prob.out == "hist":
            plan = _output_stage(device, plan, prob, params.get("hist_mode"), params.get("copies"))
            plan = dataclasses.replace(plan, flush=params.get("flush") or "reduce")
        plan.validate(device, prob)
        return True
    return restrict


SPACE = {"wg_size": [64, 128, 256, 512], "ppw": [1, 2, 4, 8], "variant": list(VARIANTS),
         "vec": [1, 2, 4], "diag": ["mask", "balanced"]}

TUNABLES = {
    "twobody.count": tuning.register(tuning.Tunable(
        "twobody.count", TEMPLATES, SPACE, _default_params, restrict=_restrict("twobody.count"))),
    "twobody.histogram": tuning.register(tuning.Tunable(
        "twobody.histogram", TEMPLATES, {**SPACE, "ppw": [1, 2, 4, 8], "hist_mode": ["local", "global"],
                                         "copies": list(COPIES), "flush": list(FLUSHES)},
        lambda device, problem: _default_params(device, {**problem, "out": "hist"}),
        restrict=_restrict("twobody.histogram"))),
}
