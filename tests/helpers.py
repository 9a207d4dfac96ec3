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
