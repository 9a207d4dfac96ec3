"""The pair-count plan: the problem's shape (what the kernel computes) and the
launch decisions (work-group size, partner chunks), made once and frozen."""

import dataclasses
import math
import sys

import numpy as np

from ..cellgrid.bins import TABLE_AMBIG, TABLE_EDGE, TABLE_MAX, TABLE_OUT, bin_table
from ..core.launch import check_wg_size, groups, pow2_floor

TEMPLATE = "paircounts.cl.mako"
MODES = ("r", "rppi", "smu")
MAX_DIMS = 8
#: points per set: indices are uint32 on the device, with room for a tile past the end
MAX_POINTS = (1 << 31) - 1
#: work-groups to aim for (times the compute units) when anchors alone give fewer
GROUPS_PER_CU = 4
#: the fixed-point sums (ravg, weights) flush every tile of wg_size^2 pairs, at most 2^16
#: additions per bin so that a 32-bit limb sum cannot wrap (paircounts.cl.mako)
MAX_FIXED_WG = 256
#: words of one bin table (paircounts.cl.mako's TABW: bins.TABLE_MAX one-byte entries)
TABLE_WORDS = TABLE_MAX // 4
#: periodic coordinates whose differences stay below this many box lengths take their
#: image from two comparisons (rint(d / L) in {-1, 0, 1} below 1.5: half_image)
NEAR_SPAN = 1.4


@dataclasses.dataclass(frozen=True)
class Problem:
    """What the kernel computes: ``dims``, ``mode``, ``periodic`` (``triclinic``:
    the box is a cell, :mod:`.boxes`); ``auto``
    (y is x: pairs j > i); ``weighted``, ``ravg``, ``grouped`` (exclusions by
    group id); ``nb1``, ``nb2`` bins per axis (nb2 = 1 in mode 'r'); ``nx``,
    ``ny`` points."""
    dims: int
    mode: str
    periodic: bool
    auto: bool
    weighted: bool
    ravg: bool
    grouped: bool
    nb1: int
    nb2: int
    uniform1: bool
    uniform2: bool
    nx: int
    ny: int
    triclinic: bool = False
    log1: bool = False           # the first axis's edges are (nearly) geometric (log bins)
    tab1: bool = False           # the first axis's bins from a table of the value's high bits
    tab2: bool = False           # the second axis's (pi)
    near: bool = False           # periodic: every coordinate difference below NEAR_SPAN box lengths

    @property
    def nbins(self):
        return self.nb1 * self.nb2


def local_bytes(problem, wg_size):
    """Local memory of one work-group: the histogram (a count and four 32-bit
    limbs per sum), the edges and a tile."""
    p = problem
    hist = p.nbins * (4 + 16 * p.ravg + 16 * p.weighted)
    edges = 8 * (p.nb1 + 1 + (p.nb2 + 1 if p.mode != "r" else 0))
    tile = wg_size * (8 * p.dims + 8 * p.weighted + 4 * p.grouped)
    return hist + edges + tile + 4 * TABLE_WORDS * (p.tab1 + p.tab2)


@dataclasses.dataclass(frozen=True)
class Plan:
    """``wg_size``: anchors per work-group = partners per tile; ``chunk``:
    partners per work-group (a multiple of ``wg_size``, with wg_size * chunk
    < 2^32 so the 32-bit local counts cannot wrap); ``groups_x``,
    ``groups_y``: the launch grid (anchor blocks, partner chunks; gridded:
    the tables' groups, 1)."""
    wg_size: int
    chunk: int
    groups_x: int
    groups_y: int
    gridded: bool = False        # anchors and partner ranges from a grid's tables (.gridded)

    @property
    def ngroups(self):
        return self.groups_x * self.groups_y

    @staticmethod
    def default_wg(device, problem):
        """The work-group size a plan takes by default: the device's, halved
        (to 16 at least) until the local memory holds the problem."""
        wg_size = pow2_floor(device.default_wg_size())
        while wg_size > 16 and local_bytes(problem, wg_size) > device.local_mem_size:
            wg_size //= 2
        return wg_size

    @classmethod
    def resolve(cls, device, problem, wg_size=None):
        wg = int(cls.default_wg(device, problem) if wg_size is None else wg_size)
        gx = groups(problem.nx, wg)
        tiles = groups(problem.ny, wg)
        # enough work-groups to fill the device; each chunk small enough for 32-bit counts
        want = max(1, -(-GROUPS_PER_CU * device.compute_units // gx))
        least = -(-tiles * wg // ((1 << 31) // wg))
        ny_chunks = min(tiles, max(want, least, 1))
        chunk = groups(tiles, ny_chunks) * wg
        plan = cls(wg, chunk, gx, groups(problem.ny, chunk))
        plan.validate(device, problem)
        return plan

    def validate(self, device, problem):
        check_wg_size(device, self.wg_size)
        if (problem.weighted or problem.ravg) and self.wg_size > MAX_FIXED_WG:
            raise ValueError(f"wg_size {self.wg_size} exceeds {MAX_FIXED_WG} with ravg or weights (the "
                             "fixed-point sums flush every tile of wg_size^2 <= 2^16 pairs)")
        need = local_bytes(problem, self.wg_size)
        if need > device.local_mem_size:
            raise ValueError(f"{problem.nbins} bins need {need} bytes of local memory per work-group; "
                             f"{device.name} has {device.local_mem_size}: use fewer bins")
        if self.chunk % self.wg_size or self.chunk * self.wg_size >= 1 << 32:
            raise ValueError(f"chunk {self.chunk} must be a multiple of wg_size {self.wg_size} below "
                             f"2^32 / wg_size")

    def params(self, problem):
        """Template parameters of the 'paircounts' def."""
        p = problem
        return dict(dims=p.dims, mode=p.mode, periodic=p.periodic, auto=p.auto, weighted=p.weighted,
                    ravg=p.ravg, grouped=p.grouped, nb1=p.nb1, nb2=p.nb2, uniform1=p.uniform1, log1=p.log1,
                    uniform2=p.uniform2, wg_size=self.wg_size, triclinic=p.triclinic, gridded=self.gridded,
                    tab1=p.tab1, tab2=p.tab2, near=p.near, codes=(TABLE_OUT, TABLE_EDGE, TABLE_AMBIG))


def sq_thresholds(edges):
    """The first axis's edges e_0 < ... < e_nb as thresholds on squared
    separations s (float64, correctly rounded square roots): t_k (k < nb) the
    least double with sqrt(t_k) >= e_k (-inf for e_k <= 0: every s), t_nb the
    largest with sqrt(t_nb) <= e_nb (-1 for e_nb < 0: none). sqrt is
    monotonic, so e_k <= sqrt(s) iff t_k <= s and sqrt(s) <= e_nb iff s <=
    t_nb: the kernel bins s exactly as numpy.histogram bins sqrt(s)."""
    e = np.asarray(edges, np.float64)
    up, down = np.inf, -np.inf
    with np.errstate(over="ignore", invalid="ignore"):
        t = e * e                                   # within an ulp or two of each threshold
        lo, hi = t[:-1], t[-1:]
        pos, hpos = e[:-1] > 0, e[-1:] >= 0         # the others are set below
        while (m := pos & (np.sqrt(lo) < e[:-1])).any():      # least with sqrt >= e
            lo[m] = np.nextafter(lo[m], up)
        while (m := pos & (lo > 0) & (np.sqrt(np.nextafter(lo, down)) >= e[:-1])).any():
            lo[m] = np.nextafter(lo[m], down)
        while (m := hpos & (hi > 0) & (np.sqrt(hi) > e[-1:])).any():     # largest with sqrt <= e
            hi[m] = np.nextafter(hi[m], down)
        while (m := hpos & (hi < up) & (np.sqrt(np.nextafter(hi, up)) <= e[-1:])).any():
            hi[m] = np.nextafter(hi[m], up)
    t[:-1] = np.where(e[:-1] <= 0, -np.inf, lo)
    t[-1] = -1.0 if e[-1] < 0 else hi[0]
    return t


def bin_tables(mode, dims, thresholds, e2):
    """The bin tables (:func:`..cellgrid.bins.bin_table`, or None each) of the
    first axis's squared ``thresholds`` (:func:`sq_thresholds`, kernel
    units; -inf, below every s >= 0, held as 0) and of rp-pi's ``e2``: the
    kernel's decisions where a span of the value's high bits holds no
    threshold, or one. No band: the kernel's values are the double
    evaluation's."""
    t = np.where(np.isneginf(thresholds), 0.0, thresholds)
    t1 = bin_table(t, np.zeros_like(t), dims - 1 if mode == "rppi" else dims)
    t2 = bin_table(e2, np.zeros_like(e2), 2) if mode == "rppi" else None
    return t1, t2


def fit_tables(device, problem):
    """``problem`` less the bin tables (the pi axis's first) that its
    work-group's local memory would not hold at the size it takes without
    them: a table saves instructions, never a call or half a work-group."""
    bare = dataclasses.replace(problem, tab1=False, tab2=False)
    wg = Plan.default_wg(device, bare)
    for p in (problem, dataclasses.replace(problem, tab2=False)):
        if local_bytes(p, wg) <= device.local_mem_size:
            return p
    return bare


def table_words(tables):
    """(uint32 words: each table padded to TABLE_WORDS, in order; kernel
    arguments (shift of the high word, base, entries) per axis) of the
    :func:`bin_tables` that exist."""
    words, targs = [np.zeros(0, np.uint32)], []
    for t in tables:
        if t is None:
            targs += [0, 0, 1]
            continue
        w = np.zeros(TABLE_WORDS, np.uint32)
        raw = np.frombuffer(t.entries.tobytes(), np.uint32)
        w[:len(raw)] = raw
        words.append(w)
        targs += [t.shift - 32, t.base, t.n]        # the double's high word: shift >= 40 (12 bits kept)
    return np.concatenate(words), targs


def near_images(box, bnd):
    """Whether the points of :class:`~..primitives.points.Bounds` ``bnd``
    (both sets) span at most NEAR_SPAN side lengths of the orthorhombic
    ``box`` in every dimension, so that every difference's image is
    rint(d / L) in {-1, 0, 1} (:func:`half_image`); False where a span or
    limit passes float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        span, lim = bnd.hi - bnd.lo, NEAR_SPAN * np.asarray(box, np.float64)
        return bool(np.all(np.isfinite(span) & np.isfinite(lim) & (span <= lim)))


def half_image(L):
    """P, the largest double with fl(P / L) <= 1/2 (correctly rounded
    division): for |d| < 1.5 L, rint(d / L) = 1 exactly when d > P, -1 when
    d < -P (the division is odd in d), else 0 -- the kernel's minimum image
    of ``near`` coordinates, the reference's image."""
    L = np.float64(L)
    p = np.float64(0.5) * L
    while np.nextafter(p, np.inf) / L <= 0.5:
        p = np.nextafter(p, np.inf)
    while p / L > 0.5:
        p = np.nextafter(p, -np.inf)
    return float(p)


def fixed_point(bound):
    """(2^s, 2^-s), the fixed point of a per-bin sum whose values v satisfy
    |v| <= ``bound``: the largest s <= 1022 with bound * 2^s < 2^62 (s = 0 when
    bound is 0). A bound beyond float64's range counts as its largest float."""
    bound = min(abs(float(bound)), sys.float_info.max)
    s = 0 if bound == 0.0 else min(62 - math.frexp(bound)[1], 1022)    # bound < 2^e
    return math.ldexp(1.0, s), math.ldexp(1.0, -s)


def separation_scale(edges, coord_max):
    """The exponent k of the power-of-two scale 2^k the double kernel evaluates
    separations at (coordinates, edges and box times 2^k): 0 (none) unless a
    squared separation within the separation ``edges`` (arrays) could overflow
    (the largest edge at least 2^500) or the smallest positive edge's square
    come near the subnormal range (the edge below 2^-450); then the edges'
    exponents are centred on 0 (largest and smallest positive edge 2^+-500 at
    most apart from 1 where they span up to 2^1000), as far as ``coord_max``
    (the largest coordinate or box length) stays below 2^1000. Scaling by a
    power of two changes no rounding of a difference, square, sum or
    comparison that neither overflows nor underflows, so the bins are the
    float64 evaluation's with the exponent range widened (as the two-body
    kernels' scaling). Positive edges whose squares no power of two keeps
    both within double's normal range (a span past about 2^1021) raise
    ValueError (past 2^1024 the largest square overflowed and its bins
    silently lost their pairs)."""
    e = np.abs(np.concatenate([np.asarray(a, np.float64).ravel() for a in edges]))
    pos = e[e > 0]
    if not pos.size:
        return 0
    top, low = float(pos.max()), float(pos.min())
    if top < 2.0 ** 500 and low >= 2.0 ** -450:
        return 0
    et, el = math.frexp(top)[1], math.frexp(low)[1]
    k = -((et + el) // 2)
    if et + k > 511 or el - 1 + k < -511:       # a square past 2^1022 or below 2^-1022 whatever the scale
        raise ValueError(f"the positive separation edges span {top:g} / {low:g}, about 2^{et - el}: their "
                         "squares cannot share double's normal range (the kernel compares squared "
                         "separations); use 0, or an edge within 2^1020 of the last, for the first")
    if coord_max > 0:
        k = min(k, 1000 - math.frexp(coord_max)[1])
    return max(-1000, min(k, 1000))                # 2^k a double


def nearly_uniform(edges):
    """Whether consecutive widths agree to a relative 1e-6 (then a bin's index
    from the width is off by at most one before the check against the edges)."""
    if edges is None:
        return False
    w = np.diff(edges)
    return bool(np.all(np.abs(w - w.mean()) <= 1e-6 * w.mean()))


def nearly_geometric(edges):
    """Whether positive edges have consecutive ratios agreeing to a relative
    1e-3 in their logarithms (log bins: then a bin's index from the logarithm
    is off by at most one before the exact check)."""
    if edges is None or len(edges) < 3 or not edges[0] > 0 or not np.all(np.isfinite(edges)):
        return False
    r = np.diff(np.log(edges))
    return bool(np.all(np.abs(r - r.mean()) <= 1e-3 * r.mean()))


def float_guess(edges):
    """Whether the kernel's float32 bin guesses stay meaningful for the first
    axis's edges (their squares and the guess's scale in float32's range: |e|
    within [1e-18, 1e18], zero allowed); else it searches the thresholds."""
    a = np.abs(np.asarray(edges, np.float64))
    return bool(np.all((a == 0) | ((a >= 1e-18) & (a <= 1e18))))


__all__ = ["bin_tables", "fit_tables", "table_words", "near_images", "half_image", "NEAR_SPAN", "TABLE_WORDS", "separation_scale", "nearly_uniform", "nearly_geometric", "float_guess", "fixed_point", "sq_thresholds", "TEMPLATE", "MODES",
           "MAX_DIMS", "MAX_POINTS", "MAX_FIXED_WG", "Problem", "Plan", "local_bytes"]
