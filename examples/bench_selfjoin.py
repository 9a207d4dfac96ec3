"""Similarity self-join benchmark: `python examples/bench.py selfjoin [--quick] [--variants ...]`.

The self-join papers' data: 2,000,000 float32 points, uniform
(``default_rng(s).random((2_000_000, d), dtype=np.float32)``) and exponential
(``rng.exponential(scale=1/40, size=(2_000_000, d)).astype(np.float32)``),
seeds 101 unif2d, 102 expo2d, 103 unif6d, 104 expo6d, at the two eps of each
set (~10 and ~100 neighbours a point), and the real 100,000-point 2-D file
at eps = 1.0 (../shared/data). For each: the ordered pairs with self-pairs
(2 * pairs + n) beside the float64 count of the issue (they must agree), the
count output (device only, no pair materialised), and CSR in numpy end to
end (upload, index build, join, pairs to the host, CSR) as wall clock;
the authors' own CUDA code's time on an H100 (the issue's table) beside it.
Kernel rows (the load-imbalance paper's comparison): per set and eps, the
join kernels' device time (grid build excluded; SORTBYWL's ordering
included where used), for the count output (neighbours per point) and for
the pairs output (the papers' neighbour table: the pool's sample pass and
every page round of the pair kernels, the pages' drain excluded), of GPUCALCGLOBAL as the papers run
it (work-item g on input point g, the neighbour cells searched a point at a time: their Algorithm 1),
the same reading the cells' row tables (d <= 3) and in the grid's cell order (the library's), UNICOMP,
LID-UNICOMP (also by the grid's 'row' kernel, the default) and WORKQUEUE + LID-UNICOMP + k = 8, each
with its speedup over the GPUCALCGLOBALs
(all must count the same pairs, and list the same pair set); with --quick only at the first eps of each
set, on its first 50,000 points.
Peers (the issue's): scipy ``cKDTree.query_pairs`` (CPU, float64 copies,
``output_type='ndarray'``; index build included) at the first eps of each
set, against our CSR end to end on the same points; and torch brute force on
the GPU (``cdist`` by row chunks + ``nonzero``, the pairs i < j on the
device) on the first 2^18 points, against ``self_join(output='pairs')`` of
the same points from a device array (both pair sets stay on the device).
--quick: 200,000 points of each set (the published counts do not apply).
--variants: a subset of the set names (real,unif2d,expo2d,unif6d,expo6d),
plus "peers" to time the peers (skipped otherwise: cKDTree takes minutes),
and "highd" (not in the default set): d = 16, 32, 64 through the tiled
all-pairs kernel, 2^18 uniform points at ~10 neighbours a point (count and
CSR from numpy; pairs from a device array beside torch brute force when
torch has CUDA).
"""

import dataclasses
import os
import time

import numpy as np

import clkernels
from benchlib import median_torch, row, torch_cuda
from clkernels.host.cellgrid import JoinPlan
from clkernels.host.cellgrid.plan import join_table
from clkernels.host.cellgrid.pairs import degrees, within

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared", "data", "selfjoin_test_dat.csv")

#: name -> (seed, d, kind, [(eps, float64 ordered pairs incl. self, authors' seconds)])
SETS = {
    "unif2d": (101, 2, "uniform", [(0.00126224, 22_013_676, 0.414), (0.0039962, 202_008_452, 1.341)]),
    "expo2d": (102, 2, "exponential", [(6.35149e-05, 22_236_904, 0.455), (0.000201289, 204_138_456, 1.322)]),
    "unif6d": (103, 6, "uniform", [(0.102285, 21_714_064, 1.103), (0.152975, 203_135_460, 2.095)]),
    "expo6d": (104, 6, "exponential", [(0.00527821, 21_695_832, 1.069), (0.00804812, 206_761_512, 2.267)]),
}


def _points(seed, d, kind, n):
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.random((n, d), dtype=np.float32)
    return rng.exponential(scale=1 / 40, size=(n, d)).astype(np.float32)


def _wall(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), out


def _one(device, name, x, eps, want, authors, reps):
    n = len(x)
    fn_count = lambda: clkernels.self_join(x, eps, output="count", include_self=True, device=device)  # noqa: E731
    fn_count()
    t_count, deg = _wall(fn_count, reps)
    got = int(deg.sum())
    if want is not None and got != want:
        raise AssertionError(f"{name} eps={eps}: {got} ordered pairs, float64 evaluation {want}")
    fn_csr = lambda: clkernels.self_join(x, eps, output="csr", include_self=True, device=device)  # noqa: E731
    fn_csr()                                                   # builds the write and sort kernels
    t_csr, (indptr, _) = _wall(fn_csr, max(1, reps // 2))
    if int(indptr[-1]) != got:
        raise AssertionError(f"{name}: csr holds {int(indptr[-1])} entries, count says {got}")
    note = f"eps={eps:g}, {got} ordered pairs (float64: {want if want is not None else '-'})"
    rows = [row("selfjoin", f"{name} count (no pairs materialised)", n, t_count, got / t_count, "pairs/s",
                device.name, note, wall_numpy=t_count)]
    note = f"eps={eps:g}; authors' CUDA code {authors:g} s (H100)" if authors else f"eps={eps:g}"
    if authors:
        note += f": {authors / t_csr:.2f}x"
    rows.append(row("selfjoin", f"{name} CSR to numpy (end to end)", n, t_csr, got / t_csr, "pairs/s",
                    device.name, note, wall_numpy=t_csr))
    return rows


#: (row label, kernel, k, order, row) of the kernel comparison; the first is the papers' baseline
#: (GPUCALCGLOBAL, work-item g on input point g, the neighbour cells searched a point at a time:
#: their Algorithm 1), the second the same with the cells' row tables (d <= 3), the third the
#: same kernel in the grid's cell order (the library's); row: the grid's 'row' kernel (the
#: default self-join) rather than selfjoin.cl.mako's; a string: the k work-items' split forced
#: (else the plan's: the candidates)
KERNELS = [("GPUCALCGLOBAL (the papers': input order, searches)", "gpucalcglobal", 1, "input", False),
           ("GPUCALCGLOBAL (input order, row tables)", "gpucalcglobal", 1, "input", False),
           ("GPUCALCGLOBAL in cell order", "gpucalcglobal", 1, "cell", False), ("UNICOMP", "unicomp", 1, "cell", False),
           ("LID-UNICOMP", "lidunicomp", 1, "cell", False),
           ("LID-UNICOMP (grid row kernel, default)", "lidunicomp", 1, "cell", True),
           ("WORKQUEUE + LID-UNICOMP + k=8", "lidunicomp", 8, "workqueue", False),
           ("WORKQUEUE + LID-UNICOMP + k=8 (rows split)", "lidunicomp", 8, "workqueue", "rows")]


def _kernels(device, name, x, eps, reps):
    """The kernel comparison: the join kernels' device time per kernel, for
    the count output (neighbours per point) and for the pairs output (the
    papers' neighbour table: pair records through the page allocator)."""
    return _kernel_rows(device, name, x, eps, reps, "count") + _kernel_rows(device, name, x, eps, reps, "pairs")


def _kernel_rows(device, name, x, eps, reps, output):
    import pyopencl.array as cla

    xd = cla.to_device(device.queue, x)
    rows, base, tabbase, cellbase, ref = [], None, None, None, None
    for label, kernel, k, order, how in KERNELS:
        if isinstance(how, str):
            plan = JoinPlan.resolve(device, len(x), kernel, k, order, False, x.shape[1], how)
            if plan == JoinPlan.resolve(device, len(x), kernel, k, order, False, x.shape[1]):
                continue                                    # the row above already
        else:
            plan = JoinPlan.resolve(device, len(x), kernel, k, order, how, x.shape[1])
        if base is None:
            plan = dataclasses.replace(plan, table=False)   # the papers' searches
        elif tabbase is None and not join_table(x.shape[1]):
            tabbase = base                                  # no tables beyond 3-D: the row above
            continue
        if output == "count":
            call = lambda: degrees(device.queue, xd, r=eps, join=plan)      # noqa: E731
        else:
            call = lambda: within(device.queue, xd, r=eps, join=plan)       # noqa: E731
        call()                                              # warm-up: builds the kernels
        ts, walls = [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            res, ev = call()
            walls.append(time.perf_counter() - t0)
            # the join's kernels (pairs: the pool's sample, the pair kernels, every round) and
            # SORTBYWL's ordering; the grid and the pages' drain are the same for every kernel
            ts.append(ev.seconds("pairs") + ev.seconds("order"))
        t = float(np.median(ts))
        if output == "count":
            got = int(res.sum()) // 2
        else:
            i, j = res
            got = len(i)
            # the pair set, order-free: count, wrapped sum and xor of the keys i * n + j
            k_ = i.astype(np.uint64) * np.uint64(len(x)) + j.astype(np.uint64)
            key = np.array([got, np.sum(k_, dtype=np.uint64), np.bitwise_xor.reduce(k_) if got else 0], np.uint64)
        if ref is None:
            ref, base = (got if output == "count" else key), t
        elif (got != ref) if output == "count" else not np.array_equal(key, ref):
            raise AssertionError(f"{name} eps={eps:g}: {label} gives {got} pairs ({output}), unlike GPUCALCGLOBAL")
        elif tabbase is None:
            tabbase = t
        if cellbase is None and (kernel, k, order) == ("gpucalcglobal", 1, "cell"):
            cellbase = t
        what = "join kernel" + (" + ordering" if order != "cell" else "")
        vs = f"{base / t:.2f}x GPUCALCGLOBAL"
        if tabbase and join_table(x.shape[1]):
            vs += f", {tabbase / t:.2f}x with row tables"
        if cellbase:
            vs += f", {cellbase / t:.2f}x in cell order"
        rows.append(row("selfjoin", f"{name} kernel {label}, {output} output", len(x), t, got / t, "pairs/s",
                        device.name, f"eps={eps:g}; {vs} ({what})", wall_device=float(np.median(walls))))
    return rows


def _ckdtree(name, x, eps, t_ours, want):
    """cKDTree.query_pairs on float64 copies (index build included)."""
    from scipy.spatial import cKDTree
    t0 = time.perf_counter()
    pairs = cKDTree(x.astype(np.float64)).query_pairs(eps, output_type="ndarray")
    t = time.perf_counter() - t0
    got = 2 * len(pairs) + len(x)
    if want is not None and got != want:
        raise AssertionError(f"{name}: cKDTree gives {got} ordered pairs, float64 evaluation {want}")
    return row("selfjoin", f"{name} scipy cKDTree.query_pairs (CPU)", len(x), t, len(pairs) / t, "pairs/s", "CPU",
               f"eps={eps:g}; clkernels CSR end to end {t / t_ours:.1f}x faster")


def _torch(torch, device, name, x, eps, reps):
    """torch brute force against self_join(output='pairs') from a device array, n = 2^18."""
    import pyopencl.array as cla
    x = x[:1 << 18]
    n = len(x)
    xt = torch.from_numpy(x).cuda()
    chunk = max(1, (1 << 28) // n)

    def brute():
        out = []
        for i in range(0, n, chunk):
            d = torch.cdist(xt[i:i + chunk].double(), xt.double())
            ij = torch.nonzero(d <= eps)
            ij[:, 0] += i
            out.append(ij[ij[:, 0] < ij[:, 1]])
        return torch.cat(out)
    t_torch = median_torch(torch, brute, warmup=1, repeats=reps)
    npairs = len(brute())
    xd = cla.to_device(device.queue, x)
    fn = lambda: clkernels.self_join(xd, eps, output="pairs")   # noqa: E731
    fn()
    t_ours, p = _wall(lambda: (fn(), device.queue.finish())[0], reps)
    got = len(p[0])
    if got != npairs:
        raise AssertionError(f"{name}: self_join lists {got} pairs, torch brute force {npairs}")
    note = f"eps={eps:g}, {npairs} pairs i < j, both on the device"
    return [row("selfjoin", f"{name} torch cdist + nonzero (GPU, n=2^18)", n, t_torch, npairs / t_torch, "pairs/s",
                torch.cuda.get_device_name(), note),
            row("selfjoin", f"{name} self_join pairs from a device array (n=2^18)", n, t_ours, npairs / t_ours,
                "pairs/s", device.name, note + f"; {t_torch / t_ours:.0f}x torch", wall_device=t_ours)]


def _highd_eps(x, k=10, samples=64):
    """eps giving about k neighbours a point: the median over sample points of
    their k-th nearest distance (float64, numpy)."""
    rng = np.random.default_rng(0)
    s = x[rng.choice(len(x), samples, replace=False)].astype(np.float64)
    xx = x.astype(np.float64)
    d2 = (s * s).sum(1)[:, None] + (xx * xx).sum(1)[None, :] - 2 * s @ xx.T
    return float(np.median(np.sqrt(np.maximum(np.sort(d2, axis=1)[:, k], 0.0))))


def _highd(device, torch, n, reps):
    """d > 8 (the tiled all-pairs kernel): uniform float32 points in d = 16, 32,
    64 at ~10 neighbours a point; count and CSR from numpy, pairs from a device
    array beside torch brute force on the same points."""
    rows = []
    for d in (16, 32, 64):
        x = np.random.default_rng(200 + d).random((n, d), dtype=np.float32)
        eps = _highd_eps(x)
        rows += _one(device, f"uniform {d}-D", x, eps, None, None, reps)
        if torch is not None:
            rows += _torch(torch, device, f"uniform {d}-D", x, eps, reps)
    return rows


def bench_selfjoin(args, device):
    want = set(args.variants.split(",")) if args.variants else {"real", *SETS}
    peers = "peers" in want
    torch = torch_cuda() if peers else None
    reps = max(1, min(args.repeats, 3))
    rows = []
    if "real" in want and os.path.exists(DATA):
        x = np.loadtxt(DATA, delimiter=",", dtype=np.float32)
        rows += _one(device, "real 100k 2-D", x, 1.0, 27_982_024, 0.139, reps)
        rows += _kernels(device, "real 100k 2-D", x[:50_000] if args.quick else x, 1.0, 1 if args.quick else reps)
    n = args.size or (200_000 if args.quick else 2_000_000)
    for name, (seed, d, kind, cases) in SETS.items():
        if name not in want:
            continue
        x = _points(seed, d, kind, n)
        for c, (eps, pairs, authors) in enumerate(cases):
            full = n == 2_000_000
            one = _one(device, name, x, eps, pairs if full else None, authors if full else None, reps)
            rows += one
            if peers and c == 0:
                rows.append(_ckdtree(name, x, eps, one[1]["ms"] * 1e-3, pairs if full else None))
                if torch is not None:
                    rows += _torch(torch, device, name, x, eps, reps)
            if not (args.quick and c):
                rows += _kernels(device, name, x[:50_000] if args.quick else x, eps, 1 if args.quick else reps)
    if "highd" in want:
        rows += _highd(device, torch_cuda() if torch is None else torch,
                       args.size or (1 << 14 if args.quick else 1 << 18), reps)
    return rows


WORKLOADS = {"selfjoin": ("similarity self-join: the papers' 2M-point sets and the real 100k file",
                          bench_selfjoin)}
