"""Clustered periodic catalog benchmark: `python examples/bench.py clustered [--quick] [--variants check]`.

A galaxy-like mock of the real catalog of the exact two-body issue: 1.24M
points in a periodic box of side 420, clustered by a halo model (30% field
points, 70% in halos whose occupations follow a power law and whose members
concentrate towards the centre), and the statistic survey codes compute on
it: auto pairs in 14 log-spaced bins from 0.17 to 23.9 (``distance_histogram``
with those edges and ``box=420``; exact: equal to a float64 evaluation).
--quick: 60,000 points in a box of side 420 * (60000 / 1.24M)^(1/3) (the
same density). --size overrides n (the box scales with it).

Rows: the library's call from numpy (the planner's choice of method), its
kernels by events, and the same from a device array; Corrfunc 2.5.3 (float64,
every core; it counts each auto pair twice, so its counts are halved) beside
it when it is installed, with its counts compared. ``--variants check`` adds
a float64 scipy ``cKDTree.count_neighbors`` reference (slow: minutes at full
size on one core) and compares every bin.
"""

import math
import os

import numpy as np
import pyopencl.array as cla

import clkernels
from benchlib import median_call, median_wall, row
from clkernels.host import twobody as tb
from clkernels.host.core import timing

N_FULL = 1_240_000
L_FULL = 420.0
EDGES = np.geomspace(0.17, 23.9, 15)


def clustered_mock(n, box, seed=0):
    """(n, 3) float64 points in [0, box): a halo model. 30% uniform field
    points; the rest in halos with Pareto(1.2) occupations (at least 2) whose
    members lie at radius R * u^2 (u uniform; R = 0.35 * occupation^(1/3),
    at most 6) around a uniform centre, wrapped into the box."""
    rng = np.random.default_rng(seed)
    n_field = int(0.3 * n)
    left = n - n_field
    occ = np.minimum(2 + rng.pareto(1.2, max(left // 2, 1)) * 3, 5000).astype(np.int64)
    occ = occ[:int(np.searchsorted(np.cumsum(occ), left)) + 1]
    occ[-1] -= int(occ.sum()) - left           # the last halo takes what is left
    centres = rng.random((occ.size, 3)) * box
    radius = np.minimum(0.35 * np.cbrt(occ), 6.0)
    member = np.repeat(np.arange(occ.size), occ)
    u = rng.random(member.size)
    direction = rng.normal(size=(member.size, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    pts = centres[member] + direction * (radius[member] * u * u)[:, None]
    pts = np.concatenate([pts, rng.random((n_field, 3)) * box])
    pts = np.mod(pts, box)
    pts[pts >= box] = 0.0                      # mod can round up to box itself
    return pts[rng.permutation(n)]


def _corrfunc_counts(x, box, threads):
    from Corrfunc.theory.DD import DD
    res = DD(1, threads, EDGES, x[:, 0], x[:, 1], x[:, 2], periodic=True, boxsize=box, verbose=False)
    return np.asarray(res["npairs"], dtype=np.int64) // 2


def _reference(x, box):
    """Float64 counts per [e_k, e_k+1) bin by cKDTree (closed at r: counts
    with d <= e; the differences are (e_k, e_k+1] bins, equal to numpy's
    [e_k, e_k+1) bins unless a distance equals an edge exactly, which the
    check reports)."""
    from scipy.spatial import cKDTree
    t = cKDTree(x, boxsize=box)
    cum = t.count_neighbors(t, EDGES, cumulative=True)
    return np.diff((cum - len(x)) // 2)


def bench_clustered(args, device):
    filt = [f.strip() for f in args.variants.split(",")] if args.variants else []
    n = args.size or (60_000 if args.quick else N_FULL)
    box = L_FULL * (n / N_FULL) ** (1 / 3)
    x = clustered_mock(n, box)
    xd = cla.to_device(device.queue, x)
    reps = max(3, min(args.repeats, 9))
    rows = []

    def call():
        return clkernels.distance_histogram(x, EDGES, box=box, device=device)[0]
    counts = call()
    wall_np = median_call(call, warmup=1, repeats=reps)
    wall_dev = median_call(lambda: tb.histogram(device.queue, xd, bins=EDGES, box=box)[0][0],
                           warmup=1, repeats=reps)
    times = timing.time_events(lambda: tb.histogram(device.queue, xd, bins=EDGES, box=box)[1].all(),
                               warmup=1, repeats=reps)
    med, cv = timing.summarize(times)
    total = int(counts.sum())
    rows.append(row("clustered", f"distance_histogram, 14 log bins, box {box:.4g}", n, med, total / med,
                    "pairs/s", device.name, f"{total} pairs in range; cv {cv:.1%}",
                    wall_numpy=wall_np, wall_device=wall_dev))
    print("clustered: counts", counts.tolist())
    try:
        import Corrfunc  # noqa: F401
    except ImportError:
        Corrfunc = None
    if Corrfunc is not None:
        threads = os.cpu_count() or 1
        ref = _corrfunc_counts(x, box, threads)
        t = median_wall(lambda: _corrfunc_counts(x, box, threads), warmup=0, repeats=3)
        off = int(np.abs(ref - counts).sum())
        rows.append(row("clustered", f"Corrfunc DD float64 ({threads} threads, CPU)", n, t, total / t,
                        "pairs/s", "CPU", f"{off} pairs differ from clkernels"))
    if "check" in filt:
        ref = _reference(x, box)
        off = int(np.abs(ref - counts).sum())
        rows.append(row("clustered", "scipy cKDTree float64 reference (check)", n, math.nan, math.nan,
                        "pairs/s", "CPU", f"{off} pairs differ from clkernels"))
    return rows


WORKLOADS = {"clustered": ("clustered periodic catalog (1.24M points, 14 log bins), Corrfunc beside it",
                           bench_clustered)}
