"""The statistics two-body kernels compute, as far as planning needs them:
each turns the points' bounds into a :class:`~.plan.Problem`'s fields, the
thresholds the kernel coordinates are scaled for, and the output stage with
its values in kernel units (thresholds, rounding bands, the exact path's
double parameters).
"""

import math

import numpy as np

from ..outputs import CountStage, HistStage, SumStage
from ..outputs.exact import (count_band, dot_form_pays, frac_band, frac_bits, frac_err, magic_eps, outward,
                             sqrt_thresholds, squared_band)

#: the magic-number binning keeps x = d * scale below 2^22 (integers in [2^23, 2^24))
MAGIC_MAX_BINS = 1 << 20


def exact_params(scaling, box, values):
    """The exact path's parameters: [xs, box * xs (D values, 0 without a box),
    values * xs...] (float64)."""
    xs = scaling.exact_scale
    b = [0.0] * scaling.dims if box is None else list(np.asarray(box, np.float64) * xs)
    return np.array([xs] + b + [float(v) * xs for v in values], np.float64)


class CountStat:
    """Pairs with d <= r (``r`` a float64 array of radii; ``scalar``: one
    radius), or a user predicate/distance over the run-time parameter ``t``."""
    out = "count"

    def __init__(self, r, scalar=True, pred_code=None, dist_code=None, t=0.0):
        self.r, self.scalar = np.asarray(r, np.float64), scalar
        self.pred_code, self.dist_code, self.t = pred_code, dist_code, t

    @property
    def builtin(self):
        return self.pred_code is None and self.dist_code is None

    def thresholds(self):
        return list(self.r) if self.builtin else []

    def fields(self, exact, real, scaling):
        if not self.builtin:
            return dict(out="count", exact=False, dist_code=self.dist_code, pred_code=self.pred_code)
        if self.scalar:
            return dict(out="count", exact=exact)
        return dict(out="hist", nbins=len(self.r), binning="search", closed="right", uniform=False,
                    exact=exact)

    def dot_ok(self, scaling, exact):
        t = (float(self.r[0]) * scaling.scale) ** 2
        return bool(exact and self.builtin and self.scalar and scaling.dims == 3 and dot_form_pays(scaling, t))

    def stage(self, scaling, problem, plan, box):
        real = np.dtype(problem.real)
        if not self.builtin:
            return CountStage(real, self.t)
        s = scaling.scale
        xp = exact_params(scaling, box, self.r) if problem.exact else None
        if self.scalar:
            t = (float(self.r[0]) * s) ** 2
            band = count_band(scaling, t, plan.form) if problem.exact else 0.0
            return CountStage(real, t, band, xp)
        t = (self.r * s) ** 2
        esq = np.concatenate([t, [np.inf]])
        bands = np.array([squared_band(scaling, x) for x in t] + [0.0]) if problem.exact else None
        return HistStage(real, len(self.r), plan.hist_mode, plan.flush, [0.0] * 6, esq, bands, xp)

    def result(self, raw):
        if not self.builtin or self.scalar:
            return int(raw or 0)
        return np.cumsum(np.asarray(raw if raw is not None else np.zeros(len(self.r)), np.int64))


class HistStat:
    """numpy.histogram of the pair distances over ``edges`` (an
    :class:`~clkernels.host.core.inputs.Edges`); ``maxd`` the largest distance
    there can be (full range: no range test); or of a user distance."""
    out = "hist"

    def __init__(self, edges, maxd=None, dist_code=None):
        self.edges, self.maxd, self.dist_code = edges, maxd, dist_code

    @property
    def builtin(self):
        return self.dist_code is None

    def thresholds(self):
        e = self.edges.edges
        return [abs(x) for x in e if x != 0] if self.dist_code is None else []

    def _magic(self, real, scaling):
        e = self.edges
        if not (self.dist_code is None and real == "float32" and e.uniform and e.lo == 0
                and e.nbins <= MAGIC_MAX_BINS):
            return False
        hi = e.hi * scaling.scale          # the bins' scale in kernel units must be a normal float32
        return 1e-30 < hi < 1e30 and 1e-30 < e.nbins / hi < 1e30

    def fields(self, exact, real, scaling):
        e = self.edges
        if self.dist_code is not None:
            return dict(out="hist", nbins=e.nbins, binning="user", uniform=e.uniform, exact=False,
                        dist_code=self.dist_code)
        if self._magic(real, scaling):
            full = self.maxd is not None and e.hi >= self.maxd
            return dict(out="hist", nbins=e.nbins, binning="magic", fullrange=full, exact=exact)
        return dict(out="hist", nbins=e.nbins, binning="search", uniform=False, exact=exact)

    def stage(self, scaling, problem, plan, box):
        real = np.dtype(problem.real)
        e = self.edges.edges
        nb = len(e) - 1
        if problem.binning == "user":
            lo, hi = float(e[0]), float(e[-1])
            sc = nb / (hi - lo) if hi > lo else 0.0
            return HistStage(real, nb, plan.hist_mode, plan.flush, [sc, 0, 0, lo, hi, -lo * sc],
                             None if self.edges.uniform else e)
        s = scaling.scale
        xp = exact_params(scaling, box, e) if problem.exact else None
        if problem.binning == "magic":
            hi = float(e[-1]) * s
            scale = nb / hi
            vals = [scale, 0.0, 0.0, 0.0, hi, 0.0]
            if plan.floor_bins(problem):            # moff: x 2^F - 1/2 rounded (hist_tally)
                f = frac_bits(nb)
                vals[1] = math.ldexp(1.0, 23 - f) - math.ldexp(1.0, -f - 1)
            if problem.exact:
                if frac_bits(nb) is not None:       # (moff, window) and (wa, wb) as lo, offs: exact.frac_band
                    vals[1], vals[2], vals[3], vals[5] = frac_band(nb, *frac_err(scaling, hi, nb, plan.sqrt_ulp))
                    xp = np.concatenate([xp, sqrt_thresholds(xp[scaling.dims + 1:])])
                else:
                    eps, all_double = magic_eps(scaling, hi / nb, plan.sqrt_ulp)
                    vals[1] = float(outward(scale * (1 - eps), real, False))
                    vals[2] = float(outward(scale * (1 + eps), real, True))
                    vals[3] = -1.5 if all_double else -0.5     # the low estimate's offset (hist_tally)
            return HistStage(real, nb, plan.hist_mode, plan.flush, vals, None, None, xp)
        es = e * s
        esq = np.sign(es) * es * es
        bands = np.array([squared_band(scaling, abs(x)) for x in esq]) if problem.exact else None
        return HistStage(real, nb, plan.hist_mode, plan.flush, [0.0] * 6, esq, bands, xp)

    def result(self, raw):
        return np.asarray(raw if raw is not None else np.zeros(self.edges.nbins), np.int64)


class SumStat:
    """A float sum of ``weight_code`` over pairs (not exact). ``length``: ``t``
    is a length (a bandwidth): coordinates and t are scaled together (the
    weight must depend on d / t only), so no scale overflows; else the weight
    sees unscaled distances."""
    out = "sum"

    def __init__(self, weight_code, dist_code=None, t=0.0, length=False):
        self.weight_code, self.dist_code, self.t, self.length = weight_code, dist_code, t, length

    @property
    def builtin(self):
        return self.length and self.dist_code is None

    def thresholds(self):
        return [self.t] if self.length else []

    def fields(self, exact, real, scaling):
        return dict(out="sum", exact=False, dist_code=self.dist_code, weight_code=self.weight_code)

    def stage(self, scaling, problem, plan, box):
        return SumStage(np.dtype(problem.real), self.t * (scaling.scale if self.length else 1.0))

    def result(self, raw):
        return float(raw or 0.0)


def images_per_dim(box, reach):
    """images='all': K per dimension such that every image within ``reach`` of
    the minimum image is among m = -K .. K."""
    return tuple(int(math.ceil((reach + 0.5 * L) / L)) for L in np.asarray(box, np.float64))
