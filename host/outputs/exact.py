"""Exact pair statistics: kernel coordinates that neither overflow nor
underflow, and the proven rounding bands inside which a pair is decided in
double from the original coordinates (``outputs.cl.mako``).

Kernel coordinates are ``a = (wrap(x) - shift) * scale`` in the input's
precision (``scale`` a power of two: exact; ``wrap`` into a periodic box and a
``shift`` round, which :attr:`Scaling.coord_err` bounds). A kernel computes a
squared distance ``v`` of a pair from them with ordinary rounding; the bands
below bound ``|v - d^2|`` (``d`` the pair's true distance, kernel units), so a
pair whose ``v`` lies outside the band of every threshold is on the same side
of each threshold as its exact distance, and as its float64 evaluation
(whose own error, ~1e-16 relative, is far inside the band). The bound, with
``u`` the unit roundoff (2^-24 float32, 2^-53 float64), ``D`` dimensions, ``e``
the coordinate error and ``tiny`` the smallest subnormal:

* each difference ``delta_k = a_k - b_k`` (or the minimum image, computed so
  that only the last subtraction rounds) carries ``u |delta_k| + 2 e``;
* the sum of D squares (any order, fused or not) adds ``(D + 1) u`` relative;
* together ``|v - d^2| <= (2D + 4) u d^2 + 4 sqrt(D) e d + 4D e^2 + 16 D tiny``;
* a count folds the threshold into the sum (``v = sum - t``): errors relative
  to ``d^2 + t ~ 2t`` near the threshold, plus ``t``'s own rounding;
* the ``dot`` form ``|a|^2 + |b|^2 - 2 a.b`` of centred coordinates within
  ``R`` of the centre: ``(2D + 6) u (t + 4 R^2)`` instead;
* histograms with the magic-number binning bound ``x = d * scale`` relatively:
  half the squared-distance bound, the square root's measured ulp error
  (``Device.fast_sqrt``) and its flush of subnormal inputs to 0 (less than
  ``sqrt(smallest normal)`` absolute), the roundings of ``scale`` and of the binning
  itself; in the two-scale form (``s (1 -+ eps)``, past 2^15 - 3 bins) the
  coordinate error enters relative to the first positive edge (and every pair
  is decided in double where it reaches an eighth of that edge:
  ``MAGIC_ABS_LIMIT``); up to 2^15 - 3
  bins the band is a window of x's fraction bits (:func:`frac_band`: one FFMA
  gives the bin and the test) and the coordinate error enters as itself, in
  bins (:func:`frac_err`).

Every bound is multiplied by 1.25 (margin). The band is what is decided in
double, never what is counted: a wider band costs time, not correctness.
"""

import dataclasses
import math

import numpy as np

UNIT = {np.dtype(np.float32): 2.0 ** -24, np.dtype(np.float64): 2.0 ** -53}
TINY = {np.dtype(np.float32): 2.0 ** -149, np.dtype(np.float64): 2.0 ** -1074}
#: the smallest normal numbers: a fast square root may flush a subnormal input to 0,
#: off by less than sqrt(NORMAL) (Device.fast_sqrt)
NORMAL = {np.dtype(np.float32): 2.0 ** -126, np.dtype(np.float64): 2.0 ** -1022}
#: kernel coordinates stay below 2^HI (squares of differences of D of them cannot
#: overflow); the smallest threshold stays above 2^LO (its square and its band are normal)
RANGE = {np.dtype(np.float32): (60, -40), np.dtype(np.float64): (500, -400)}
MARGIN = 1.25


@dataclasses.dataclass(frozen=True)
class Scaling:
    """Kernel coordinates ``a = (wrap(x) - shift) * scale``; ``coord_err``
    bounds ``|a - (wrap(x) - shift) * scale|`` (kernel units); the double exact
    path multiplies the original coordinates by ``exact_scale``."""
    real: np.dtype
    dims: int
    scale: float
    shift: tuple = None
    coord_err: float = 0.0
    exact_scale: float = 1.0
    radius: float = 0.0          # largest |a| (kernel units): the dot form's R

    @property
    def u(self):
        return UNIT[self.real]

    @property
    def tiny(self):
        return TINY[self.real]

    @property
    def normal(self):
        return NORMAL[self.real]


def _exp2_ceil(x):
    return math.frexp(x)[1] if x > 0 else -10 ** 6     # 2^(e-1) <= x < 2^e


def choose_scaling(real, dims, bounds, *, box=None, thresholds=(), center=False, orig=None):
    """The :class:`Scaling` for points with :class:`~..primitives.points.Bounds`
    ``bounds`` (None: no points), a periodic ``box`` (side lengths) and the
    positive ``thresholds`` (distances: r, bin edges) the kernel compares with.
    ``center``: shift by the bounding box's centre (the ``dot`` form).
    ``orig``: the points' own dtype when the kernel holds them in a coarser
    ``real`` (float64 points in float32 kernels: each kernel coordinate
    rounds once more, which ``coord_err`` then covers)."""
    real = np.dtype(real)
    u, tiny = UNIT[real], TINY[real]
    hi_e, lo_e = RANGE[real]
    pos = [float(t) for t in thresholds if t > 0 and math.isfinite(t)]
    if not pos and bounds is not None:
        # no positive threshold (r = 0): distinct points must keep a non-zero
        # squared distance, so the smallest positive extent sets the lower bound
        pos = [float(e) for e in bounds.extent if e > 0]
    if box is not None:
        mag = float(np.max(box))
    elif bounds is None:
        mag = 0.0
    elif center:
        mag = 0.5 * float(np.max(bounds.extent))
    else:
        mag = bounds.maxabs
    big = max([mag] + pos)
    kmax = hi_e - _exp2_ceil(big) if big > 0 else 0
    kmin = (lo_e - _exp2_ceil(min(pos)) + 1) if pos else -10 ** 6
    if kmin <= 0 <= kmax:
        k = 0
    elif kmin > kmax:
        k = kmax                 # the dynamic range exceeds the format: avoid overflow
    elif kmin > 0:
        k = kmin
    else:
        k = kmax
    scale = math.ldexp(1.0, k)
    err = 0.0
    shift = None
    u64 = UNIT[np.dtype(np.float64)]
    if box is not None:
        maxabs = 0.0 if bounds is None else bounds.maxabs
        # the float64 reference rounds x_i - x_j relative to the raw difference
        # (up to L + |x|), before the minimum image: an absolute error
        err += 4 * u64 * (mag + maxabs) * scale
        # the kernel shifts by L rounded to its precision (u L / 2 absolute per shift)
        err += u * mag * scale
        if bounds is not None and ((bounds.lo < 0).any() or (bounds.hi >= box).any()):
            # wrapped into [0, L): in double (error u64 |x|), then rounded to the kernel's precision
            err += (u * mag + 2 * u64 * maxabs) * scale
    if center and bounds is not None:
        shift = tuple(float(c) for c in 0.5 * (bounds.lo + bounds.hi))
        err += u * mag * scale
    if orig is not None and UNIT[np.dtype(orig)] < u:
        # every coordinate (wrapped and shifted in double) rounds to the kernel's format
        err += u * max(mag, 0.0 if bounds is None else bounds.maxabs) * scale
    if k < 0:
        err += tiny              # coordinates scaled below the normal range round to subnormals
    radius = mag * scale * math.sqrt(dims) * (1 + 4 * u) + err
    # float64 points are decided in double at the kernel's scale (a power of two: exact), so
    # squares of points near the ends of float64's range neither overflow nor underflow
    wide = real == np.float64 or (orig is not None and np.dtype(orig) == np.float64)
    return Scaling(real, dims, scale, shift, err, scale if wide else 1.0, radius)


def representable(real, bounds, box=None, thresholds=()):
    """Whether one power-of-two scale fits both the coordinates and every
    positive threshold into the format's comfortable range (else squared
    thresholds or coordinates leave the normal range and only the exact path
    is right)."""
    real = np.dtype(real)
    hi_e, lo_e = RANGE[real]
    pos = [float(t) for t in thresholds if t > 0 and math.isfinite(t)]
    mag = float(np.max(box)) if box is not None else (0.0 if bounds is None else bounds.maxabs)
    big = max([mag] + pos)
    if not pos or big <= 0:
        return True
    return (hi_e - _exp2_ceil(big)) >= (lo_e - _exp2_ceil(min(pos)) + 1)


def _coord_terms(sc, t):
    D, e = sc.dims, sc.coord_err
    return 4 * math.sqrt(D) * e * math.sqrt(max(t, 0.0)) + 4 * D * e * e + 16 * D * sc.tiny


def squared_band(sc, t):
    """Bound on ``|v - d^2|`` for pairs with ``d^2`` near ``t`` (kernel units),
    ``v`` computed as a sum of squared differences (histogram searches)."""
    D, u = sc.dims, sc.u
    return MARGIN * ((2 * D + 6) * u * t + _coord_terms(sc, t))


def count_band(sc, t, form="diff"):
    """The band of ``v = sum - t`` (the count kernels fold the threshold in)."""
    D, u = sc.dims, sc.u
    if form == "dot":
        R = sc.radius
        core = (2 * D + 8) * u * (t + 4 * R * R) + 8 * math.sqrt(D) * sc.coord_err * (R + math.sqrt(t))
    else:
        core = (4 * D + 14) * u * t
    return MARGIN * (core + _coord_terms(sc, t))


def dot_form_pays(sc, t):
    """The dot form's band grows with R^2 instead of t: worth it while it stays
    within 1e-4 of t (candidates stay rare)."""
    return t > 0 and count_band(sc, t, "dot") <= 1e-4 * t


#: the two-scale form decides every pair in double when the absolute error reaches
#: this fraction of the first edge: a relative band (x (1 -+ eps)) misses the absolute
#: error of small x -- a square that underflowed or a root that flushed gives x = 0
MAGIC_ABS_LIMIT = 0.125


def _root_abs(sc):
    """Absolute error of the kernel's distance d (kernel units): the
    coordinates' (``2 sqrt(D) e``), subnormal squares' and a flushed
    subnormal square's root (``sqrt(smallest normal)``)."""
    return 2 * math.sqrt(sc.dims) * sc.coord_err + math.sqrt(16 * sc.dims * sc.tiny) + math.sqrt(sc.normal)


def magic_eps(sc, first_edge, sqrt_ulp):
    """(eps, all_double): the relative band of ``x = d * scale`` for the
    magic-number binning's two-scale form (float32), ``first_edge`` the
    smallest positive edge (kernel units); the absolute error enters relative
    to it, which holds for x near or above the first edge; ``all_double``
    when that absolute error reaches :data:`MAGIC_ABS_LIMIT` of it (the
    coordinates and edges cannot share the format: every pair in double)."""
    D, u = sc.dims, sc.u
    rel = 0.5 * (2 * D + 4) * u + 2 * sqrt_ulp * u + 6 * u
    absolute = _root_abs(sc)
    if first_edge > 0:
        rel += absolute / first_edge
    return MARGIN * rel, not first_edge > 0 or MARGIN * absolute >= MAGIC_ABS_LIMIT * first_edge


#: the fraction-bit form of the exact magic binning: at least this many bits a bin
FRAC_MIN_BITS = 8


def frac_bits(nbins):
    """F, the fraction bits of ``x = d * scale`` that the exact magic binning
    keeps (float32): ``fma(d, scale, moff)`` stays in the binade [2^(23-F),
    2^(24-F)), whose spacing is 2^-F, for every x up to nbins + 1 (with the
    window's bias, at most 2^-4); None when a bin would get fewer than
    2^FRAC_MIN_BITS steps (the kernels keep the two-scale band test then)."""
    f = 23 - math.ceil(math.log2(nbins + 3))
    return f if f >= FRAC_MIN_BITS else None


def frac_err(sc, hi, nbins, sqrt_ulp):
    """(a, b): ``|x - x_true| <= a (k + 1) + b`` (in bins) for the fraction-bit
    binning of a pair near edge k, ``hi`` the last edge (kernel units): ``a``
    the relative part (half the squared-distance bound, the square root's
    measured ulp error, scale's one rounding to float32; the product inside
    the fma is exact and its rounding :func:`frac_band` adds), ``b`` the
    coordinates' absolute error in bins: the kernel's difference vector is
    within ``u |delta| + 2 e`` of the true one in each of D components, so its
    length within ``u d + 2 sqrt(D) e`` (the triangle inequality), plus the
    root of a flushed subnormal square (``sqrt(smallest normal)``), times the
    bins' scale."""
    D, u = sc.dims, sc.u
    rel = 0.5 * (2 * D + 4) * u + 2 * sqrt_ulp * u + u
    return MARGIN * rel, MARGIN * _root_abs(sc) * nbins / hi


def frac_band(nbins, a, b):
    """(moff, window, wa, wb) of the fraction-bit exact binning for the error
    bound (a, b) of :func:`frac_err`. The kernel takes ``yi = as_uint(fma(d,
    scale, moff))`` and adds every pair to its fast slot ``yi >> F`` less the
    binade's base. With ``moff = 2^(23-F) + W 2^-F`` the rounded ``R ~ x 2^F``
    (|R - x 2^F| <= 1/2) gives ``yi = base + W + R``: a pair outside the window
    (``yi & (2^F - 1) >= window``) has R at least W + 1 from every multiple of
    2^F, so x lies at least (W + 1/2) 2^-F from every edge, and its true value
    on the same side of each when W + 1/2 > delta 2^F, delta = a (nbins + 1) +
    b (W the smallest such). A pair inside it has its fast slot k, the
    nearest edge, and f = R - k 2^F within W of 0; at edge k the bound is
    delta_k = a (k + 1) + b, so when |f| > delta_k 2^F + 1/2 (the kernel:
    ``|f| > k wa + wb``) x and its true value lie on one side of edge k (bin
    k for f > 0, k - 1 below), else its bin (k - 1 or k) is decided in
    double. A window wider than an eighth of a bin: W = 0 and window 2^F + 1,
    which the kernel reads as 'every pair searched among all the edges in
    double' (exact, only slow)."""
    f = frac_bits(nbins)
    delta = a * (nbins + 1) + b
    w = math.floor(delta * 2.0 ** f - 0.5) + 1
    if 2 * w + 1 > 2 ** (f - 3):
        return math.ldexp(1.0, 23 - f), 2 ** f + 1, 0.0, 0.0
    # wa, wb outward, with room for the kernel's float fma (values below 2^(f-4) + 2)
    wa = a * 2.0 ** f * (1 + 1e-6)
    wb = (a + b) * 2.0 ** f * (1 + 1e-6) + 0.5 + 1e-3
    return math.ldexp(1.0, 23 - f) + math.ldexp(w, -f), 2 * w + 1, wa, wb


def sqrt_thresholds(edges):
    """T[k] (k < nb): the smallest double s >= 0 whose correctly rounded
    square root is at least edges[k], and T[nb]: the smallest whose root
    exceeds edges[nb] (float64 arrays; edges >= 0; inf past sqrt(DBL_MAX)). As the
    square root is monotone, ``fl(sqrt(s)) >= e_k`` exactly when ``s >=
    T[k]``: a bin of numpy's rule from a float64 squared distance, without
    its root."""
    e = np.asarray(edges, np.float64).copy()
    e[-1] = np.nextafter(e[-1], np.inf)         # the closed last edge: the first root above it
    with np.errstate(over="ignore"):
        t = e * e           # edges past sqrt(DBL_MAX): inf, which no finite square reaches
    for _ in range(64):
        up = np.sqrt(t) < e
        down = (t > 0) & (np.sqrt(np.nextafter(t, 0.0)) >= e)
        if not (up.any() or down.any()):
            return t
        t = np.where(up, np.nextafter(t, np.inf), np.where(down, np.nextafter(t, 0.0), t))
    raise AssertionError("sqrt_thresholds did not settle")


def outward(value, real, up):
    """``value`` rounded to ``real`` away from the centre of the band (up or down)."""
    v = np.array(value, dtype=real)
    if up and float(v) < value:
        v = np.nextafter(v, real.type(np.inf))
    if not up and float(v) > value:
        v = np.nextafter(v, real.type(-np.inf))
    return real.type(v)
