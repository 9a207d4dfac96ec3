"""Binned pair counts benchmark: `python examples/bench.py paircounts [--quick] [--size N] [--variants ...]`.

Three workloads of clkernels.paircounts (exact, float64 separations):

* weighted-r256: 3-D uniform points in the unit cube, pair weights w_i w_j
  and ravg, 256 bins over [0, sqrt(3)] (every pair binned); n = 2^20;
* rppi-20x20: the same points in a periodic unit box, 20 rp bins (log,
  0.01 .. 0.5) x 20 pi bins over [0, 0.5];
* catalog-rppi, catalog-weighted-r: the clustered catalog of ``bench.py
  clustered`` (1.24M points, periodic box 420) as survey codes count it:
  DDrppi with 14 log rp bins (0.17 .. 23.9) and pimax 40 in 40 bins, and
  weighted xi(r) with ravg; over the cell grid (the default) and over all
  pairs once (the grid off), counts compared;
* rdf-exclusions (float64 positions) and rdf-exclusions-f32 (float32, as
  MD trajectories store them): one frame of 100,000 atoms (water density,
  0.1 / A^3) in a cubic box, RDF 75 bins over (0, 15) A with
  exclusion_block=(3, 3); rdf-triclinic-f32: the same in a rhombic
  dodecahedron of the same volume (the double-precision kernel).

--quick: 2^14 points (2^11 on a CPU device); --size N sets n for all three.
Kernel time by OpenCL profiling events (every device step of the call but
its transfers: pair kernels, reductions, the grid's build, median of
repeats after a warm-up), beside the wall clock of the whole call from numpy
and from device arrays. Rate: pairs visited (n (n - 1) / 2) per second of
kernel time. For rdf-exclusions the numpy wall is clkernels.RDF(...).accumulate,
the device-array wall the op on device positions and group ids. Peers: scipy pdist + numpy.histogram (weighted) on the CPU, n <= 2^13; for
the RDF, scipy's periodic cKDTree.count_neighbors with the bin edges (the
counts without exclusions, one core).
"""

import math

import numpy as np
import pyopencl.array as cla

import clkernels
from benchlib import median_call, median_wall, row
from clkernels.host import paircounts as pc
from clkernels.host.core import timing

RDF_ATOMS = 100_000
RDF_DENSITY = 0.1           # atoms per cubic Angstrom (water's ~0.1)


def _selected(label, filt):
    return not filt or any(label == f or label.startswith(f) for f in filt)


def _n(args, device, default):
    if args.size:
        return args.size
    if args.quick:
        return (1 << 14) if device.is_gpu else (1 << 11)
    return default


def _time(device, label, n, reps, op_device, call_numpy):
    """(row) of one workload: kernel events of op_device(), walls of both calls."""
    def launch():           # every device step of the call but its transfers
        ev = op_device()[1]
        return ev.all(*[s for s in ev if s not in ("upload", "read", "download")])
    times = timing.time_events(launch, warmup=1, repeats=reps)
    wall_dev = median_call(op_device, repeats=reps)
    wall_np = median_call(call_numpy, repeats=reps)
    med, cv = timing.summarize(times)
    pairs = n * (n - 1) / 2
    return row("paircounts", label, n, med, pairs / med, "pairs/s", device.name, f"cv {cv:.1%}",
               wall_numpy=wall_np, wall_device=wall_dev)


def bench_paircounts(args, device):
    filt = [f.strip() for f in args.variants.split(",")] if args.variants else None
    rows = []
    rng = np.random.default_rng(0)
    q = device.queue
    reps = args.repeats or (3 if args.quick else 5)

    n = _n(args, device, 1 << 20)
    X = rng.random((n, 3))
    w = rng.random(n) + 0.5
    xd, wd = cla.to_device(q, X), cla.to_device(q, w)
    edges = np.linspace(0.0, math.sqrt(3.0), 257)
    if _selected("weighted-r256", filt):
        rows.append(_time(device, "weighted-r256", n, reps,
                          lambda: pc.count(q, xd, edges, weights=wd, ravg=True),
                          lambda: clkernels.paircounts(X, edges, weights=w, ravg=True, device=device)))
    if _selected("weighted-r256-noravg", filt):
        rows.append(_time(device, "weighted-r256-noravg", n, reps,
                          lambda: pc.count(q, xd, edges, weights=wd),
                          lambda: clkernels.paircounts(X, edges, weights=w, device=device)))
    if n <= (1 << 13) and _selected("scipy", filt):
        from scipy.spatial.distance import pdist

        i, j = np.triu_indices(n, 1)
        pw = w[i] * w[j]
        med = median_wall(lambda: np.histogram(pdist(X), edges, weights=pw), warmup=1, repeats=3)
        rows.append(row("paircounts", "scipy pdist+np.histogram weighted (CPU)", n, med, n * (n - 1) / 2 / med,
                        "pairs/s", "CPU"))
    if _selected("rppi-20x20", filt):
        rp = np.geomspace(0.01, 0.5, 21)
        kw = dict(box=1.0, mode="rppi", pimax=0.5, npi=20)
        rows.append(_time(device, "rppi-20x20", n, reps,
                          lambda: pc.count(q, xd, rp, **kw),
                          lambda: clkernels.paircounts(X, rp, device=device, **kw)))
    if not filt or any(f.startswith("catalog") for f in filt):
        _catalog(args, device, filt, reps, rows)
    if not filt or any(f.startswith("rdf") for f in filt):
        na = _n(args, device, RDF_ATOMS)
        L = (na / RDF_DENSITY) ** (1 / 3)
        A = rng.random((na, 3)) * L
        rng_max = min(15.0, 0.5 * L)
        groups = np.arange(na) // 3
        gd = cla.to_device(q, groups.astype(np.int32))
        edges = np.linspace(0.0, rng_max, 76)
        for label, dt in (("rdf-exclusions", np.float64), ("rdf-exclusions-f32", np.float32)):
            if not _selected(label, filt):
                continue
            At = A.astype(dt)
            adt = cla.to_device(q, At)
            rows.append(_time(device, label, na, reps,
                              lambda: pc.count(q, adt, edges, groups=gd, box=L),
                              lambda: clkernels.RDF(75, (0.0, rng_max), exclusion_block=(3, 3),
                                                    device=device).accumulate(At, [L, L, L])))
        if _selected("rdf-triclinic-f32", filt):
            # the same density in a rhombic dodecahedron (dimensions [a, a, a, 60, 60, 90], volume a^3 / sqrt 2)
            a = (na / RDF_DENSITY * math.sqrt(2.0)) ** (1 / 3)
            dims = [a, a, a, 60.0, 60.0, 90.0]
            from clkernels.host.paircounts.boxes import from_dimensions, widths
            H = from_dimensions(dims)
            T = (rng.random((na, 3)) @ H).astype(np.float32)
            td = cla.to_device(q, T)
            tmax = min(15.0, 0.49 * float(widths(H).min()))
            et = np.linspace(0.0, tmax, 76)
            rows.append(_time(device, "rdf-triclinic-f32", na, reps,
                              lambda: pc.count(q, td, et, groups=gd, box=dims),
                              lambda: clkernels.RDF(75, (0.0, tmax), exclusion_block=(3, 3),
                                                    device=device).accumulate(T, dims)))
        if _selected("rdf-scipy", filt):
            try:
                from scipy.spatial import cKDTree
            except ImportError:
                cKDTree = None
            if cKDTree is not None:     # the same counts without exclusions, one core
                def peer():
                    t = cKDTree(A, boxsize=L)
                    return t.count_neighbors(t, edges, cumulative=False)
                med = median_wall(peer, warmup=0, repeats=1)
                rows.append(row("paircounts", "rdf: scipy cKDTree.count_neighbors (CPU)", na, med,
                                na * (na - 1) / 2 / med, "pairs/s", "CPU"))
    return rows


def _catalog(args, device, filt, reps, rows):
    """The clustered catalog of ``bench.py clustered`` (1.24M points, box 420) as a
    survey code counts it: DDrppi (14 log rp bins 0.17 .. 23.9, pimax 40 in 40
    bins, Corrfunc's usual) and weighted xi(r) with ravg; over the cell grid
    (the default) and over all pairs (the grid off) once, for the ratio. --quick:
    60,000 points (2^14 on a CPU), the box scaled to the same density."""
    from bench_clustered import EDGES, L_FULL, N_FULL, clustered_mock
    from clkernels.host.paircounts import gridded

    n = args.size or (((60_000 if device.is_gpu else 1 << 14) if args.quick else N_FULL))
    box = L_FULL * (n / N_FULL) ** (1 / 3)
    pimax = min(40.0, 0.4 * box)
    X = clustered_mock(n, box)
    w = np.random.default_rng(1).random(n) + 0.5
    q = device.queue
    xd, wd = cla.to_device(q, X), cla.to_device(q, w)
    loads = {"catalog-rppi": (EDGES, dict(box=box, mode="rppi", pimax=pimax, npi=max(1, int(pimax)))),
             "catalog-weighted-r": (EDGES, dict(box=box, ravg=True))}
    for label, (e, kw) in loads.items():
        if not _selected(label, filt):
            continue
        dkw = dict(kw, weights=wd) if "weighted" in label else kw
        hkw = dict(kw, weights=w) if "weighted" in label else kw
        r = _time(device, label + " (grid)", n, reps, lambda: pc.count(q, xd, e, **dkw),
                  lambda: clkernels.paircounts(X, e, device=device, **hkw))
        got = pc.count(q, xd, e, **dkw)[0]
        saved, gridded.MAX_FRACTION = gridded.MAX_FRACTION, 0.0
        try:
            r2 = _time(device, label + " (all pairs)", n, 1, lambda: pc.count(q, xd, e, **dkw),
                       lambda: clkernels.paircounts(X, e, device=device, **hkw))
            ref = pc.count(q, xd, e, **dkw)[0]
        finally:
            gridded.MAX_FRACTION = saved
        same = np.array_equal(got["npairs"], ref["npairs"])
        for f in ("ravg", "weightavg"):             # float64 sums: to 1e-12 relative
            same = same and np.allclose(got[f], ref[f], rtol=1e-12, atol=0)
        r["note"] += (f"; {r2['ms'] / r['ms']:.1f}x the all-pairs kernel; counts and sums "
                      f"{'identical' if same else 'DIFFER'}")
        rows += [r, r2]


WORKLOADS = {"paircounts": ("binned pair counts: weighted r (256 bins), rp-pi 20x20, a clustered catalog's DDrppi "
                            "and weighted xi, RDF with exclusions",
                            bench_paircounts)}
