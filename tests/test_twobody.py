"""Two-body statistics against the float64 reference (tests/helpers.py), exactly.

Counts and histograms must equal a float64 evaluation of the distances pair
for pair (zero tolerance). Sizes are small (n ~ 200-600) and small
work-groups make several blocks, so PoCL stays quick.
"""

import numpy as np
import pytest

import clkernels
from clkernels.host.core.device import Device
from clkernels.host.twobody import Plan, Problem, plan
from helpers import clustered, distances, histogram, uniform


def ref_dist(X, Y=None, box=None):
    return distances(X, Y, box)


def check_count(got, d, r):
    assert isinstance(got, int)
    assert got == int((d <= r).sum()), (got, int((d <= r).sum()))


def check_hist(got, d, edges):
    want = histogram(d, edges)
    assert got.dtype == np.int64 and got.shape == want.shape
    assert (got == want).all(), (got, want)


SMALL = dict(wg_size=32)          # several blocks at n ~ 300 on any device


# ------------------------------------------------------------ pairwise stages

# every variant with two of the three diagonal schemes, every scheme with >= 3 variants
VARIANT_DIAG = [("naive", "mask"), ("naive", "triangle"), ("readonly", "balanced"), ("readonly", "mask"),
                ("lrshm", "triangle"), ("lrshm", "balanced"), ("regshm", "mask"), ("regshm", "balanced"),
                ("shuffle", "triangle"), ("shuffle", "balanced"), ("shuffle", "mask")]


@pytest.mark.parametrize("variant,diag", VARIANT_DIAG)
def test_count_variants(device, rng, variant, diag):
    X = uniform(rng, int(rng.integers(250, 400)), 3)
    r = float(rng.uniform(0.15, 0.4))
    ppw = 2
    got = clkernels.pair_count(X, r, device=device, variant=variant, diag=diag, ppw=ppw, **SMALL)
    check_count(got, ref_dist(X), r)
    # cross (all i, j): same kernel, self mode off
    Y = uniform(rng, 150, 3)
    got = clkernels.pair_count(X, r, y=Y, device=device, variant=variant, diag=diag, ppw=ppw, **SMALL)
    check_count(got, ref_dist(X, Y), r)


def test_shuffle_every_subgroup_backend(device, sg_backend, rng):
    """The shuffle variant (Algorithm 6) and the sub-group reductions on each back end."""
    dev = Device(device.cl_device, sg_backend=sg_backend)
    X = uniform(rng, 300, 3)
    r = 0.2
    check_count(clkernels.pair_count(X, r, device=dev, variant="shuffle", ppw=2, wg_size=64), ref_dist(X), r)
    got, e = clkernels.distance_histogram(X, 16, device=dev, variant="shuffle", wg_size=64, output="local")
    check_hist(got, ref_dist(X), e)


@pytest.mark.parametrize("variant,vec,ppw", [("naive", 2, 1), ("readonly", 4, 3), ("readonly", 1, 8),
                                             ("shuffle", 1, 4), ("lrshm", 1, 3)])
def test_count_register_tiling_and_vectors(device, rng, variant, vec, ppw):
    n = int(rng.integers(300, 500))
    X = clustered(rng, n, 3)
    r = 0.05
    got = clkernels.pair_count(X, r, device=device, variant=variant, vec=vec, ppw=ppw,
                               diag="balanced", **SMALL)
    check_count(got, ref_dist(X), r)


# d = 1..4 in both precisions; regshm / lrshm keep the partner tile as scalars (d = 1),
# 2-vectors (d = 2) or 4-vectors (d = 3, 4); None: the planner's choice
DTYPE_DIMS = [(np.float32, 1, "regshm"), (np.float32, 2, "lrshm"), (np.float32, 3, None),
              (np.float32, 4, "regshm"), (np.float64, 1, "lrshm"), (np.float64, 2, "regshm"),
              (np.float64, 3, "regshm"), (np.float64, 4, None)]


@pytest.mark.parametrize("dtype,d,variant", DTYPE_DIMS)
def test_count_dtypes_dims(device, rng, dtype, d, variant):
    if dtype == np.float64 and not device.fp64:
        pytest.skip("no fp64")
    opts = dict(variant=variant, ppw=2, **SMALL) if variant else dict(method="allpairs")
    for make in (uniform, clustered):
        X = make(rng, 300, d, dtype)
        r = float(rng.uniform(0.05, 0.3))
        check_count(clkernels.pair_count(X, r, device=device, **opts), ref_dist(X), r)


# -------------------------------------------------------------- output stages

GLOBAL = dict(output="global")
LOCAL1 = dict(output="local", copies=1, flush="reduce")
LOCAL4A = dict(output="local", copies=4, flush="atomic")
LOCAL32 = dict(output="local", copies=32, flush="reduce")
MODEL = dict(output="local")
# every output stage with >= 2 variants, every variant with >= 1 output stage
HIST_OUT = [("readonly", GLOBAL), ("shuffle", GLOBAL), ("regshm", LOCAL1), ("naive", LOCAL1),
            ("shuffle", LOCAL4A), ("lrshm", LOCAL4A), ("readonly", LOCAL32), ("regshm", LOCAL32),
            ("regshm", MODEL)]


@pytest.mark.parametrize("variant,out", HIST_OUT,
                         ids=[v + "-" + "-".join(str(x) for x in o.values()) for v, o in HIST_OUT])
def test_hist_output_stages(device, rng, variant, out):
    X = uniform(rng, int(rng.integers(250, 400)), 3)
    got, edges = clkernels.distance_histogram(X, 24, device=device, variant=variant, ppw=2,
                                              diag="balanced", **out, **SMALL)
    assert edges[0] == 0 and len(edges) == 25
    check_hist(got, ref_dist(X), edges)
    assert got.sum() == len(X) * (len(X) - 1) // 2      # default range holds every pair


@pytest.mark.parametrize("variant", ["naive", "lrshm"])
def test_hist_nonuniform_edges_cross(device, rng, variant):
    X, Y = clustered(rng, 220, 2), uniform(rng, 180, 2)
    edges = np.array([0.0, 0.01, 0.05, 0.1, 0.3, 0.31, 0.6, 0.9, 1.0])
    got, e = clkernels.distance_histogram(X, edges, y=Y, device=device, variant=variant, **SMALL)
    assert (e == edges).all()
    check_hist(got, ref_dist(X, Y), edges)


@pytest.mark.parametrize("diag", plan.DIAGS)
def test_hist_diagonal_paths(device, rng, diag):
    """Self joins: diagonal blocks with each intra-block scheme, partial range (range tests),
    a partial last block (per-pair anchor checks) and non-uniform edges."""
    X = clustered(rng, 333, 3)
    got, e = clkernels.distance_histogram(X, 20, (0.01, 0.5), device=device, variant="lrshm",
                                          diag=diag, ppw=2, output="local", copies=2, **SMALL)
    check_hist(got, ref_dist(X), e)
    edges = np.sort(rng.uniform(0, 1.2, 9))
    got, _ = clkernels.distance_histogram(X, edges, device=device, variant="readonly", diag=diag,
                                          output="global", **SMALL)
    check_hist(got, ref_dist(X), edges)


def test_hist_range_and_float64(device, rng):
    if not device.fp64:
        pytest.skip("no fp64")
    X = uniform(rng, 300, 4, np.float64)
    got, e = clkernels.distance_histogram(X, 10, range=(0.2, 0.7), device=device, method="allpairs")
    check_hist(got, ref_dist(X), e)


# ------------------------------------------------------------------- the box

@pytest.mark.parametrize("d", [2, 3])
def test_periodic_box(device, rng, d):
    box = rng.uniform(0.5, 2.0, d)
    X = (rng.random((300, d)) * box).astype(np.float32)
    r = 0.2
    check_count(clkernels.pair_count(X, r, box=box, device=device, method="allpairs"),
                ref_dist(X, box=box), r)
    got, e = clkernels.distance_histogram(X, 16, box=box, device=device, method="allpairs")
    assert e[-1] == 0.5 * box.min()                      # the default range: half the shortest side
    check_hist(got, ref_dist(X, box=box), e)
    Y = (rng.random((100, d)) * box).astype(np.float32)
    check_count(clkernels.pair_count(X, r, y=Y, box=box, device=device, variant="shuffle", **SMALL),
                ref_dist(X, Y, box=box), r)


def test_rdf(device, rng):
    box = np.array([1.0, 1.2, 0.9])
    V = np.prod(box)
    X = (rng.random((400, 3)) * box).astype(np.float32)
    g, e = clkernels.rdf(X, 10, range=(0.0, 0.45), box=box, device=device)
    counts, e2 = clkernels.distance_histogram(X, 10, range=(0.0, 0.45), box=box, device=device)
    check_hist(counts, ref_dist(X, box=box), e2)
    shells = 4 / 3 * np.pi * (e[1:] ** 3 - e[:-1] ** 3)
    assert np.allclose(g, 2 * counts / (400 * 399 / V * shells), rtol=1e-12, atol=0)
    assert 0.7 < g[3:].mean() < 1.3                       # uniform points: g ~ 1
    Y = (rng.random((200, 3)) * box).astype(np.float32)
    g2, e2 = clkernels.rdf(X, 10, (0.0, 0.45), y=Y, box=box, device=device)
    counts = np.histogram(ref_dist(X, Y, box=box), e2)[0]
    assert np.allclose(g2, counts / (400 * 200 / V * shells), rtol=1e-12, atol=0)
    # 2-D: shells are rings
    B2 = np.array([1.0, 1.0])
    P = rng.random((300, 2)).astype(np.float32)
    g3, e3 = clkernels.rdf(P, [0.0, 0.1, 0.2, 0.3], box=B2, device=device)
    c3, _ = clkernels.distance_histogram(P, e3, box=B2, device=device)
    assert np.allclose(g3, 2 * c3 / (300 * 299 * np.pi * (e3[1:] ** 2 - e3[:-1] ** 2)), rtol=1e-12)


# ------------------------------------------------------------ small and odd

@pytest.mark.parametrize("n", [0, 1, 2])
def test_tiny_inputs(device, n):
    X = np.arange(n * 3, dtype=np.float32).reshape(n, 3) * 0.1
    want = int((ref_dist(X) <= 1.0).sum()) if n else 0
    assert clkernels.pair_count(X, 1.0, device=device) == want
    c, e = clkernels.distance_histogram(X, 4, range=(0, 1), device=device)
    assert c.dtype == np.int64 and c.sum() == (1 if n == 2 else 0)
    Y = np.zeros((0, 3), np.float32)
    assert clkernels.pair_count(X, 1.0, y=Y, device=device) == 0


def test_identical_points(device):
    X = np.full((200, 3), 0.25, np.float32)
    assert clkernels.pair_count(X, 0.01, device=device, **SMALL) == 200 * 199 // 2
    assert clkernels.pair_count(X, 0.0, device=device, method="allpairs") == 200 * 199 // 2   # d <= r
    c, e = clkernels.distance_histogram(X, 5, device=device, **SMALL)
    assert (e == np.histogram(np.zeros(3), 5)[1]).all()        # numpy's rule: range (0, 0) -> (-0.5, 0.5)
    check_hist(c, np.zeros(200 * 199 // 2), e)


# ----------------------------------------------- streaming and several devices

@pytest.mark.parametrize("variant", ["readonly", "shuffle"])
def test_tiny_chunks_streaming(device, rng, variant):
    X, Y = uniform(rng, 333, 3), uniform(rng, 170, 3)
    opts = dict(variant=variant, ppw=1, wg_size=32, chunk_points=64, launch_blocks=1)
    r = 0.25
    check_count(clkernels.pair_count(X, r, device=device, **opts), ref_dist(X), r)
    check_count(clkernels.pair_count(X, r, y=Y, device=device, **opts), ref_dist(X, Y), r)
    got, e = clkernels.distance_histogram(X, 12, device=device, output="local", copies=2, **opts)
    check_hist(got, ref_dist(X), e)


@pytest.mark.filterwarnings("ignore:device= names one device more than once")
def test_two_devices(device, rng):
    d1, d2 = Device(device.cl_device), Device(device.cl_device)   # two contexts, one device
    X = uniform(rng, 400, 3)
    r = 0.2
    with pytest.warns(UserWarning, match="more than once") as caught:
        check_count(clkernels.pair_count(X, r, device=[d1, d2], **SMALL), ref_dist(X), r)
    assert [w.filename for w in caught] == [__file__]            # the user's line, not the library's
    got, e = clkernels.distance_histogram(X, 20, device=[d1, d2], launch_blocks=2, **SMALL)
    check_hist(got, ref_dist(X), e)
    opts = dict(chunk_points=128, **SMALL)
    check_count(clkernels.pair_count(X, r, device=[d1, d2, d1], **opts), ref_dist(X), r)
    # the advanced object: a plan dict (keywords win over it)
    check_count(clkernels.pair_count(X, r, device=[d1, d2], plan=dict(variant="naive", **SMALL)),
                ref_dist(X), r)


@pytest.mark.filterwarnings("ignore:device= names one device more than once")
def test_two_devices_of_different_roots(device, rng):
    """Devices whose fast square roots differ (an NVIDIA GPU's PTX root beside
    another device's native_sqrt) share one program source: the call's kernels
    take the specification's sqrt on every one (device.common_fast_sqrt) and build."""
    d1, d2 = Device(device.cl_device), Device(device.cl_device)
    d1._fast_sqrt = ("clk_sqrt_ftz", 1.0)           # as an NVIDIA GPU reports it (no PTX here)
    X = uniform(rng, 300, 3)
    got, e = clkernels.distance_histogram(X, 20, device=[d1, d2], launch_blocks=2, **SMALL)
    check_hist(got, ref_dist(X), e)
    got, e = clkernels.distance_histogram(X, 20, device=[d2, d1], launch_blocks=2, exact=False, **SMALL)
    assert got.sum() == len(X) * (len(X) - 1) // 2


# ------------------------------------------------------------------ framework

@pytest.mark.parametrize("variant,diag", [("readonly", "balanced"), ("lrshm", "triangle"), ("shuffle", "mask")])
def test_framework_kde_sum(device, rng, variant, diag):
    X = uniform(rng, 300, 3, np.float32)
    h = 0.2
    d = ref_dist(X)
    want = np.exp(-d * d / (2 * h * h)).sum()
    got = clkernels.kde_sum(X, h, device=device, variant=variant, diag=diag, ppw=2, **SMALL)
    assert abs(got - want) <= 1e-4 * want
    Y = uniform(rng, 100, 3, np.float32)
    d = ref_dist(X, Y)
    want = np.exp(-d * d / (2 * h * h)).sum()
    got = clkernels.kde_sum(X, h, y=Y, device=device, variant=variant, diag=diag, ppw=2, **SMALL)
    assert abs(got - want) <= 1e-4 * want


def test_framework_angular(device, rng):
    # angular 2-point count on the unit sphere
    v = rng.standard_normal((300, 3))
    U = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    th = 0.4
    U64 = U.astype(np.float64)
    ang = np.arccos(np.clip((U64 @ U64.T)[np.triu_indices(300, 1)], -1, 1))
    got = clkernels.angular_pair_count(U, th, device=device, **SMALL)
    tol = 1e-4          # acos near small angles amplifies float32 rounding
    assert int((ang < th - tol).sum()) <= got <= int((ang < th + tol).sum())


def test_framework_user_distance_and_predicate(device, rng):
    X, Y = uniform(rng, 250, 2), uniform(rng, 120, 2)
    manhattan = "REAL s = 0; for (int k = 0; k < DIMS; ++k) s += fabs(a[k] - b[k]); return s;"
    hist = clkernels.TwoBody(distance=manhattan, output=clkernels.Histogram(8, range=(0.0, 2.0)), dims=2)
    got, e = hist(X, Y, device=device, variant="regshm", **SMALL)
    D = np.abs(X.astype(np.float64)[:, None] - Y.astype(np.float64)[None]).sum(-1).ravel()
    check_hist(got, D, e)
    far = clkernels.TwoBody(output=clkernels.Count("d >= t"), dims=2)   # built-in distance
    check_count(len(X) * (len(X) - 1) // 2 - far(X, t=0.3, device=device, **SMALL), ref_dist(X), 0.3)
    s = clkernels.TwoBody(output=clkernels.Sum("d"), dims=2, dtype=np.float64)
    if device.fp64:
        assert np.isclose(s(X, Y, device=device), ref_dist(X, Y).sum(), rtol=1e-9)


# ---------------------------------------------------------------------- planner

def test_planner_figure9(device):
    hist = Problem("hist", 3, "float32", 1 << 20, nbins=256, binning="magic", fullrange=True)
    p = Plan.resolve(device, hist)
    assert p.hist_mode == "local" and p.copies in plan.COPIES
    big = device.local_mem_size // 4 + 1
    p = Plan.resolve(device, Problem("hist", 3, "float32", 1 << 20, nbins=big, binning="magic"))
    assert p.hist_mode == "global"
    p = Plan.resolve(device, Problem("count", 3, "float32", 1 << 20))
    assert p.hist_mode is None
    with pytest.raises(ValueError):
        Plan.resolve(device, Problem("hist", 3, "float32", 100, nbins=big, binning="magic"), output="local")
    with pytest.raises(TypeError):
        Plan.resolve(device, hist, bogus=1)


def test_copies_model():
    class H100:
        local_mem_size = 48 * 1024
        local_mem_per_cu = 228 * 1024
        max_threads_per_cu = 2048
        max_work_group_size = 1024
    c_small, costs = plan.copies_model(H100, 8, 256, 0)
    c_big, _ = plan.copies_model(H100, 1500, 256, 0)
    assert c_small == 32                    # tiny outputs: one copy per lane (the paper's Table 5)
    assert c_big < c_small                  # large outputs: fewer copies (occupancy)
    assert plan._latency(1, 100) == 1.0 and plan._latency(32, 1) > plan._latency(32, 1000)


def test_choose_method():
    assert plan.choose_method(0.5) == "allpairs"
    assert plan.choose_method(0.001, method="allpairs") == "allpairs"
    assert plan.choose_method(0.001) == "cells"
    assert plan.choose_method(0.001, pairs=1000) == "allpairs"     # too few pairs to pay for a grid
    with pytest.raises(ValueError):
        plan.choose_method(0.5, method="bogus")


def test_auto_method_cells_agree(device, rng, monkeypatch):
    """Small r: the planner routes to the cell-list grid; the same answers."""
    monkeypatch.setattr(plan, "CELLS_MIN_PAIRS", {"gpu": 0, "cpu": 0})
    X = uniform(rng, 1500, 3)
    r = 0.05
    assert plan.choose_method(plan.expected_fraction(r, np.ones(3))) == "cells"
    check_count(clkernels.pair_count(X, r, device=device), ref_dist(X), r)
    box = np.ones(3)
    check_count(clkernels.pair_count(X, r, box=box, device=device), ref_dist(X, box=box), r)
    got, e = clkernels.distance_histogram(X, 5, (0.0, r), device=device)
    check_hist(got, ref_dist(X), e)


# ------------------------------------------------------------------ bad input

def test_bad_inputs(device, rng):
    X = uniform(rng, 20, 3)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clkernels.pair_count(bad, 0.1, device=device)
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or inf"):
        clkernels.distance_histogram(bad, 4, device=device)
    with pytest.raises(ValueError):
        clkernels.pair_count(X, -0.1, device=device)
    with pytest.raises(ValueError):
        clkernels.pair_count(X, float("nan"), device=device)
    with pytest.raises(ValueError):
        clkernels.distance_histogram(X, 0, device=device)
    with pytest.raises(ValueError):
        clkernels.distance_histogram(X, -3, device=device)
    with pytest.raises(ValueError):
        clkernels.distance_histogram(X, [0.0, 0.5, 0.2], device=device)
    with pytest.raises(ValueError):
        clkernels.distance_histogram(X, 4, range=(1.0, 0.5), device=device)
    with pytest.raises(ValueError, match="dimensions"):
        clkernels.pair_count(X, 0.1, y=uniform(rng, 5, 2), device=device)
    with pytest.raises(ValueError):
        clkernels.pair_count(np.zeros((4, 9), np.float32), 0.1, device=device)
    with pytest.raises(ValueError):
        clkernels.pair_count(np.zeros((2, 2, 2), np.float32), 0.1, device=device)
    with pytest.raises(TypeError):
        clkernels.pair_count(np.zeros((4, 2), np.complex64), 0.1, device=device)
    with pytest.raises(ValueError):
        clkernels.pair_count(X, 0.1, box=[1.0, -1.0, 1.0], device=device)
    with pytest.raises(ValueError):
        clkernels.pair_count(X, 0.1, box=[1.0, 1.0], device=device)
    with pytest.raises(ValueError):
        clkernels.pair_count(X, 0.1, device=device, variant="bogus")
    with pytest.raises(ValueError):
        clkernels.pair_count(X, 0.1, device=device, variant="shuffle", vec=4)
    with pytest.raises(TypeError):
        clkernels.pair_count(X, 0.1, device=device, bogus_option=1)
    with pytest.raises(ValueError):
        clkernels.pair_count(X, 0.1, device=device, output="local")      # histograms only
    with pytest.raises(ValueError):
        clkernels.distance_histogram(X, 4, device=device, output="bogus")
    with pytest.raises(ValueError):
        clkernels.distance_histogram(X, 4, device=device, copies=3)
    with pytest.raises(ValueError):
        clkernels.rdf(X, 4, range=(0, 0.5), device=device)          # no box
    with pytest.raises(ValueError):
        clkernels.TwoBody(output=clkernels.Histogram(4), distance="return a[0] - b[0];")
    with pytest.raises(TypeError):
        clkernels.TwoBody(distance="a[0]")


def test_int64_totals_gpu(device):
    """More than 2^32 pairs: the totals are 64-bit (GPU only: ~9e9 pairs)."""
    if not device.is_gpu:
        pytest.skip("too many pairs for a CPU device in CI")
    n = 1 << 17
    X = np.random.default_rng(5).random((n, 3)).astype(np.float32)
    total = n * (n - 1) // 2
    assert total > 1 << 32
    assert clkernels.pair_count(X, 2.0, device=device, method="allpairs") == total
    c, _ = clkernels.distance_histogram(X, 2, device=device, output="local", method="allpairs")
    assert c.sum() == total and c.max() > 1 << 32     # (global atomics on 2 bins: too slow)


def test_integer_input_converted(device):
    X = np.array([[0, 0], [3, 4], [6, 8]])
    assert clkernels.pair_count(X, 5.5, device=device) == 2


def test_exact_edge_ties_follow_numpy(device):
    """Lattice points: distances 1, 2, 3 fall exactly on edges of width-1 bins;
    numpy puts them in the upper bin, in both precisions."""
    X = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0], [0, 1, 0]], np.float64)
    d = ref_dist(X)
    dtypes = [np.float32] + ([np.float64] if device.fp64 else [])
    for dt in dtypes:
        for opts in (dict(output="local"), dict(output="global"), {}):
            got, e = clkernels.distance_histogram(X.astype(dt), 4, range=(0.0, 4.0), device=device,
                                                  method="allpairs", **opts)
            check_hist(got, d, e)
        e = np.array([0.0, 1.0, 2.0, 3.0])        # non-uniform edges; 3.0 closes the last bin
        got, _ = clkernels.distance_histogram(X.astype(dt), e, device=device, method="allpairs")
        check_hist(got, d, e)


def test_inexact_ties_at_zero_do_not_depend_on_order(device, rng):
    """exact=False: a pair at d == r counts wherever it falls (duplicates far
    apart in the input or adjacent, diagonal tiles or not)."""
    b = rng.random((1500, 3)).astype(np.float32)
    for x in (np.concatenate([b, b]), np.repeat(b, 2, axis=0)):
        for exact in (True, False):
            assert clkernels.pair_count(x, 0.0, method="allpairs", exact=exact, device=device) == 1500


def test_progress(device, capsys):
    """progress=: a callable sees the launches' block pairs up to the total,
    True reports on stderr (tqdm's bar or, without tqdm, a line per tenth),
    False nothing; the results do not change."""
    x = np.random.default_rng(3).random((3000, 3)).astype(np.float32)
    ref = clkernels.pair_count(x, 0.2, method="allpairs", device=device)
    seen = []
    got = clkernels.pair_count(x, 0.2, method="allpairs", device=device, ppw=1, wg_size=64, launch_blocks=4,
                               progress=lambda done, total: seen.append((done, total)))
    assert got == ref
    assert len(seen) > 1 and seen[-1][0] == seen[-1][1]
    assert all(a[0] < b[0] and a[1] == b[1] for a, b in zip(seen, seen[1:]))
    h, _ = clkernels.distance_histogram(x, 8, device=device, method="allpairs", progress=True)
    assert int(h.sum()) == 3000 * 2999 // 2
    assert "clkernels twobody.histogram" in capsys.readouterr().err
    clkernels.distance_histogram(x, 8, device=device, method="allpairs", progress=False)
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="progress"):
        clkernels.pair_count(x, 0.2, method="allpairs", device=device, progress="yes")
