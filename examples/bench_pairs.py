"""Pair listing benchmark: `python examples/bench.py pairs [--quick] [--size N] [--variants ...]`.

The 2-BS paper's setup for outputs of unknown size: n uniform 3-D float32
points in the unit cube (n = 2^20 and 3 * 2^20; --quick: 2^15; --size
overrides) and r giving about n, 10n and 100n pairs (d <= r). Rows:

* ``pages``: ``pairs_within`` with the atomic page allocator (one pass, the
  pool sized from a 1% sample; the writers of a sub-group staging their
  pairs in one local buffer), ``pages stage=0`` (``paper``): every writer on its own
  pages as the paper's, ``scan``: count, scan, write -- each timed
  as the wall clock from numpy in to (i, j) int64 numpy out, from a device
  array, and by events (every device step: grid build, sample, pair
  kernels, drains; "kernel ms"); the pair kernel's record writes in GB/s;
  the wall clocks are medians after two warm-up calls (a loop's steady
  state: the result memory is kept and, on NVIDIA, registered with the
  driver); the int64 columns' bytes to numpy per second beside the rate of
  one copy into page-locked memory (``pinned_d2h_rate``) on GPUs;
* PyOpenCL's ``ListOfListsBuilder`` on the same grid (the ecosystem's
  count-scan-write; float32 decisions, no exactness), wall clock on the
  device;
* torch ``cdist`` + ``nonzero`` in row chunks on the GPU (n <= 2^20).

* ``theta_join``: the paper's nested-loop join of two n-row tables (a
  band join with an output about n), pages and scan, wall clock (n <= 2^20).
* ``dense``: a join whose pairs are dense, two 2^14-row tables (--quick:
  2^11) under ``a.k != b.k`` (2^20 random keys: almost every pair, 2.7e8),
  pages and scan: the writing pass's records in GB/s against the device's
  own write rate (a fill of 1 GiB, ``write_rate``), events of the whole call,
  wall clock from numpy to the (i, j) order.

--variants: a subset of pages,paper,scan,lolb,torch,theta,dense.
"""

import math
import sys
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from benchlib import median_call, median_torch, pinned_d2h_rate, row, torch_cuda, write_rate
from clkernels.host import cellgrid as G
from clkernels.host.cellgrid.pairs import within

MULTIPLES = (1, 10, 100)


def radius_for(n, k):
    """r with about k * n pairs among n uniform points in the unit cube."""
    return (3.0 * k / (2.0 * math.pi * n)) ** (1.0 / 3.0)


def _device_ms(events, skip=("upload", "download")):
    """Summed durations of the call's device steps (not the host copies)."""
    evs = [e for s, es in events.items() if s not in skip for e in es]
    cl.wait_for_events(evs)
    return sum(e.profile.end - e.profile.start for e in evs) * 1e-9


def _say(r):
    """Each row as it is measured (the table comes at the end)."""
    print(f"  {r['variant']} n={r['n']}: {r['ms']:.3f} ms, {r['rate']:.4g} {r['unit']}; "
          f"wall numpy {r['wall_numpy_ms']} ms; {r['note']}", file=sys.stderr, flush=True)
    return r


def bench_pairs(args, device):
    want = set(args.variants.split(",")) if args.variants else {"pages", "paper", "scan", "lolb", "torch", "theta",
                                                                  "dense"}
    sizes = [args.size] if args.size else ([1 << 15] if args.quick else [1 << 20, 3 << 20])
    reps = max(1, min(args.repeats, 3))
    torch = torch_cuda() if "torch" in want else None
    rows = []
    rng = np.random.default_rng(0)
    pinned = pinned_d2h_rate(device) if device.staged_io else None
    for n in sizes:
        x = rng.random((n, 3), dtype=np.float32)
        xd = cla.to_device(device.queue, x)
        for k in MULTIPLES:
            r = radius_for(n, k)
            found = {}
            for method, label, kw in (("pages", "pages", {}), ("paper", "pages stage=0", {"stage": 0}),
                                      ("scan", "scan", {})):
                if method not in want:
                    continue
                kw = dict(kw, method="scan" if method == "scan" else "pages")
                (i, j), ev = within(device.queue, xd, r=r, **kw)
                m = len(i)
                found[method] = m
                del i, j
                t_dev = median_call(lambda: within(device.queue, xd, r=r, **kw), warmup=2, repeats=reps)
                t_np = median_call(lambda: G.pairs_within(x, r, device=device, **kw), warmup=2, repeats=reps)
                evs = [within(device.queue, xd, r=r, **kw)[1] for _ in range(reps)]
                t_k = float(np.median([_device_ms(e) for e in evs]))
                t_pairs = float(np.median([_device_ms({"pairs": e["pairs"]}) for e in evs]))
                note = (f"r={r:.4g}, record writes {8 * m / t_pairs / 1e9:.3g} GB/s in the pair kernels, "
                        f"int64 columns to numpy {16 * m / t_dev / 1e9:.3g} GB/s from the device array"
                        + ("" if pinned is None else
                           f" ({16 * m / t_dev / pinned:.0%} of one pinned copy's {pinned / 1e9:.3g} GB/s)"))
                rows.append(_say(row("pairs", f"{label} {k}n", n, t_k, m / t_k, "pairs/s", device.name, note,
                                     wall_numpy=t_np, wall_device=t_dev)))
            if len(set(found.values())) > 1:
                raise AssertionError(f"the methods found different numbers of pairs: {found}")
            if "lolb" in want and n <= (1 << 20):
                rows.append(_say(_lolb(device, xd, n, r, reps, found.get("pages"))))
            if torch is not None and n <= (1 << 20):
                rows.append(_say(_torch(torch, x, r, k, reps)))
        if "theta" in want and n <= (1 << 20):
            rows += [_say(r) for r in _theta(device, n)]
    if "dense" in want:
        rows += [_say(r) for r in _dense(device, 1 << (11 if args.quick else 14), reps, pinned)]
    return rows


def _dense(device, n, reps, pinned=None):
    """Dense pairs: two n-row tables, ``a.k != b.k`` over 2^20 random keys
    (``pinned``: one pinned copy's rate, beside the columns' rate to numpy)."""
    from clkernels.host.theta import theta_join_events

    rng = np.random.default_rng(2)
    a = {"k": rng.integers(0, 1 << 20, n).astype(np.int32)}
    b = {"k": rng.integers(0, 1 << 20, n).astype(np.int32)}
    ceiling = write_rate(device)
    out = []
    for method, passes in (("pages", ("pairs",)), ("scan", ("pairwrite",))):
        def call():
            return theta_join_events(a, b, "a.k != b.k", device=device, method=method)
        (i, _), _ = call()
        m = len(i)
        del i
        wall = median_call(lambda: call()[0], warmup=2, repeats=reps)
        evs = [call()[1][0] for _ in range(reps)]
        t_k = float(np.median([_device_ms(e) for e in evs]))
        t_w = float(np.median([_device_ms({s: e[s] for s in passes}) for e in evs]))
        out.append(row("pairs", f"theta_join dense ({method})", n, t_k, m / t_k, "pairs/s", device.name,
                       f"{m} pairs; the writing pass {t_w * 1e3:.3f} ms, records at {8 * m / t_w / 1e9:.4g} GB/s "
                       f"= {8 * m / t_w / ceiling:.0%} of the device's write rate {ceiling / 1e9:.4g} GB/s; "
                       f"(i, j) int64 columns in order to numpy {16 * m / wall / 1e9:.3g} GB/s"
                       + ("" if pinned is None else f" ({16 * m / wall / pinned:.0%} of one pinned copy's "
                                                    f"{pinned / 1e9:.3g} GB/s)"),
                       wall_numpy=wall))
    return out


def _theta(device, n):
    """The paper's NLJ case: two n-row tables (a key and a value), a band join
    with an output about the table size, pages vs count-scan-write."""
    import clkernels

    rng = np.random.default_rng(1)
    a = {"t": (rng.random(n) * n).astype(np.float32), "k": rng.integers(0, 1 << 20, n).astype(np.int32)}
    b = {"t": (rng.random(n) * n).astype(np.float32), "k": rng.integers(0, 1 << 20, n).astype(np.int32)}
    pred = "fabs(a.t - b.t) <= 0.5f && a.k != b.k"
    out = []
    for method in ("pages", "scan"):
        clkernels.theta_join(a, b, pred, device=device, method=method)         # build
        t0 = time.perf_counter()
        i, _ = clkernels.theta_join(a, b, pred, device=device, method=method)
        sec = time.perf_counter() - t0
        out.append(row("pairs", f"theta_join band ({method})", n, sec, n * n / sec, "predicates/s", device.name,
                       f"{len(i)} pairs; wall clock numpy in/out", wall_numpy=sec))
    return out


LOLB_SOURCE = r"""//CL//
void generate(LIST_ARG_DECL USER_ARG_DECL index_type i)
{
    const float px = xs[i], py = xs[np_ + i], pz = xs[2 * np_ + i];
    const ulong aid = ids[pcell[i]];
    const ulong s1 = geo[4], s2 = geo[5];
    const long c2 = (long)(aid / s2), c1 = (long)((aid - (ulong)c2 * s2) / s1);
    const long c0 = (long)(aid - (ulong)c2 * s2 - (ulong)c1 * s1);
    for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
    for (int dx = -1; dx <= 1; ++dx) {
        const long a = c0 + dx, b = c1 + dy, c = c2 + dz;
        if (a < 0 || b < 0 || c < 0 || a >= (long)geo[0] || b >= (long)geo[1] || c >= (long)geo[2]) continue;
        const ulong nid = (ulong)a + (ulong)b * s1 + (ulong)c * s2;
        if (nid < aid) continue;
        uint lo = 0, hi = ncells;
        while (lo < hi) { uint mid = (lo + hi) >> 1; if (ids[mid] < nid) lo = mid + 1; else hi = mid; }
        if (lo == ncells || ids[lo] != nid) continue;
        uint j0 = start[lo], j1 = start[lo] + count[lo];
        if (nid == aid) j0 = i + 1;
        for (uint j = j0; j < j1; ++j) {
            const float ex = px - xs[j], ey = py - xs[np_ + j], ez = pz - xs[2 * np_ + j];
            if (fma(ex, ex, fma(ey, ey, ez * ez)) <= t) APPEND_pairs(j);
        }
    }
}
"""


def _lolb(device, xd, n, r, reps, ref):
    from pyopencl.algorithm import ListOfListsBuilder

    q = device.queue
    g = G.Grid(xd, r, device=device)
    t = np.float32((r * g.scaling.scale) ** 2)
    builder = ListOfListsBuilder(device.context, [("pairs", np.uint32)], LOLB_SOURCE,
                                 "__global const float *xs, uint np_, __global const uint *pcell, "
                                 "__global const ulong *ids, __global const uint *start, "
                                 "__global const uint *count, uint ncells, __global const ulong *geo, float t")
    argv = (g.coords.reshape(3 * n), np.uint32(n), g.point_cell, g.cell_ids, g.cell_start, g.cell_count,
            np.uint32(g.num_cells), g.igeom, t)

    def call():
        res, ev = builder(q, n, *argv)
        ev.wait()
        return res
    res = call()
    m = int(res["pairs"].count)
    times = []
    for _ in range(reps):
        q.finish()
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    sec = float(np.median(times))
    note = f"grid given (built once); {m} pairs" + ("" if ref is None else f" (pages: {ref})")
    return row("pairs", "pyopencl ListOfListsBuilder (same grid)", n, sec, m / sec, "pairs/s", device.name,
               note + "; wall clock on the device, lists stay there")


def _torch(torch, x, r, k, reps):
    xt = torch.from_numpy(x).cuda()
    n = len(x)
    chunk = max(1, (1 << 30) // n)

    def run():
        out = []
        for a in range(0, n, chunk):
            d = torch.cdist(xt[a:a + chunk], xt)
            ij = torch.nonzero(d <= r)
            ij = ij[ij[:, 0] + a < ij[:, 1]]
            out.append(ij)
        return out
    sec = median_torch(torch, run, warmup=1, repeats=max(1, min(reps, 2)))
    m = sum(len(o) for o in run())
    return row("pairs", f"torch cdist+nonzero (chunks) {k}n", n, sec, m / sec, "pairs/s",
               torch.cuda.get_device_name(), f"{m} pairs; pairs stay on the GPU")


WORKLOADS = {"pairs": ("all pairs within r: page allocator vs count-scan-write vs ListOfListsBuilder vs torch",
                       bench_pairs)}
