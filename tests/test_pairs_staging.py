"""``clkernels.pairs_within``'s page allocator as the grid's row kernel runs it:
the pool's sampled estimate (every writer sampled: the exact count) and
grouped staging (a sub-group's writers share one buffer; the pool fills
densely) under tiny pools, on every device and, where a device offers
several, every sub-group back end ('local': the in-step ballot form; 'khr':
the local atomic form). The reference and checks are test_pairs.py's."""

import numpy as np
import pytest

import clkernels
from clkernels.host.core.device import Device
from helpers import clustered, uniform
from test_pairs import Progress, check, reference


@pytest.mark.parametrize("d,periodic,cross", [(1, False, False), (2, True, False), (3, False, True),
                                              (4, True, True)])
def test_sample_counts_every_pair_when_every_writer_is_sampled(device, rng, monkeypatch, d, periodic, cross):
    """The pool's estimate: below SAMPLE_WRITERS points every writer is sampled,
    each one's stencil rows on work-items of their own (the kernel's row
    parts), so the estimate is the exact number of pairs."""
    from clkernels.host.cellgrid import pairs as CP

    seen = []
    real = CP.collect

    def spy(*a, estimate, **k):
        def est():
            seen.append(estimate())
            return seen[-1]
        return real(*a, estimate=est, **k)

    monkeypatch.setattr(CP, "collect", spy)
    box = np.full(d, 1.0) if periodic else None
    X = uniform(rng, 700, d)
    Y = uniform(rng, 300, d) if cross else None
    r = 0.2 if d > 2 else 0.05
    got = clkernels.pairs_within(X, r, y=Y, box=box, device=device)
    n = check(got, X, r, Y, box)
    assert n > 100 and seen == [n], (seen, n)


def _sg_device(device, sg_backend):
    return device if sg_backend == device.sg_backend else Device(device.cl_device, sg_backend=sg_backend)


def _two_clumps(g=40):
    X = np.full((2 * g, 2), 0.5, np.float32)
    X[g:] = 0.75
    return X


@pytest.mark.parametrize("stage", ["auto", 2, 16])
def test_one_record_pool(device, sg_backend, stage):
    """A pool of one record (smaller than any group's buffer): every round
    places exactly one record (the first flush's first), the others are
    taken back, and every pair comes out once."""
    dev = _sg_device(device, sg_backend)
    X = _two_clumps(6)                   # 2 * 15 pairs, all writers' records in one buffer
    ref = reference(X, 0.1)
    prog = Progress()
    n = check(clkernels.pairs_within(X, 0.1, device=dev, npages=1, page=1, stage=stage, progress=prog), X, 0.1,
              ref=ref)
    prog.check(n)
    assert prog.calls == list(range(1, n + 1)), prog.calls


@pytest.mark.parametrize("pool", [dict(npages=3, page=5), dict(npages=1, page=37), dict(npages=7, page=1)])
@pytest.mark.parametrize("stage", ["auto", 2, 16])
def test_dense_rounds_are_full(device, sg_backend, rng, pool, stage):
    """The dense pool: every round but the last places exactly npages * page
    records (a round that places fewer lost room; more: an overrun), with
    cut runs in the middle of writers' records (identical points and
    clusters)."""
    dev = _sg_device(device, sg_backend)
    slots = pool["npages"] * pool["page"]
    for X, r in ((_two_clumps(40), 0.1), (clustered(rng, 300, 2, np.float32), 0.02)):
        ref = reference(X, r)
        prog = Progress()
        n = check(clkernels.pairs_within(X, r, device=dev, progress=prog, stage=stage, **pool), X, r, ref=ref)
        prog.check(n)
        steps = np.diff([0] + prog.calls)
        assert (steps[:-1] == slots).all() and 0 < steps[-1] <= slots, (slots, steps[:20])


def test_staged_max_device_bytes(device, sg_backend, rng):
    """max_device_bytes with the dense staged pool (the existing case runs
    stage=0 only): rounds of at most the bound's records, every pair once."""
    dev = _sg_device(device, sg_backend)
    X = clustered(rng, 600, 2, np.float32)
    ref = reference(X, 0.02)
    prog = Progress()
    n = check(clkernels.pairs_within(X, 0.02, device=dev, page=8, max_device_bytes=2 * 8 * 24, stage=4, progress=prog),
              X, 0.02, ref=ref)
    prog.check(n)
    assert len(prog.calls) > 1 and (np.diff([0] + prog.calls) <= 16).all()
