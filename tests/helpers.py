"""References and rules shared by every family's tests.

Distances are the float64 evaluation the library promises (scipy's
pdist/cdist order): d = sqrt(sum_k (x_ik - y_jk)^2), each operation rounded
in double, summed over k in order, with the minimum image
dx -= L * round(dx / L) in a periodic box. Counts use d <= r (scipy, sklearn),
histograms numpy.histogram. Comparisons with the library are exact.
"""

import numpy as np


def distances(X, Y=None, box=None, images=None):
    """float64 distances: condensed i < j (self) or all (i, j) (cross), in the
    library's evaluation order. ``images``: K per dimension -> every image
    m in [-K, K]^d of every pair (self: i < j), flattened."""
    X = np.asarray(X, np.float64)
    Yv = X if Y is None else np.asarray(Y, np.float64)
    d = X.shape[1]
    base = [X[:, None, k] - Yv[None, :, k] for k in range(d)]
    if box is not None:
        box = np.broadcast_to(np.asarray(box, np.float64), (d,))
        base = [dk - box[k] * np.round(dk / box[k]) for k, dk in enumerate(base)]
    shifts = [np.zeros(d, int)]
    if images is not None:
        grids = np.meshgrid(*[np.arange(-K, K + 1) for K in images], indexing="ij")
        shifts = np.stack([g.ravel() for g in grids], axis=1)
    out = []
    for m in shifts:
        s = np.zeros(base[0].shape)
        for k in range(d):
            dk = base[k] if not m[k] else base[k] + m[k] * box[k]
            s = s + dk * dk
        D = np.sqrt(s)
        out.append(D[np.triu_indices(len(X), 1)] if Y is None else D.ravel())
    return np.concatenate(out)


def count(d, r):
    return int((np.asarray(d) <= r).sum())


def histogram(d, edges):
    return np.histogram(np.asarray(d, np.float64), np.asarray(edges, np.float64))[0].astype(np.int64)


def uniform(rng, n, d, dtype=np.float32):
    return rng.random((n, d)).astype(dtype)


def clustered(rng, n, d, dtype=np.float32):
    centers = rng.random((4, d))
    pts = centers[rng.integers(0, 4, n)] + 0.03 * rng.standard_normal((n, d))
    return pts.astype(dtype)


def lattice(n_side, d, spacing=1.0, dtype=np.float32):
    """Integer lattice points: every distance is a tie-dense sqrt of an integer."""
    g = np.meshgrid(*[np.arange(n_side)] * d, indexing="ij")
    return (np.stack([x.ravel() for x in g], axis=1) * spacing).astype(dtype)


# ---------------------------------------------------------------- exactness (issue 12)

def pow2_scale(*arrays):
    """A power of two s that brings the largest magnitude among ``arrays``
    (None skipped) to [0.5, 1): float64 coordinates times s give the same
    rounded differences, squares and sums as the unscaled ones would with an
    unbounded exponent (no overflow near 1e308, no underflow near 1e-308),
    so ``distances(X * s) / s`` is the float64 evaluation at any scale
    (while the scaled squares stay normal: distances above ~1e-150 of the
    largest coordinate)."""
    m = 0.0
    for a in arrays:
        if a is not None and np.size(a):
            m = max(m, float(np.max(np.abs(np.asarray(a, np.float64)))))
    return 1.0 if m == 0 else float(np.ldexp(1.0, -np.frexp(m)[1]))


def scaled_distances(X, Y=None, box=None, images=None):
    """(distances * s, s): :func:`distances` of the inputs (and box) scaled by
    ``s = pow2_scale(X, Y, box)``; compare with thresholds times s (exact)."""
    s = pow2_scale(X, Y, box)
    Xs = np.asarray(X, np.float64) * s
    Ys = None if Y is None else np.asarray(Y, np.float64) * s
    bs = None if box is None else np.asarray(box, np.float64) * s
    return distances(Xs, Ys, bs, images), s


def cumulative(d, radii):
    """Cumulative counts of d <= r for each radius (cKDTree.count_neighbors)."""
    return np.searchsorted(np.sort(np.asarray(d, np.float64)), np.asarray(radii, np.float64),
                           side="right").astype(np.int64)


def images_for(box, reach):
    """K per dimension so that every image within ``reach`` is among m = -K..K
    (a minimum image has |dx| <= L/2; one more for margin)."""
    return [int(np.ceil(reach / L)) + 1 for L in np.asarray(box, np.float64)]


def ties(d, k, rng, lo=0.0, hi=np.inf):
    """k distinct distances taken from the reference ``d`` (each an exact tie
    for some pair), within (lo, hi], sorted."""
    u = np.unique(np.asarray(d, np.float64))
    u = u[(u > lo) & (u <= hi)]
    if len(u) <= k:
        return u
    return np.sort(rng.choice(u, k, replace=False))


def unwrap(rng, X, box, lo=1e3, hi=1e5):
    """X shifted by whole box lengths, |k| in [lo, hi] per coordinate (random
    signs), in X's dtype: unwrapped periodic coordinates."""
    X = np.asarray(X)
    k = np.round(rng.uniform(lo, hi, X.shape)) * rng.choice([-1.0, 1.0], X.shape)
    return (X.astype(np.float64) + k * np.asarray(box, np.float64)).astype(X.dtype)


def water(rng, n_side=4, dtype=np.float32, spacing=3.104):
    """A real-like liquid water configuration (Angstrom): n_side^3 rigid
    TIP3P-geometry molecules (O-H 0.9572, H-O-H 104.52 degrees), randomly
    oriented on a jittered grid at ~1 g/cm^3, molecules whole (hydrogens may
    stick out of the box). Returns (O, H, box) with H two per molecule."""
    n = n_side ** 3
    L = n_side * spacing
    g = np.stack(np.meshgrid(*[np.arange(n_side)] * 3, indexing="ij"), -1).reshape(-1, 3)
    O = (g + 0.5 + 0.15 * rng.standard_normal((n, 3))) * spacing
    O = np.mod(O, L)
    half = np.deg2rad(104.52) / 2
    body = 0.9572 * np.array([[np.sin(half), np.cos(half), 0.0], [-np.sin(half), np.cos(half), 0.0]])
    H = np.empty((n, 2, 3))
    for i in range(n):
        q, r = np.linalg.qr(rng.standard_normal((3, 3)))
        q = q * np.sign(np.diag(r))
        H[i] = O[i] + body @ q.T
    return O.astype(dtype), H.reshape(-1, 3).astype(dtype), np.full(3, L)


def between(d, k, rng, lo=0.0, hi=np.inf, rel=1e-4):
    """Up to k thresholds in (lo, hi], each the midpoint of a gap between
    consecutive reference distances wider than ``rel`` of it (no pair within
    rel of the threshold: no tie, no rounding band), sorted."""
    u = np.unique(np.asarray(d, np.float64))
    if len(u) < 2:
        return u[:0]
    m = 0.5 * (u[1:] + u[:-1])
    ok = (u[1:] - u[:-1] > 2 * rel * m) & (m > lo) & (m <= hi)
    m = m[ok]
    if len(m) <= k:
        return m
    return np.sort(rng.choice(m, k, replace=False))
