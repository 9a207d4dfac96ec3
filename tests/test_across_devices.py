"""Every OpenCL implementation found, one result: the same random problems on
each device (PoCL, Intel's CPU runtime, NVIDIA, ...) give identical counts,
histograms and sorted outputs (and equal the float64 reference)."""

import numpy as np
import pytest

import clkernels
from conftest import DEVICES
from helpers import distances, histogram

pytestmark = pytest.mark.skipif(len(DEVICES) < 2, reason="one OpenCL device found: nothing to compare")


def _all(fn):
    return [fn(d) for d in DEVICES]


def _eq(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":            # identical bits, NaN included
        return a.dtype == b.dtype and np.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))
    return np.array_equal(a, b)


def _same(results):
    first = results[0]
    for r in results[1:]:
        if isinstance(first, tuple):
            assert all(_eq(a, b) for a, b in zip(first, r))
        else:
            assert _eq(first, r)


def test_two_body_identical(rng):
    x = rng.random((400, 3)).astype(np.float32)
    y = rng.random((150, 3)).astype(np.float32)
    d = distances(x)
    r = float(np.sort(d)[1000])                      # a radius on a pair's distance: a tie
    counts = _all(lambda dev: clkernels.pair_count(x, r, device=dev))
    _same(counts)
    assert counts[0] == int((d <= r).sum())
    cross = _all(lambda dev: clkernels.pair_count(x, [0.1, r, 0.4], y=y, device=dev))
    _same(cross)
    hists = _all(lambda dev: clkernels.distance_histogram(x, 32, device=dev)[0])
    _same(hists)
    e = clkernels.distance_histogram(x, 32, device=DEVICES[0])[1]
    assert (hists[0] == histogram(d, e)).all()
    box = np.ones(3)
    _same(_all(lambda dev: clkernels.pair_count(x, 0.2, box=box, device=dev, method="cells")))


def test_grid_identical(rng):
    x = rng.random((600, 2)).astype(np.float64)
    res = _all(lambda dev: clkernels.grid_histogram(clkernels.Grid(x, 0.05, device=dev),
                                                    np.linspace(0, 0.05, 9))
               if dev.fp64 else None)
    _same([r for r in res if r is not None])


def test_segmented_sort_identical(rng):
    lens = rng.integers(0, 700, 60)
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    keys = rng.standard_normal(int(off[-1])).astype(np.float32)
    keys[::17] = np.nan
    vals = np.arange(len(keys), dtype=np.uint32)
    res = _all(lambda dev: clkernels.segmented_sort(keys, off, vals, device=dev))
    _same(res)
    ref = np.concatenate([a + np.argsort(keys[a:b], kind="stable") for a, b in zip(off[:-1], off[1:])])
    assert (res[0][1] == ref).all()
