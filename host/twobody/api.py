"""Two-body statistics: pair counts, distance histograms, RDF, and a framework
for user-defined 2-BS (the 2-BS paper, sections 3-4).

Comparison rules are scipy's and numpy's: a pair is within r when its
distance d <= r (``scipy.spatial.cKDTree.count_neighbors``, sklearn); a
histogram's bins are [e_i, e_i+1), the last one closed (``numpy.histogram``).
Self pairs are i < j; with ``y`` all (i, j). Corrfunc and halotools count each
auto pair twice: multiply our self counts by 2 to compare.

Exact results (``exact=True``, the default, built-in distance): counts and
histograms equal a float64 evaluation of the distances from the given
coordinates, pair for pair -- d = sqrt(sum_k (x_ik - y_jk)^2) in double,
summed over k in order with no fused multiply-add (scipy's pdist/cdist; numpy
for d < 8), periodic boxes by the minimum image dx -= L * round(dx / L) --
at any finite scale: kernel coordinates are scaled by a power of two so that
squared distances neither overflow nor underflow, and a pair whose squared
distance, computed in the input's precision, lies within a proven rounding
band of r or of a bin edge (:mod:`clkernels.host.outputs.exact`) is decided
in double from the original coordinates. float64 inputs whose squared
distances overflow double are evaluated scaled by a power of two, which
changes no rounding. ``exact=False`` skips the band (ties may go either way).
Sums (``kde_sum``) and user-defined distances are computed in the input
precision and are not exact.

Periodic boxes (``box``, orthorhombic side lengths): coordinates are wrapped
into [0, L) first. With the default ``images='nearest'`` a distance is the
minimum image's, so r (or a histogram's range) beyond half the shortest side
raises ValueError (other images would be missed); ``images='all'`` counts
every image of every pair i != j within r (a point's own images excluded).

Advanced keyword options (each defaults to the planner's choice; see
:class:`clkernels.host.twobody.plan.Plan`): ``variant`` ('naive', 'readonly',
'lrshm', 'regshm', 'shuffle'), ``ppw`` (anchors per work-item), ``vec`` (1, 2,
4: vector loads, naive/readonly), ``wg_size``, ``diag`` ('mask', 'triangle',
'balanced'), ``output`` ('local' | 'global' histograms), ``copies``,
``flush`` ('reduce' | 'atomic'), ``form`` ('diff' | 'dot'), ``chunk_points``,
``launch_blocks``; ``plan`` a dict of them (keywords win). Any of them implies
``method='allpairs'``. ``device`` may be a list of devices: launches are spread
round-robin over them.

``progress`` (every all-pairs call): None shows a tqdm bar on calls of at
least 8 launches when tqdm is installed, True always shows one (a line per
tenth on stderr without tqdm), False never; a callable ``fn(done, total)``
is called as the launches' block pairs complete.
"""

import math

import numpy as np

from .. import cellgrid
from ..core import inputs
from ..outputs import Count, Histogram, Sum
from . import plan as plan_mod
from .call import Call, options_dict
from .plan import MAX_DIMS, choose_method
from ..outputs.exact import choose_scaling
from ..outputs.pairlist import pair_list_histogram
from .stats import CountStat, HistStat, SumStat, exact_params
from . import execute



# ------------------------------------------------------------ public calls
def _method(call, method, opts, reach, grid_ok):
    if method == "direct":
        raise ValueError("method='direct' applies to pair_count with one radius")
    if method not in (None, "auto", "allpairs", "cells"):
        raise ValueError(f"method must be 'auto', 'allpairs' or 'cells' (pair_count: or 'direct'), "
                         f"got {method!r}")
    if opts:
        if method == "cells":
            raise TypeError("kernel options apply to method='allpairs'")
        return "allpairs"
    if not grid_ok or len(call.devs) > 1:
        if method == "cells":
            raise ValueError("method='cells' supports one device, one radius and images='nearest'")
        return "allpairs"
    nl = call.X.n
    pairs = nl * (nl - 1) // 2 if call.Y is None else nl * call.Y.n
    least = plan_mod.cells_min_pairs(call.dev)
    if method in (None, "auto") and pairs < least:
        return "allpairs"                 # no bounds read needed for the choice
    return choose_method(call.fraction(reach), method, pairs, least)


def _direct_limit(call, method, opts, rr, scalar, images):
    """The coordinate limit of the direct kernel (plan.direct_limit) where the
    call takes it, else None; method='direct' where it cannot raises."""
    if method not in (None, "auto", "direct"):
        return None
    X, Y = call.X, call.Y
    pairs = X.n * (X.n - 1) // 2 if Y is None else X.n * Y.n
    why = ("kernel options apply to method='allpairs'" if opts else
           "it counts one radius" if not scalar else
           "it takes images='nearest'" if images != "nearest" else
           "it runs on one device" if len(call.devs) > 1 else
           f"it evaluates in double, which {call.dev.name} lacks" if not call.dev.fp64 else None)
    limit = None
    if why is None:
        limit = plan_mod.direct_limit(X.dtype, X.d, float(rr[0]), call.box)
        if limit is None:
            why = "r is beyond float64's unscaled range (or 0 with float64 points)"
    if method == "direct":
        if why is not None:
            raise ValueError(f"method='direct' does not apply: {why}")
        return limit
    return limit if why is None and pairs <= plan_mod.DIRECT_MAX_PAIRS else None


def _count(x, r, y, box, device, method, exact, images, options, queue=None, wait_for=None):
    rr, scalar = inputs.radii(r)
    opts = options_dict(options)
    progress = opts.pop("progress", None)
    call = Call(x, y, device, box=box, images=images, queue=queue, wait_for=wait_for)
    call.check_reach(float(rr[-1]), "r")
    if call.empty:
        return (0 if scalar else np.zeros(len(rr), np.int64)), call.events
    limit = _direct_limit(call, method, opts, rr, scalar, images)
    if limit is not None:
        X0 = call.original(call.dev, call.X)
        Y0 = None if call.Y is None else call.original(call.dev, call.Y)
        n, flags = execute.direct_count(call.dev, call.q, X0, Y0, float(rr[0]), call.box, limit, call.events,
                                        wait_for)
        for bit, name in ((1, "x"), (2, "y")):
            if flags & bit:
                raise ValueError(f"{name} contain NaN or inf")
        if not flags:
            return n, call.events
        method = "allpairs" if method == "direct" else method    # beyond the unscaled range
    how = _method(call, method, opts, float(rr[-1]), scalar and images == "nearest")
    if how == "cells":
        res = cellgrid.count_within(call.q, call.original(call.dev, call.X),
                                    None if call.Y is None else call.original(call.dev, call.Y),
                                    float(rr[0]), box=call.box, bounds=call.bounds(), exact=exact,
                                    events=call.events)
        return int(res), call.events
    stat = CountStat(rr, scalar)
    return stat.result(call.run(stat, exact, opts, progress)), call.events


def _histogram(x, bins, range, y, box, device, method, exact, images, options, queue=None, wait_for=None,
               exclude=None):
    """((counts, edges), events); ``exclude``: (i, j) uint32 arrays of pairs
    not to count (without y each unordered pair once), subtracted exactly."""
    if exclude is not None and (not exact or images != "nearest"):
        raise ValueError("exclusions need exact=True and images='nearest'")
    res, events = _histogram_all(x, bins, range, y, box, device, method, exact, images, options, queue,
                                 wait_for)
    counts, edges, call = res
    if exclude is None or not len(exclude[0]):
        return (counts, edges), events
    sc = choose_scaling(call.X.dtype, call.X.d, call.bounds(), box=call.box,
                        thresholds=[abs(e) for e in edges if e != 0])
    X0 = call.original(call.dev, call.X)
    Y0 = X0 if call.Y is None else call.original(call.dev, call.Y)
    drop = pair_list_histogram(call.q, call.dev, X0, Y0, exact_params(sc, call.box, edges), *exclude,
                               len(edges) - 1, events)
    return (counts - drop.astype(np.int64), edges), events


def _weighted_histogram(x, bins, range, y, weights, y_weights, box, device, method, exact, images, client,
                        options):
    """distance_histogram(weights=): (float64 sums, edges) from the pair counts' kernel."""
    from ..paircounts import api as paircounts_api

    opts = options_dict(options)
    opts.pop("progress", None)
    why = ("client=" if client is not None else "exact=False" if not exact else
           f"images={images!r}" if images != "nearest" else
           f"method={method!r}" if method not in (None, "auto") else
           "kernel options (" + ", ".join(sorted(opts)) + ")" if opts else None)
    if why is not None:
        raise ValueError(f"weights= runs the pair counts' double-precision kernel (clkernels.paircounts), "
                         f"which does not take {why}")
    if weights is None:
        raise ValueError("y_weights needs weights (the weights of x)")
    call = Call(x, y, device, box=box)
    e = _edges(call, bins, range).edges
    if not (np.diff(e) > 0).all() or e[-1] <= 0:
        raise ValueError("weights= needs strictly increasing histogram edges, the last > 0 (the pair counts' "
                         f"rule), got edges from {e[0]:g} to {e[-1]:g}")
    # distances are >= 0: bins below 0 stay empty, and the bin holding 0 starts at 0 (numpy's own
    # default range for coincident points is (-0.5, 0.5))
    first = int(np.searchsorted(e, 0.0, side="right")) - 1 if e[0] < 0 else 0
    sub = e[first:].copy()
    sub[0] = max(sub[0], 0.0)
    sums = np.zeros(len(e) - 1)
    X = call.original(call.dev, call.X) if call.X.n else call.X.array
    Y = None if call.Y is None else (call.original(call.dev, call.Y) if call.Y.n else call.Y.array)
    sums[first:], _ = paircounts_api.weighted_histogram(call.dev, call.q, X, sub, y=Y, weights=weights,
                                                        y_weights=y_weights, box=box)
    return sums, e


def _edges(call, bins, range):
    """The histogram's edges (numpy's default range where none is given), within the call's reach."""
    default = None
    if range is None and np.ndim(bins) == 0 and not isinstance(bins, str):
        default = call.default_range()
    edges = inputs.histogram_edges(bins, range, default)
    call.check_reach(edges.hi, "the histogram's upper edge")
    return edges


def _histogram_all(x, bins, range, y, box, device, method, exact, images, options, queue, wait_for):
    opts = options_dict(options)
    progress = opts.pop("progress", None)
    call = Call(x, y, device, box=box, images=images, queue=queue, wait_for=wait_for)
    edges = _edges(call, bins, range)
    if call.empty:
        return (np.zeros(edges.nbins, np.int64), edges.edges, call), call.events
    maxd = call.max_distance()
    how = _method(call, method, opts, edges.hi, images == "nearest")
    if how == "cells":
        counts = cellgrid.histogram_within(call.q, call.original(call.dev, call.X),
                                           None if call.Y is None else call.original(call.dev, call.Y),
                                           edges.edges, box=call.box, bounds=call.bounds(), exact=exact,
                                           events=call.events)
        return (np.asarray(counts, np.int64), edges.edges, call), call.events
    stat = HistStat(edges, maxd)
    return (stat.result(call.run(stat, exact, opts, progress)), edges.edges, call), call.events


def pair_count(x, r, *, y=None, box=None, device=None, method="auto", exact=True, images="nearest",
               client=None, **options):
    """Number of pairs at distance d <= r (self: i < j; with ``y``: all (i, j)).

    ``x``, ``y``: (n, d) float32/float64 arrays, numpy or ``pyopencl.array.Array``
    (d = 1..8; computed in their precision; integers become float64).
    ``r``: a number, or a non-decreasing 1-D array of radii: then the
    cumulative counts (int64 array), one per radius, in one pass (as
    ``scipy.spatial.cKDTree.count_neighbors``). ``box``: orthorhombic periodic
    side lengths. ``method``: 'auto' | 'direct' | 'allpairs' | 'cells' (the
    cell grid, for small r); 'direct' (auto for one radius over at most
    ``plan.DIRECT_MAX_PAIRS`` pairs on one device with double precision)
    evaluates every distance in double from the given coordinates in one
    launch, the latency-bound small call's path (forced on a large problem
    it is one long launch of all n^2 pairs in double). ``exact``,
    ``images``, ``device`` and the advanced options: see the module
    docstring. ``client``: a ``dask.distributed.Client``: the pairs in tiles
    over its workers (numpy or dask arrays; ``block=`` rows a tile side), see
    :mod:`clkernels.host.distributed.twobody`."""
    if client is not None:
        from .. import distributed
        return distributed.pair_count(client, x, r, y=y, box=box, device=device, method=method, exact=exact,
                                      images=images, **options)
    return _count(x, r, y, box, device, method, exact, images, options)[0]


def distance_histogram(x, bins=10, range=None, *, y=None, weights=None, y_weights=None, box=None, device=None,
                       method="auto", exact=True, images="nearest", client=None, **options):
    """Histogram of all pairwise distances, like ``numpy.histogram(d, bins, range)``.

    ``bins``: an int (uniform over ``range``) or a non-decreasing array of
    edges (``range`` is then ignored). The default range is 0 .. the largest
    distance there can be (the bounding box's diagonal, widened by a relative
    1e-6; with a box, half its shortest side). Bins are [e_i, e_i+1), the last
    one closed. Returns (counts int64, edges float64). ``client``: as in
    :func:`pair_count` (the default range is computed once, from all the
    points).

    ``weights``: per-point weights (n,) of ``x`` (and ``y_weights`` of ``y``
    for cross pairs; both or neither), any finite numbers: each pair adds
    w_i * w_j to its bin, as ``numpy.histogram(d, bins, weights=w_i * w_j)``,
    and the result is float64 sums. Weighted histograms run the pair counts'
    kernel (:func:`clkernels.paircounts`: every distance in double, the sums
    in fixed point, each pair's weight within 2^-62 of the largest pair
    weight w_i * w_j that occurs, at any scale, before the final rounding,
    repeatable run to run); they take ``exact=True``, ``images='nearest'``,
    ``method='auto'``, no kernel options or ``client``, and strictly
    increasing edges."""
    if weights is not None or y_weights is not None:
        return _weighted_histogram(x, bins, range, y, weights, y_weights, box, device, method, exact, images,
                                   client, options)
    if client is not None:
        from .. import distributed
        return distributed.distance_histogram(client, x, bins, range, y=y, box=box, device=device,
                                              method=method, exact=exact, images=images, **options)
    return _histogram(x, bins, range, y, box, device, method, exact, images, options)[0]


def count(queue, x, y=None, *, r, box=None, exact=True, images="nearest", wait_for=None, **options):
    """:func:`pair_count` as an op on ``queue``'s device (device arrays stay
    there): returns (result, Events by step: upload, bounds, read, layout,
    kernel, ...)."""
    return _count(x, r, y, box, queue, options.pop("method", "auto"), exact, images, options,
                  queue=queue, wait_for=wait_for)


def histogram(queue, x, y=None, *, bins=10, range=None, box=None, exact=True, images="nearest",
              wait_for=None, **options):
    """:func:`distance_histogram` as an op on ``queue``'s device: returns
    ((counts, edges), Events)."""
    return _histogram(x, bins, range, y, box, queue, options.pop("method", "auto"), exact, images,
                      options, queue=queue, wait_for=wait_for)


def shell_volumes(edges, d):
    """Volumes of the d-dimensional shells between consecutive edges."""
    e = np.asarray(edges, dtype=np.float64)
    c = math.pi ** (d / 2) / math.gamma(d / 2 + 1)
    return c * (e[1:] ** d - e[:-1] ** d)


def rdf(x, bins, range=None, *, y=None, box=None, device=None, exact=True, images="nearest", client=None,
        **options):
    """Radial distribution function g(r) of points in a periodic box.

    Normalization (as MDAnalysis ``InterRDF`` and freud: pair counts over the
    ideal-gas counts of each shell, with the density from the box volume V):

    * self (``y`` None, n points): g_i = 2 * c_i / (n (n - 1) / V * v_i)
    * cross (n_x, n_y points):     g_i = c_i / (n_x n_y / V * v_i)

    where c_i counts unordered (self) or ordered (cross) pairs in shell i and
    v_i is the shell's volume in d dimensions. ``box`` is required; ``range``
    defaults to (0, half the shortest side). Returns (g float64, edges).
    ``client``: the counts over a cluster, as in :func:`distance_histogram`.
    """
    if client is None:
        X = inputs.points(x, "x", max_dims=MAX_DIMS)
        n, d = X.n, X.d
        ny = None if y is None else inputs.points(y, "y").n
    else:
        from .. import distributed
        n, d = distributed.points_shape(x, "x")
        ny = None if y is None else distributed.points_shape(y, "y")[0]
    if box is None:
        raise ValueError("rdf needs box= (its volume gives the density)")
    b = inputs.box(box, d)
    if range is None and np.ndim(bins) == 0:
        range = (0.0, 0.5 * float(np.min(b)))
    counts, edges = distance_histogram(x, bins, range, y=y, box=b, device=device, exact=exact,
                                       images=images, client=client, **options)
    V = float(np.prod(b))
    vols = shell_volumes(edges, d)
    ideal = n * (n - 1) / V * vols / 2.0 if ny is None else n * ny / V * vols
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(ideal > 0, counts / np.where(ideal > 0, ideal, 1.0), 0.0)
    return g, edges


# --------------------------------------------------------------- framework
class TwoBody:
    """A user-defined two-body statistic (2-BS paper, section 4).

    ``distance``: the body of an OpenCL C function
    ``REAL f(const REAL a[DIMS], const REAL b[DIMS])`` returning the pair's
    value (``REAL`` is float or double per ``dtype``; ``DIMS`` is ``dims``),
    or None for the built-in Euclidean distance (which honours ``box`` and,
    for Count() and Histogram outputs, ``exact``).
    ``output``: :class:`Count`, :class:`Histogram` or :class:`Sum`.

    Calling it: ``tb(x, y=None, *, t=0.0, box=None, device=None, **options)``
    -> int (Count), (counts int64, edges) (Histogram) or float (Sum). ``t`` is
    the run-time parameter the predicate / weight expressions use (a Count()
    with no predicate counts d <= t).
    """

    def __init__(self, distance=None, output=None, dims=None, dtype=np.float32):
        output = Count() if output is None else output
        if not isinstance(output, (Count, Histogram, Sum)):
            raise TypeError("output must be Count(...), Histogram(...) or Sum(...)")
        if distance is not None and (not isinstance(distance, str) or "return" not in distance):
            raise TypeError("distance must be an OpenCL C function body with a return statement")
        if dims is not None and not 1 <= int(dims) <= MAX_DIMS:
            raise ValueError(f"dims must be 1..{MAX_DIMS}")
        if np.dtype(dtype) not in (np.float32, np.float64):
            raise TypeError("dtype must be float32 or float64")
        self.distance, self.output = distance, output
        self.dims = None if dims is None else int(dims)
        self.dtype = np.dtype(dtype)
        if isinstance(output, Histogram):     # bins/range checked now; a user distance has no default range
            inputs.histogram_edges(output.bins, output.range, None if distance is not None else (0.0, 1.0))

    def __call__(self, x, y=None, *, t=0.0, box=None, device=None, exact=True, **options):
        X = inputs.points(x, "x", dims=self.dims)
        x = X.array if X.on_device else X.array.astype(self.dtype, copy=False)
        if y is not None:
            Y = inputs.points(y, "y", dims=X.d)
            y = Y.array if Y.on_device else Y.array.astype(self.dtype, copy=False)
        if box is not None and self.distance is not None:
            raise ValueError("box applies to the built-in distance only")
        o = self.output
        tv = inputs.scalar(t, "t", nonneg=False)
        if o.kind == "count" and o.predicate is None and self.distance is None:
            return pair_count(x, inputs.scalar(t, "t"), y=y, box=box, device=device, method="allpairs",
                              exact=exact, **options)
        if o.kind == "hist" and self.distance is None:
            return distance_histogram(x, o.bins, o.range, y=y, box=box, device=device, method="allpairs",
                                      exact=exact, **options)
        call = Call(x, y, device, box=box)
        opts = options_dict(options)
        if o.kind == "count":
            stat = CountStat([0.0], True, pred_code=o.predicate or "d <= t", dist_code=self.distance, t=tv)
        elif o.kind == "sum":
            stat = SumStat(o.weight, self.distance, tv)
        else:
            stat = HistStat(inputs.histogram_edges(o.bins, o.range, None), dist_code=self.distance)
        if call.empty:
            raw = None
        else:
            raw = call.run(stat, False, opts)
        res = stat.result(raw)
        return (res, stat.edges.edges) if o.kind == "hist" else res


#: angle between unit vectors (radians); points on the unit sphere
ANGULAR_DISTANCE = ("REAL c = (REAL)0;\n"
                    "for (int k = 0; k < DIMS; ++k) c += a[k] * b[k];\n"
                    "return acos(clamp(c, (REAL)-1, (REAL)1));")


def angular_pair_count(x, theta, *, y=None, device=None, **options):
    """Pairs of unit vectors at angular separation <= theta (radians): the
    angular 2-point function's pair count, through :class:`TwoBody` (not exact)."""
    X = inputs.points(x, "x")
    th = inputs.scalar(theta, "theta")
    tb = TwoBody(distance=ANGULAR_DISTANCE, output=Count("d <= t"), dims=X.d, dtype=X.dtype)
    return tb(x, y, t=th, device=device, **options)


def kde_sum(x, bandwidth, *, y=None, device=None, **options):
    """Sum over pairs of the Gaussian kernel exp(-d^2 / (2 h^2)) (a kernel
    density sum; float accumulation in the input's precision, not exact; the
    coordinates and h are scaled together by a power of two, so neither
    overflows)."""
    h = inputs.scalar(bandwidth, "bandwidth", positive=True)
    call = Call(x, y, device)
    if call.empty:
        return 0.0
    # d / h only: coordinates and h scaled together, so neither d^2 nor h^2 overflows
    stat = SumStat("exp(-(d / t) * (d / t) / 2)", None, h, length=True)
    return stat.result(call.run(stat, False, options_dict(options)))


__all__ = ["Count", "Histogram", "Sum", "TwoBody", "pair_count", "distance_histogram", "rdf",
           "angular_pair_count", "kde_sum", "shell_volumes", "count", "histogram"]
