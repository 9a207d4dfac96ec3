"""The dask scale-out tests' cluster (tests/test_distributed*.py): a
LocalCluster of 2 worker processes (one thread each) pinned to one CPU device
-- the first of CLKERNELS_TEST_DEVICES, else PoCL where present, else the
default device -- and the helpers both files compare results with. A test
module imports the fixtures it uses (``client`` is module-scoped: a cluster a
module)."""

import os

import numpy as np
import pytest

import clkernels

distributed = pytest.importorskip("distributed")


def _spec():
    spec = os.environ.get("CLKERNELS_TEST_DEVICES", "").split(",")[0].strip()
    if spec:
        return spec
    return "pocl" if any(d.is_pocl for d in clkernels.devices()) else "0:0"


SPEC = _spec()


def _two_workers(**client_kw):
    cluster = clkernels.local_cluster([SPEC, SPEC], dashboard_address=":0")
    c = distributed.Client(cluster, **client_kw)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def client():
    yield from _two_workers()


@pytest.fixture
def own_client():
    """A cluster of its own for a test that kills workers: the restarts stay
    in it (in clean CI runs on the 2-core machine, the fourth SIGKILL in the
    shared cluster lost the other worker's nanny: 1 of 2 workers came back)."""
    yield from _two_workers(set_as_default=False)


@pytest.fixture(scope="module")
def dev():
    return clkernels.Device(SPEC)


def pair_set(i, j):
    return sorted(zip(i.tolist(), j.tolist()))


def random_boxes(rng, n):
    lo = rng.random((n, 2)).astype(np.float32)
    return np.concatenate([lo, lo + 0.05 * rng.random((n, 2)).astype(np.float32)], axis=1)


def same_result(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
