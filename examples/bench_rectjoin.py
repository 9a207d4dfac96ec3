"""Rectangle spatial join benchmark: `python examples/bench.py rectjoin [--quick] [--size N] [--variants ...]`.

The spatial-join thesis's scale: about 1.9M data boxes and 190K query boxes
(--size sets the data boxes, queries a tenth; --quick: 20K), 2-D float32,
map-like and reproducible (seed 2016): box centres uniform in a 1000 x 1000
square plus clustered "towns", log-normal widths and heights (median 0.5,
sigma 0.8), and 0.05% large boxes (50..300 units a side, "regions"); the
10%..100% subsets the thesis sweeps (the first n boxes of each set). Rows:

* ``brute-atomic`` / ``brute-reduce``: the thesis's brute force (count), one
  global atomic per hit against per-work-item counts reduced in the
  work-group; kernel time by events, rate in box tests/s (nq * nb / s).
* ``grid-count`` / ``grid-pairs`` / ``grid-pairs-scan``: the uniform-grid
  join, wall clock from numpy boxes to the count / the sorted (i, j) int64
  numpy arrays (pairs collected by the page allocator / count-scan-write;
  kernel ms: every device step of the call, grid build included); rate in
  box tests/s equivalent (nq * nb / wall).
* ``sweep-count`` / ``sweep-pairs``: sort and sweep along x (data boxes
  sorted by their lower x, each query box searching its window, boxes wider
  than W tested by every query), timed as the grid rows (kernel ms: every
  device step, the sort included; wall from numpy, and for the count from
  device arrays); the note gives W and the wide boxes.
* peers: ``shapely`` STRtree (build + query(predicate='intersects')) on the
  CPU when installed; ``torch`` brute force (broadcast comparisons in row
  chunks, count) on a CUDA GPU when installed.

--variants: a subset of brute-atomic,brute-reduce,grid-count,grid-pairs,grid-pairs-scan,sweep-count,
sweep-pairs,shapely,torch.
"""

import sys
import time

import numpy as np
import pyopencl.array as cla

from benchlib import median_call, median_torch, row, torch_cuda
from clkernels.host.rectjoin import rect_join, rect_join_events

SEED = 2016
DATA, QUERIES = 1_900_000, 190_000
FRACTIONS = (0.1, 0.25, 0.5, 0.75, 1.0)
ALL = ("brute-atomic", "brute-reduce", "grid-count", "grid-pairs", "grid-pairs-scan", "sweep-count", "sweep-pairs",
       "shapely", "torch")


def map_boxes(n, rng, side=1000.0):
    """n map-like 2-D boxes (float32 rows [x0, y0, x1, y1])."""
    town = rng.random(n) < 0.5
    centres = rng.random((n, 2)) * side
    towns = rng.random((64, 2)) * side
    k = rng.integers(0, len(towns), n)
    centres[town] = np.clip(towns[k[town]] + rng.normal(0, 15.0, (int(town.sum()), 2)), 0, side)
    ext = rng.lognormal(np.log(0.5), 0.8, (n, 2))
    big = rng.random(n) < 5e-4
    ext[big] = rng.uniform(50.0, 300.0, (int(big.sum()), 2))
    return np.hstack([centres - ext / 2, centres + ext / 2]).astype(np.float32)


def make_sets(nb, nq):
    rng = np.random.default_rng(SEED)
    return map_boxes(nq, rng), map_boxes(nb, rng)


def _say(r):
    print(f"  {r['variant']} n={r['n']}: {r['ms']:.3f} ms, {r['rate']:.4g} {r['unit']}; "
          f"wall numpy {r['wall_numpy_ms']} ms; {r['note']}", file=sys.stderr, flush=True)
    return r


def _kernel_seconds(events, steps=None):
    skip = ("upload", "download")
    evs = events.all(*steps) if steps else [e for s, es in events.items() if s not in skip for e in es]
    return sum((e.profile.end - e.profile.start) for e in evs) * 1e-9


def bench_rectjoin(args, device):
    want = set(args.variants.split(",")) if args.variants else set(ALL)
    nb_full = args.size or (20_000 if args.quick else DATA)
    nq_full = max(1, nb_full // 10)
    fracs = (0.5, 1.0) if args.quick else FRACTIONS
    reps = max(1, min(args.repeats, 3 if args.quick else 5))
    Qa, Ba = make_sets(nb_full, nq_full)
    rows = []
    q = device.queue
    for f in fracs:
        nb, nq = max(1, int(nb_full * f)), max(1, int(nq_full * f))
        Q, B = Qa[:nq], Ba[:nb]
        tests = float(nq) * nb
        dQ, dB = cla.to_device(q, Q), cla.to_device(q, B)
        expect = None
        # brute force: CPU devices only at small sizes (the full set is ~3.6e11 tests)
        brute_ok = device.is_gpu or tests <= 4e9
        for variant in ("atomic", "reduce"):
            name = f"brute-{variant}"
            if name not in want or not brute_ok:
                continue
            ts, walls = [], []
            for _ in range(reps + 1):
                t0 = time.perf_counter()
                got, (ev, plan) = rect_join_events(dQ, dB, method="brute", variant=variant, device=device)
                walls.append(time.perf_counter() - t0)
                ts.append(_kernel_seconds(ev, ("join",)))
            ts, walls = ts[1:], walls[1:]
            if expect is None:
                expect = got
            elif got != expect:
                raise AssertionError(f"{name}: {got} pairs, expected {expect}")
            t = float(np.median(ts))
            rows.append(_say(row("rectjoin", name, nb, t, tests / t, "box tests/s", device.name,
                                 f"nq={nq}, {got} pairs, wg={plan.wg_size}",
                                 wall_device=float(np.median(walls)))))
        if "grid-count" in want:
            got, (ev, plan) = rect_join_events(Q, B, method="grid", device=device)
            if expect is not None and got != expect:
                raise AssertionError(f"grid-count: {got} pairs, brute force {expect}")
            expect = got
            wall = median_call(lambda: rect_join(Q, B, method="grid", device=device), repeats=reps)
            wall_dev = median_call(lambda: rect_join(dQ, dB, method="grid", device=device), repeats=reps)
            g = plan.geometry
            rows.append(_say(row("rectjoin", "grid-count", nb, _kernel_seconds(ev), tests / wall,
                                 "box tests/s (wall)", device.name,
                                 f"nq={nq}, {got} pairs, {g.cells[0]}x{g.cells[1]} cells",
                                 wall_numpy=wall, wall_device=wall_dev)))
        for name, pm in (("grid-pairs", "pages"), ("grid-pairs-scan", "scan")):
            if name not in want:
                continue
            (i, j), (ev, _) = rect_join_events(Q, B, output="pairs", method="grid", device=device,
                                               pairs_method=pm)
            if expect is not None and len(i) != expect:
                raise AssertionError(f"{name}: {len(i)} pairs, count {expect}")
            expect = len(i)
            wall = median_call(lambda: rect_join(Q, B, output="pairs", method="grid", device=device,
                                                 pairs_method=pm), repeats=reps)
            rows.append(_say(row("rectjoin", name, nb, _kernel_seconds(ev), tests / wall,
                                 "box tests/s (wall)", device.name,
                                 f"nq={nq}, {len(i)} pairs (i, j) int64, {pm}", wall_numpy=wall)))
        if "sweep-count" in want:
            got, (ev, plan) = rect_join_events(Q, B, method="sweep", device=device)
            if expect is not None and got != expect:
                raise AssertionError(f"sweep-count: {got} pairs, expected {expect}")
            expect = got
            wall = median_call(lambda: rect_join(Q, B, method="sweep", device=device), repeats=reps)
            wall_dev = median_call(lambda: rect_join(dQ, dB, method="sweep", device=device), repeats=reps)
            wide = int(np.count_nonzero(B[:, 0] + np.float32(plan.width) < B[:, 2]))
            rows.append(_say(row("rectjoin", "sweep-count", nb, _kernel_seconds(ev), tests / wall,
                                 "box tests/s (wall)", device.name,
                                 f"nq={nq}, {got} pairs, W={plan.width:.4g}, {wide} wide",
                                 wall_numpy=wall, wall_device=wall_dev)))
        if "sweep-pairs" in want:
            (i, j), (ev, _) = rect_join_events(Q, B, output="pairs", method="sweep", device=device)
            if expect is not None and len(i) != expect:
                raise AssertionError(f"sweep-pairs: {len(i)} pairs, count {expect}")
            expect = len(i)
            wall = median_call(lambda: rect_join(Q, B, output="pairs", method="sweep", device=device),
                               repeats=reps)
            rows.append(_say(row("rectjoin", "sweep-pairs", nb, _kernel_seconds(ev), tests / wall,
                                 "box tests/s (wall)", device.name,
                                 f"nq={nq}, {len(i)} pairs (i, j) int64, pages", wall_numpy=wall)))
        if "shapely" in want:
            try:
                import shapely
            except ImportError:
                shapely = None
            if shapely is not None:
                def strtree():
                    tree = shapely.STRtree(shapely.box(B[:, 0], B[:, 1], B[:, 2], B[:, 3]))
                    return tree.query(shapely.box(Q[:, 0], Q[:, 1], Q[:, 2], Q[:, 3]), predicate="intersects")
                got = strtree()
                if expect is not None and got.shape[1] != expect:
                    raise AssertionError(f"shapely: {got.shape[1]} pairs, expected {expect}")
                wall = median_call(strtree, warmup=0, repeats=min(reps, 3))
                rows.append(_say(row("rectjoin", "shapely", nb, wall, tests / wall, "box tests/s (wall)",
                                     "CPU", f"nq={nq}, STRtree build + query, pairs", wall_numpy=wall)))
        if "torch" in want:
            torch = torch_cuda()
            if torch is not None:
                tq, tb = torch.tensor(Q, device="cuda"), torch.tensor(B, device="cuda")
                rows_per = max(1, (1 << 28) // nb)

                def brute_torch():
                    total = torch.zeros((), dtype=torch.int64, device="cuda")
                    for s in range(0, nq, rows_per):
                        a = tq[s:s + rows_per, None, :]
                        m = (a[..., 0] <= tb[None, :, 2]) & (tb[None, :, 0] <= a[..., 2]) & \
                            (a[..., 1] <= tb[None, :, 3]) & (tb[None, :, 1] <= a[..., 3])
                        total += m.sum()
                    return total

                got = int(brute_torch().item())
                if expect is not None and got != expect:
                    raise AssertionError(f"torch: {got} pairs, expected {expect}")
                t = median_torch(torch, brute_torch, warmup=1, repeats=min(reps, 3))
                rows.append(_say(row("rectjoin", "torch", nb, t, tests / t, "box tests/s", "CUDA (torch)",
                                     f"nq={nq}, broadcast brute force, count")))
    return rows


WORKLOADS = {"rectjoin": ("rectangle spatial join: the thesis's 1.9M x 190K map-like boxes, 10%..100%",
                          bench_rectjoin)}
