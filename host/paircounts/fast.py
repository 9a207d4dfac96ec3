"""float32 separations for the pair counts (``paircounts.cl.mako``'s ``fast``):
the kernel coordinates, each axis's thresholds with their proven bands, and the
bin tables.

A pair's separations come from float32 kernel coordinates
(:func:`..outputs.exact.choose_scaling`: wrapped into the box, scaled by a
power of two, each coordinate's rounding bounded by ``coord_err``; the
minimum image ``min(|a - b|, L - |a - b|)`` rounds ``|a - b|`` once more, at
most ``u L``, which is added to it). On the first axis the kernel forms
``s``, the sum of the squared differences over its axes (all of them, or the
first d - 1 for rp), on the second (rp-pi) ``pi = |d_last|``:

* ``|s_f - s| <= squared_band(t)`` near a squared threshold ``t``
  (:mod:`..outputs.exact`), and the threshold itself rounds to float32 by at
  most ``u t``;
* ``|pi_f - pi| <= 1.25 (u pi + 2 e)`` (one difference: its rounding and the
  coordinates' errors), plus ``u p`` for the edge ``p``'s rounding;

both also cover the float64 evaluation's own error (``coord_err`` holds the
double reference's rounding of unwrapped periodic differences). A value
outside the bands of the thresholds below and above it lies on the same side
of every threshold as the float64 evaluation (the bounds grow more slowly
than the values while the coordinates' error stays below a 2^-10 of the
smallest positive edge, which :func:`make` requires): the kernel bins such a
pair from the float value and evaluates the others in double, so the bins
are the double evaluation's.
"""

import dataclasses
import math

import numpy as np

from ..cellgrid import bins
from ..cellgrid.api import FLOAT32_COORD_RATIO, FLOAT32_MAGNITUDES
from ..outputs.exact import MARGIN, UNIT, choose_scaling, outward, representable, squared_band
from .plan import TABLE_WORDS, sq_thresholds

F32 = np.dtype(np.float32)
#: the fast path on (tests turn it off to compare with the double kernel)
ENABLED = True


@dataclasses.dataclass(frozen=True)
class Stage:
    """The float32 stage of one call: ``scaling`` (kernel coordinates),
    ``params`` (float32: the first axis's thresholds q1 and bands w1, the
    second's q2 and w2 in mode 'rppi', the box in kernel units when
    periodic, the first axis's guess origin and scale, the second's scale),
    ``tables`` (uint32 words: the first axis's table, then the second's, each
    TABLE_WORDS long; one word when neither), ``targs`` (shift, base, entries
    of each table) and the kernel's shape: ``tab1``, ``tab2``, ``guess1``."""
    scaling: object
    params: np.ndarray
    tables: np.ndarray
    targs: tuple
    tab1: bool
    tab2: bool
    guess1: str


def pi_band(sc, p):
    """Bound on ``|pi_f - pi|`` for pi near ``p`` (kernel units), the edge's own
    rounding to float32 included."""
    u = sc.u
    return MARGIN * (u * p + 2 * sc.coord_err) + u * p + 4 * sc.tiny


def _f32(values, up):
    return np.array([outward(float(v), F32, up) for v in values], np.float32)


def _no_overlap(q, w):
    """Every band clear of its neighbours' (the kernel tests only the edges next to a value)."""
    q, w = q.astype(np.float64), w.astype(np.float64)
    return bool(np.all(q[:-1] + w[:-1] < q[1:] - w[1:]))


def _table(q, w, d):
    t = bins.bin_table(q, w, d)
    if t is None:
        return None, np.zeros(0, np.uint32), (0, 0, 1)
    words = np.zeros(TABLE_WORDS, np.uint32)
    raw = np.frombuffer(t.entries.tobytes(), np.uint32)
    words[:len(raw)] = raw
    return t, words, (t.shift, t.base, t.n)


def make(dims, mode, box, bnd, e1, e2):
    """The :class:`Stage` for points with :class:`~..primitives.points.Bounds`
    ``bnd`` (both sets), float64 ``e1`` (first axis) and ``e2`` (pi, mode
    'rppi') edges and an orthorhombic ``box`` (side lengths) or None; None
    where float32 cannot hold the problem well (thresholds or coordinates
    outside its comfortable range, the coordinates' rounding above 2^-10 of
    the smallest positive edge, bands that meet): the double kernel then."""
    if not ENABLED or mode not in ("r", "rppi") or bnd is None:
        return None
    two = mode == "rppi"
    edges = np.concatenate([e1] + ([e2] if two else []))
    pos = [float(t) for t in edges if t > 0]
    if not pos:
        return None
    mag = max(pos + [bnd.maxabs] + ([] if box is None else [float(np.max(box))]))
    if not (FLOAT32_MAGNITUDES[0] <= min(pos) and mag <= FLOAT32_MAGNITUDES[1]) or \
            not representable(F32, bnd, box, pos):
        return None
    sc = choose_scaling(F32, dims, bnd, box=box, thresholds=pos, orig=np.float64)
    u = UNIT[F32]
    if box is not None:
        sc = dataclasses.replace(sc, coord_err=sc.coord_err + u * float(np.max(box)) * sc.scale)
    if sc.coord_err > FLOAT32_COORD_RATIO * min(pos) * sc.scale:
        return None
    s = sc.scale
    nr = dims - 1 if two else dims
    sr = dataclasses.replace(sc, dims=nr)
    t = sq_thresholds(e1 * s)
    zero1 = e1 <= 0
    t = np.where(zero1, 0.0, t)
    q1 = np.where(zero1, np.float32(-1.0), t.astype(np.float32))     # every s >= 0 reaches an edge at 0
    w1 = np.where(zero1, np.float32(0.0), _f32([squared_band(sr, v) + u * v for v in t], True))
    params = [q1, w1]
    checks = [(q1, w1)]
    if two:
        p = e2 * s
        q2 = np.where(e2 <= 0, np.float32(-1.0), p.astype(np.float32))
        w2 = np.where(e2 <= 0, np.float32(0.0),
                      _f32([pi_band(sc, v) for v in p], True))
        params += [q2, w2]
        checks.append((q2, w2))
    if not all(_no_overlap(q, w) for q, w in checks):
        return None
    if box is not None:
        params.append(np.asarray(box, np.float64) * s)
    kind, glo, gsc = bins.bin_guess(np.maximum(q1, np.float32(0)))
    params.append([glo, gsc, (len(e2) - 1) / float(q2[-1]) if two else 0.0])
    t1, words1, a1 = _table(q1, w1, nr)
    t2, words2, a2 = (None, np.zeros(0, np.uint32), (0, 0, 1)) if not two else _table(q2, w2, 2)
    words = np.concatenate([words1, words2]) if (t1 is not None or t2 is not None) else np.zeros(1, np.uint32)
    fpar = np.concatenate([np.asarray(a, np.float64).ravel() for a in params]).astype(np.float32)
    assert math.isfinite(float(np.abs(fpar).max()))
    return Stage(sc, fpar, words, a1 + a2, t1 is not None, t2 is not None, kind)


__all__ = ["Stage", "make", "pi_band", "ENABLED"]
