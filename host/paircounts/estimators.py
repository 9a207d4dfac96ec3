"""Two-point correlation function estimators over binned pair counts, and the
analytic random-random counts of a periodic box.

Normalisation: each count is divided by the number of pairs it could hold:
n (n - 1) ordered auto pairs (n (n - 1) / 2 with ``ordered=False``), n_d n_r
cross pairs. Corrfunc's ``convert_3d_counts_to_cf`` scales by the ratios
n_r / n_d instead (n^2 in place of n (n - 1)); the two differ by O(1/n).
"""

import numpy as np

from ..core import inputs
from .api import check_reach, second_axis, separation_edges


def pair_totals(c, name):
    """float64 pair counts of ``c``: a paircounts structured array (npairs, or
    npairs * weightavg where any weightavg is nonzero: weighted counts), or a
    plain 1-D array of counts."""
    if isinstance(c, np.ndarray) and c.dtype.names is not None:
        if "npairs" not in c.dtype.names:
            raise ValueError(f"{name} must be a paircounts result (with an 'npairs' field) or an array of counts")
        n = c["npairs"].astype(np.float64)
        if "weightavg" in c.dtype.names and np.any(c["weightavg"] != 0):
            return n * c["weightavg"]
        return n
    try:
        a = np.asarray(c, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a paircounts result or a 1-D array of counts") from None
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite")
    return a


def _npoints(n, name):
    v = inputs.scalar(n, name, positive=True)
    return v


def _auto_pairs(n, ordered, name):
    p = n * (n - 1) if ordered else n * (n - 1) / 2
    if not p > 0:
        raise ValueError(f"{name} = {n:g} gives n (n - 1) = {n * (n - 1):g} auto pairs: it needs n > 1")
    return p


def _same_length(**arrays):
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError("the counts must have the same number of bins, got " +
                         ", ".join(f"{k}: {v}" for k, v in lengths.items()))


def xi_landy_szalay(dd, dr, rr, nd, nr, *, ordered=True):
    """Landy-Szalay xi = (DD' - 2 DR' + RR') / RR' per bin, the primes
    counts normalised by their numbers of pairs (nd (nd - 1) for DD, nd nr
    for DR, nr (nr - 1) for RR; halved with ``ordered=False`` for DD and
    RR counted once per pair). ``dd``, ``dr``, ``rr``: paircounts results or
    arrays of counts; ``dr`` counts each (data, random) pair once. Weighted
    counts use npairs * weightavg; pass nd, nr as the sums of the weights
    then. Bins where RR is 0 give NaN."""
    DD, DR, RR = (pair_totals(c, n) for c, n in ((dd, "dd"), (dr, "dr"), (rr, "rr")))
    _same_length(dd=DD, dr=DR, rr=RR)
    nd, nr = _npoints(nd, "nd"), _npoints(nr, "nr")
    a, c, b = DD / _auto_pairs(nd, ordered, "nd"), DR / (nd * nr), RR / _auto_pairs(nr, ordered, "nr")
    out = np.full(len(DD), np.nan)
    ok = RR != 0
    out[ok] = (a[ok] - 2 * c[ok] + b[ok]) / b[ok]
    return out


def xi_natural(dd, rr, nd, nr, *, ordered=True):
    """The natural estimator xi = DD' / RR' - 1 (normalised as
    :func:`xi_landy_szalay`); NaN where RR is 0."""
    DD, RR = pair_totals(dd, "dd"), pair_totals(rr, "rr")
    _same_length(dd=DD, rr=RR)
    nd, nr = _npoints(nd, "nd"), _npoints(nr, "nr")
    a, b = DD / _auto_pairs(nd, ordered, "nd"), RR / _auto_pairs(nr, ordered, "nr")
    out = np.full(len(DD), np.nan)
    ok = RR != 0
    out[ok] = a[ok] / b[ok] - 1
    return out


def ball_volume(r, d):
    """Volume of the d-ball of radius r (d >= 1)."""
    from math import gamma, pi
    return pi ** (d / 2) / gamma(d / 2 + 1) * np.asarray(r, np.float64) ** d


def rr_analytic(edges, nd, box, ordered=True, *, mode="r", pimax=None, npi=None, nmu=None):
    """Expected pair counts of nd uniform random points in the periodic
    ``box`` (side lengths; a number is a 3-D cube), binned as
    :func:`paircounts` bins them: the pairs n (n - 1) (``ordered``, else
    half) times the bin's volume over the box's.

    * ``'r'``: shells of the d-ball between edges.
    * ``'rppi'``: cylinder shells: the (d-1)-ball annulus between rp edges
      times 2 * delta pi (pi = |delta z| covers both signs).
    * ``'smu'`` (3-D only): shells times delta mu (mu is uniform on [0, 1]).

    Returns float64 counts in paircounts' row order."""
    e1 = separation_edges(edges)
    e2, _ = second_axis(mode, pimax, npi, nmu)
    n = _npoints(nd, "nd")
    if np.ndim(box) == 0:
        box = [box] * 3
    b = inputs.box(box, len(box))
    d = len(b)
    if mode != "r" and d < 2:
        raise ValueError(f"mode={mode!r} needs at least 2 dimensions")
    if mode == "smu" and d != 3:
        raise ValueError("the analytic RR in mode='smu' is for 3-D boxes (mu is uniform there)")
    check_reach(b, mode, e1, e2)
    density = (n * (n - 1) if ordered else n * (n - 1) / 2) / float(np.prod(b))   # 0 for one point
    if mode == "r":
        return density * np.diff(ball_volume(e1, d))
    if mode == "rppi":
        return density * np.outer(np.diff(ball_volume(e1, d - 1)), 2 * np.diff(e2)).ravel()
    return density * np.outer(np.diff(ball_volume(e1, 3)), np.diff(e2)).ravel()


__all__ = ["xi_landy_szalay", "xi_natural", "rr_analytic", "pair_totals", "ball_volume"]
