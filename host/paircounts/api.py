"""Binned pair counts in the spirit of Corrfunc's theory routines: ``paircounts``
(and the op ``count``), with results as a numpy structured array.

Rules (the library's, see the docstring of :func:`paircounts` for how they
differ from Corrfunc's): separations are the float64 evaluation of the given
coordinates, pair for pair; bins are numpy.histogram's [lo, hi), the last
one closed.
"""

import dataclasses
import math

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core import inputs
from ..core.errors import DeviceCapabilityError
from ..core.launch import Events
from ..core.transfer import download, upload
from ..outputs.pairlist import group_pairs
from ..primitives.points import Bounds, bounds as device_bounds
from ..twobody import api as twobody_api
from . import boxes, execute, gridded
from .plan import (MAX_DIMS, MAX_POINTS, MODES, Plan, Problem, bin_tables, fit_tables, float_guess, near_images,
                   nearly_geometric, nearly_uniform, separation_scale)


def separation_edges(edges, name="edges"):
    """float64 edges: 1-D, at least 2, finite, >= 0, strictly increasing."""
    if np.ndim(edges) == 0:
        raise TypeError(f"{name} must be a 1-D array of bin edges, got {type(edges).__name__}")
    try:
        e = np.asarray(edges, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a 1-D array of numbers") from None
    if e.ndim != 1 or e.size < 2:
        raise ValueError(f"{name} must be a 1-D array of at least 2 edges, got shape {e.shape}")
    if not np.isfinite(e).all():
        raise ValueError(f"{name} must be finite")
    if e[0] < 0:
        raise ValueError(f"{name} must be >= 0 (separations are), got {e[0]:g}")
    if not (np.diff(e) > 0).all():
        raise ValueError(f"{name} must increase strictly")
    return e


def _count_arg(v, name):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be a positive integer, got {v!r}")
    if int(v) <= 0:
        raise ValueError(f"{name} must be a positive integer, got {int(v)}")
    return int(v)


def second_axis(mode, pimax, npi, nmu):
    """(edges of the second axis or None, its field name): pi bins linear over
    [0, pimax] (npi of them, default int(pimax)), mu bins over [0, 1]."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode != "rppi" and (pimax is not None or npi is not None):
        raise ValueError("pimax and npi apply to mode='rppi'")
    if mode != "smu" and nmu is not None:
        raise ValueError("nmu applies to mode='smu'")
    if mode == "rppi":
        if pimax is None:
            raise ValueError("mode='rppi' needs pimax")
        pm = inputs.scalar(pimax, "pimax", positive=True)
        if npi is None:
            if int(pm) < 1:
                raise ValueError(f"npi defaults to int(pimax) unit bins; pimax = {pm:g} gives none: pass npi")
            npi = int(pm)
        return np.linspace(0.0, pm, _count_arg(npi, "npi") + 1), "pimax"
    if mode == "smu":
        if nmu is None:
            raise ValueError("mode='smu' needs nmu")
        return np.linspace(0.0, 1.0, _count_arg(nmu, "nmu") + 1), "mumax"
    return None, None


def check_reach(box, mode, e1, e2):
    """ValueError when a bin reaches beyond half a box side (the minimum image
    would miss the other images); for a triclinic cell (mode 'r' only) half
    its shortest perpendicular width (strictly below it)."""
    if box is None:
        return
    if boxes.is_triclinic(box):
        if mode != "r":
            raise ValueError(f"mode={mode!r} needs an orthorhombic box (the line of sight is an axis); "
                             "triclinic cells take mode='r'")
        half = 0.5 * float(np.min(boxes.widths(box)))
        if not e1[-1] < half:           # strictly: at w / 2 a tie of the reduction's rounding may miss the image
            raise ValueError(f"edges reach {e1[-1]:g}, not below half the cell's shortest perpendicular width "
                             f"({half:g}): the minimum image could miss other images; use smaller edges")
        return
    sides = box[:-1] if mode == "rppi" else box
    half = 0.5 * float(np.min(sides))
    if e1[-1] > half:
        raise ValueError(f"edges reach {e1[-1]:g}, beyond half the shortest box side ({half:g}"
                         f"{' across the line of sight' if mode == 'rppi' else ''}): the minimum image "
                         "would miss other images; use a larger box or smaller edges")
    if mode == "rppi" and e2[-1] > 0.5 * box[-1]:
        raise ValueError(f"pimax = {e2[-1]:g} exceeds half the box side along the line of sight "
                         f"({0.5 * box[-1]:g})")


def _per_point(v, n, name, kind, device):
    """A per-point array on the host or the device, checked: weights float64
    and finite, groups int32."""
    if inputs.is_device_array(v):
        if v.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {v.shape}")
        inputs.check_context(device, v)
        if kind == "groups":
            if v.dtype != np.int32:
                raise TypeError(f"{name} on the device must be int32, got {v.dtype}")
            return v
        if v.dtype not in (np.float32, np.float64):
            raise TypeError(f"{name} on the device must be float32 or float64, got {v.dtype}")
        return v.astype(np.float64) if v.dtype != np.float64 else v      # checked by _weight_scale
    a = np.asarray(v)
    if a.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {a.shape}")
    if kind == "groups":
        if a.dtype.kind not in "iu":
            raise TypeError(f"{name} must be integers, got {a.dtype}")
        if n and (a.min() < -(1 << 31) or a.max() >= 1 << 31):
            raise ValueError(f"{name} must fit in int32")
        return a.astype(np.int32)
    if a.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be real numbers, got {a.dtype}")
    a = a.astype(np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite")
    return a


def _largest(w, name, k):
    """The k (1 or 2) largest |w| (float64, descending; zeros past the length):
    for a device array found on the device (its bounds, which check NaN/inf,
    then for k = 2 the largest |w| below the first and the first's count --
    three small reads, no copy of w), for a host one (checked by
    :func:`_per_point`) by a partition."""
    n = w.shape[0]
    if not inputs.is_device_array(w):
        a = np.abs(np.asarray(w, np.float64))
        top = np.sort(np.partition(a, n - k)[n - k:])[::-1] if n >= k else np.sort(a)[::-1]
        return [float(v) for v in top] + [0.0] * (k - len(top))
    b = device_bounds(w.queue, w.reshape(n, 1), name=name)
    if b is None:
        return [0.0] * k
    m1 = max(abs(float(b.lo[0])), abs(float(b.hi[0])))
    if k == 1 or n < 2:
        return [m1] + [0.0] * (k - 1)
    a = abs(w)
    under = m1 - a                                  # > 0 exactly where |w| < m1 (exact subtraction)
    zero = cla.zeros_like(a)
    ties = int(cla.sum(cla.if_positive(under, zero, zero + 1.0)).get())    # the |w| equal to m1
    m2 = m1 if ties >= 2 else float(cla.max(cla.if_positive(under, a, zero)).get())
    return [m1, m2]


def _times_pow2(w, e):
    """w * 2^e (exact unless it underflows), a new host or device array."""
    if inputs.is_device_array(w):
        h = e // 2
        return w * 2.0 ** h * 2.0 ** (e - h)           # each factor a double for any e of a weight
    return np.ldexp(w, e)


def _weight_scale(wx, wy, auto):
    """(wx', wy' (None for auto pairs), bound, e): the weights times powers of
    two (exact) so that the largest pair weight that occurs -- the two largest
    |w| for auto pairs (i != j), max|wx| max|wy| for cross pairs -- is about 1,
    that bound on |wx'_i wy'_j|, and the exponent e with sum w_i w_j = 2^e sum
    wx'_i wy'_j. The fixed point of the sums then rounds a pair within 2^-62 of
    the largest real pair weight at any scale (not of max|w|^2, a product no
    auto pair forms). ValueError when that largest product overflows float64."""
    if auto:
        m2, m1 = _largest(wx, "weights", 2)                        # m2 the largest, m1 the next
        if not math.isfinite(m1 * m2):
            raise ValueError(f"pair weights overflow float64: the two largest |w| are {m2:g} and {m1:g}")
        c = math.frexp(m1 * m2)[1] // 2 if m1 * m2 > 0 else 0     # m1 m2 2^-2c about 1
        if m2 > 0:
            c = max(c, math.frexp(m2)[1] - 1023)                   # the largest weight stays finite
        ex = ey = c
        wx2, wy2 = (wx if c == 0 else _times_pow2(wx, -c)), None
        bound = math.ldexp(m1, -c) * math.ldexp(m2, -c)
    else:
        (mx,), (my,) = _largest(wx, "weights", 1), _largest(wy, "y_weights", 1)
        if not math.isfinite(mx * my):
            raise ValueError(f"pair weights overflow float64: max|w| {mx:g} times max|y_w| {my:g}")
        ex, ey = (math.frexp(m)[1] if m > 0 else 0 for m in (mx, my))
        wx2, wy2 = ((w if e == 0 else _times_pow2(w, -e)) for w, e in ((wx, ex), (wy, ey)))
        bound = math.ldexp(mx, -ex) * math.ldexp(my, -ey)
    return wx2, wy2, bound, ex + ey


def _pair_args(a, ya, y, name):
    if y is None and ya is not None:
        raise ValueError(f"y_{name} needs y")
    if y is not None and (a is None) != (ya is None):
        raise ValueError(f"cross counts need both {name} and y_{name} (or neither)")


def _result_dtype(field):
    names = ["rmin", "rmax"] + ([field] if field else []) + ["npairs", "ravg", "weightavg"]
    return np.dtype([(n, np.uint64 if n == "npairs" else np.float64) for n in names])


def _host_ids(g):
    return None if g is None else (g.get() if inputs.is_device_array(g) else g)


_last_groups = [None]
#: the remembered exclusion list stays below 16 MB (larger ones are listed again per call)
CACHED_PAIRS = 1 << 21


def _excluded(gx, gy):
    """:func:`group_pairs` of the ids, remembered for the last ids seen (the
    frames of a trajectory share them)."""
    last = _last_groups[0]
    if last is not None and np.array_equal(last[0], gx) and (
            (gy is None and last[1] is None) or (gy is not None and last[1] is not None
                                                 and np.array_equal(last[1], gy))):
        return last[2]
    pairs = group_pairs(gx, gy)
    small = pairs is not None and len(pairs[0]) <= CACHED_PAIRS
    _last_groups[0] = (np.array(gx), None if gy is None else np.array(gy), pairs) if small else None
    return pairs


def _plain_counts(dev, q, X, Y, e1, box, gx, gy, wait_for):
    """Unweighted counts in r through the two-body histogram (kernels in the
    input's precision, the proven band decided in double: the same counts as
    the float64 evaluation), exclusions subtracted as an exact histogram of
    the excluded pairs; (uint64 counts, Events), or None when the groups
    exclude more pairs than a list holds."""
    if wait_for:
        cl.wait_for_events(list(wait_for))   # the two-body path reads device inputs without a wait list
    exclude = None
    if gx is not None:
        exclude = _excluded(_host_ids(gx), _host_ids(gy))
        if exclude is None:
            return None
    (counts, _), events = twobody_api._histogram(
        X.array, e1, None, None if Y is None else Y.array, box, dev, "auto", True, "nearest",
        {"progress": False}, queue=q, exclude=exclude)
    return counts.astype(np.uint64), events


def count(queue, x, edges, *, y=None, wait_for=None, **options):
    """:func:`paircounts` as an op on ``queue`` (a pyopencl CommandQueue;
    device arrays stay on the device): returns (structured array, Events by
    step: those of the double kernel -- upload, bounds, read, layout,
    kernel, reduce, download -- or, for unweighted counts in r, of the
    two-body path: bounds, read, the grid's build or layout, pairs or
    kernel, reduce, exclude). ``wait_for``: events the inputs wait on (the
    two-body path waits for them on the host first)."""
    return _count(queue, queue, x, edges, y=y, wait_for=wait_for, **options)


def _count(*args, **kw):
    """(structured result, Events) of :func:`_evaluate`."""
    out, _, events = _evaluate(*args, **kw)
    return out, events


def weighted_histogram(device, queue, x, edges, *, y=None, weights, y_weights=None, box=None, wait_for=None):
    """(float64 sums of w_i * w_j per bin over unordered pairs -- numpy.histogram's
    ``weights=`` applied to the pair distances --, Events): the double kernel's
    fixed-point sums, before any division (``distance_histogram(weights=)``)."""
    out, wsum, events = _evaluate(device, queue, x, edges, y=y, weights=weights, y_weights=y_weights, box=box,
                                  ordered=False, wait_for=wait_for)
    return (np.zeros(len(out)) if wsum is None else wsum), events


def _evaluate(device, queue, x, edges, *, y=None, weights=None, y_weights=None, groups=None, y_groups=None,
              box=None, mode="r", pimax=None, npi=None, nmu=None, ravg=False, ordered=True, wait_for=None,
              grid=True):
    """(structured result, float64 weight sums per bin or None, Events); ``grid``:
    evaluate only the pairs of neighbouring cells where a grid pays (:mod:`.gridded`)."""
    e1 = separation_edges(edges)
    e2, field = second_axis(mode, pimax, npi, nmu)
    if not isinstance(ordered, (bool, np.bool_)):
        raise TypeError(f"ordered must be True or False, got {ordered!r}")
    if not isinstance(ravg, (bool, np.bool_)):
        raise TypeError(f"ravg must be True or False, got {ravg!r}")
    X, Y = inputs.point_pair(x, y, max_n=MAX_POINTS)
    if X.d > MAX_DIMS:
        raise ValueError(f"x has {X.d} dimensions; 1 to {MAX_DIMS} are supported")
    if mode != "r" and X.d < 2:
        raise ValueError(f"mode={mode!r} needs at least 2 dimensions (the last is the line of sight)")
    dev = inputs.device_for(device, X.array, None if Y is None else Y.array)
    inputs.check_context(dev, X.array, None if Y is None else Y.array)
    q = queue or dev.queue
    if not dev.fp64:
        raise DeviceCapabilityError(f"pair counts are exact in double precision, which {dev.name} lacks "
                                    "(cl_khr_fp64)")
    b = boxes.periodic_box(box, X.d)
    check_reach(b, mode, e1, e2)
    _pair_args(weights, y_weights, y, "weights")
    _pair_args(groups, y_groups, y, "groups")
    nx, ny = X.n, (X.n if Y is None else Y.n)
    wx = None if weights is None else _per_point(weights, nx, "weights", "weights", dev)
    wy = None if y_weights is None else _per_point(y_weights, ny, "y_weights", "weights", dev)
    gx = None if groups is None else _per_point(groups, nx, "groups", "groups", dev)
    gy = None if y_groups is None else _per_point(y_groups, ny, "y_groups", "groups", dev)
    wbound, wexp = 0.0, 0
    if wx is not None:
        wx, wy, wbound, wexp = _weight_scale(wx, wy, Y is None)
    for P, name in ((X, "x"), (Y, "y")):
        if P is not None and not P.on_device and not np.isfinite(P.array).all():
            raise ValueError(f"{name} contain NaN or inf")
    nb2 = 1 if e2 is None else len(e2) - 1
    events = Events()
    out = np.zeros((len(e1) - 1) * nb2, _result_dtype(field))
    out["rmin"] = np.repeat(e1[:-1], nb2)
    out["rmax"] = np.repeat(e1[1:], nb2)
    if field:
        out[field] = np.tile(e2[1:], len(e1) - 1)
    if nx == 0 or ny == 0 or (Y is None and nx < 2):
        return out, None, events
    if mode == "r" and wx is None and not ravg and not boxes.is_triclinic(b):
        fast = _plain_counts(dev, q, X, Y, e1, b, gx, gy, wait_for)
        if fast is not None:
            npairs, events = fast
            out["npairs"] = npairs * np.uint64(2) if (Y is None and ordered) else npairs
            return out, None, events

    def on_device(P, name):
        """(the points on the device, a function giving their Bounds: read once, where asked for)."""
        if P.on_device:
            bd = device_bounds(q, P.array, name=name, events=events, wait_for=wait_for)
            return P.array, lambda: bd
        a = upload(dev, P.array, queue=q, events=events, wait_for=wait_for)
        memo = []

        def bnd():
            if not memo:
                memo.append(device_bounds(q, a, name=name, events=events))
            return memo[0]
        return a, bnd

    dx, bx = on_device(X, "x")
    dy, by = (None, lambda: None) if Y is None else on_device(Y, "y")
    # separations at extreme scales: evaluated at 2^k times the coordinates, edges and box
    seps = [e1] + ([e2] if mode == "rppi" else [])
    k = separation_scale(seps, 0.0)
    if k:
        k = separation_scale(seps, max(bx().maxabs, 0.0 if Y is None else by().maxabs,
                                       0.0 if b is None else float(np.abs(b).max())))
    near = b is not None and not boxes.is_triclinic(b) and near_images(b, Bounds.union(bx(), by()))
    e1s = e1 * 2.0 ** k
    e2s = e2 * 2.0 ** k if mode == "rppi" else e2
    tabs = bin_tables(mode, X.d, execute.first_axis(e1s)[:len(e1s)], e2s)
    bs = None if b is None else np.asarray(b, np.float64) * 2.0 ** k
    dw = [None if a is None or inputs.is_device_array(a) else upload(dev, a, queue=q, events=events)
          for a in (wx, wy, gx, gy)]
    dw = [a if d is None else d for a, d in zip((wx, wy, gx, gy), dw)]
    problem = Problem(dims=X.d, mode=mode, periodic=b is not None, auto=Y is None, weighted=wx is not None,
                      ravg=bool(ravg), grouped=gx is not None, nb1=len(e1) - 1, nb2=nb2,
                      uniform1=nearly_uniform(e1s) and float_guess(e1s), uniform2=nearly_uniform(e2s), nx=nx,
                      ny=ny, triclinic=boxes.is_triclinic(b),
                      log1=not nearly_uniform(e1s) and nearly_geometric(e1s) and float_guess(e1s),
                      tab1=tabs[0] is not None, tab2=tabs[1] is not None, near=near)
    problem = fit_tables(dev, problem)
    plan = Plan.resolve(dev, problem)
    tables = None
    if grid:
        cell = gridded.plan(dev, problem, e1, e2, b, lambda: Bounds.union(bx(), by()))
        if cell is not None:
            tables = gridded.build(dev, q, dx, dy, *cell, b, plan.wg_size, Y is None, events)
            if not tables.groups:
                return out, (None if wx is None else np.zeros(len(out))), events
            plan = dataclasses.replace(plan, chunk=tables.chunk, groups_x=tables.groups, groups_y=1, gridded=True)
            plan.validate(dev, problem)
    n, s, w = execute.run(q, dev, plan, problem, dx, dy, *dw, e1s, e2s, bs, events, wait_for=wait_for,
                          wbound=wbound, scale=2.0 ** k, tables=tables, bins=tabs)
    npairs = download(dev, n, queue=q, events=events).astype(np.uint64)
    with np.errstate(over="ignore"):          # a sum past float64 is inf, as numpy's
        wsum = None if w is None else np.ldexp(download(dev, w, queue=q, events=events), wexp)
    with np.errstate(divide="ignore", invalid="ignore"):
        if s is not None:
            ssum = np.ldexp(download(dev, s, queue=q, events=events), -k)     # the scale undone, exactly
            out["ravg"] = np.where(npairs > 0, ssum / npairs, 0.0)
        if wsum is not None:
            out["weightavg"] = np.where(npairs > 0, wsum / npairs, 0.0)
    out["npairs"] = npairs * np.uint64(2) if (Y is None and ordered) else npairs
    return out, wsum, events


def paircounts(x, edges, *, y=None, weights=None, y_weights=None, groups=None, y_groups=None, box=None,
               mode="r", pimax=None, npi=None, nmu=None, ravg=False, ordered=True, device=None):
    """Binned pair counts, as Corrfunc's theory routines (DD, DDrppi, DDsmu).

    ``x``, ``y``: (n, d) arrays, numpy or ``pyopencl.array.Array`` (d = 1..8,
    float32 or float64; separations are the float64 evaluation either way).
    ``edges``: strictly increasing separation edges >= 0 (r, rp or s).

    Pairs. Without ``y`` (auto): with ``ordered=True`` (the default) each
    unordered pair counts twice, i != j (Corrfunc's autocorrelation
    convention: ``npairs`` sums to n (n - 1) over all separations); with
    ``ordered=False`` once. With ``y`` (cross) each (i, j) counts once
    (``ordered`` does not apply).

    Modes (the line of sight is the last axis, as Corrfunc's theory DDrppi
    and DDsmu in a box):

    * ``'r'``: d = |x_i - y_j| over all axes.
    * ``'rppi'``: rp over the first d - 1 axes, pi = |delta of the last|;
      ``npi`` pi bins linear over [0, ``pimax``] (default ``int(pimax)`` unit
      bins, Corrfunc's). Rows are rp bins outer, pi bins inner.
    * ``'smu'``: s over all axes, mu = |delta of the last| / s (0 when
      s == 0), ``nmu`` bins linear over [0, 1]. Rows are s outer, mu inner.

    Bins are numpy.histogram's on every axis: [lo, hi), the last one closed,
    comparing the float64 separation with the float64 edges. Corrfunc's are
    (lo, hi] in r (a pair exactly on an inner edge lands one bin lower
    there, and a pair at d == edges[0] is counted here, not there) and
    excludes pi == pimax, which the last pi bin here includes.

    Exactness: every separation is the float64 evaluation of the given
    coordinates, pair for pair: delta_k = x_ik - y_jk (in a periodic box
    delta_k -= L_k * round(delta_k / L_k), the minimum image), the squares
    summed over k in order without fused multiply-adds, then sqrt (and for
    mu one division), so counts equal numpy's computation exactly. Where a
    square within the edges could overflow double (edges from 2^500) or come
    near its subnormal range (positive edges below 2^-450), coordinates,
    edges and box are evaluated times a power of two, which changes no
    rounding: the counts are then those of double with a wider exponent
    range (as ``distance_histogram``'s), where plain numpy would overflow or
    underflow; positive edges spanning past about 2^1021 raise ValueError (no
    scaling holds both ends' squares). Needs cl_khr_fp64 (DeviceCapabilityError otherwise).

    Speed: unweighted counts in mode 'r' without ``ravg`` (a DD count, an
    RDF frame) run on the two-body kernels (``distance_histogram``: the
    input's precision, the pairs within the proven rounding band of an edge
    decided in double; the cell grid when the edges reach a small part of
    the data), with exclusions subtracted as the exact histogram of the
    excluded pairs (listed on the host from the group ids, up to 2^24 of
    them; more go to the grouped kernel below). Weights, ``ravg`` and the
    2-D modes run a kernel that evaluates each pair in double: over a cell
    grid built on the device (the neighbour cells' pairs only; cells as wide
    as rp's reach across the line of sight and pi's along it) where the
    edges reach a small part of the points' extent in up to 3 dimensions,
    else over all pairs; the same counts and sums either way.

    ``box``: orthorhombic periodic side lengths (a number: a cube); edges
    (and pimax along the last axis) must reach at most half a side. In 3-D
    (mode 'r') also a triclinic cell: MDAnalysis ``dimensions`` [a, b, c,
    alpha, beta, gamma] or a lower-triangular 3x3 matrix of box vectors
    (rows a, b, c); the minimum image is then found by reducing along c, b,
    a in turn (:mod:`clkernels.host.paircounts.boxes`), exact for edges
    below half the cell's shortest perpendicular width (else ValueError).
    Triclinic counts run the double-precision kernel.

    Weights: ``weights`` (and ``y_weights`` with ``y``; both or neither),
    any finite numbers: a pair weighs w_i * w_j (numpy's ``weights=``
    applied to pairs); ``weightavg`` is the mean pair weight in the bin, so
    the weighted count is ``npairs * weightavg``. A weighted distance
    histogram (SDH) is ``distance_histogram(x, edges, weights=w)`` (the sums
    themselves, numpy's layout) or ``paircounts(x, edges, weights=w)``.

    Exclusions: ``groups`` (and ``y_groups`` with ``y``): int group ids per
    point; pairs whose ids are equal are skipped (MDAnalysis's
    ``exclusion_block`` is ``groups = arange(n) // block``).

    Returns a structured array, one row per bin: ``rmin``, ``rmax`` (the
    first axis's edges), ``pimax`` or ``mumax`` (the second axis's upper
    edge, 2-D modes), ``npairs`` (uint64), ``ravg`` (float64: the mean
    binned separation r, rp or s of the bin's pairs, unweighted; 0 without
    ``ravg=True`` or without pairs) and ``weightavg`` (float64, 0 without
    weights or pairs). Sums are exact integer sums in fixed point (each pair's
    value rounded once to a multiple of 2^-s, with 2^s below 2^62 over the
    largest value a pair can take: the last edge for ravg; for weights the
    largest |w_i w_j| that occurs -- the two largest |w| for auto pairs,
    max|w_x| * max|w_y| for cross pairs -- after scaling the weights by
    powers of two, so at any scale), carried in double-double: a bin's error
    is within 2^-62 * max / min |value| of its sum of |values| before the
    final rounding (a pair weighing less than 2^-62 of the largest can
    vanish), and results repeat exactly from run to run.
    On device arrays, :func:`clkernels.host.paircounts.count` is the op
    ``count(queue, x, edges, ...) -> (result, Events)``.
    """
    return _count(device, None, x, edges, y=y, weights=weights,
                 y_weights=y_weights, groups=groups, y_groups=y_groups, box=box, mode=mode, pimax=pimax,
                 npi=npi, nmu=nmu, ravg=ravg, ordered=ordered)[0]


__all__ = ["paircounts", "count", "weighted_histogram", "separation_edges", "second_axis", "check_reach"]
