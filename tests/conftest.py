"""Test fixtures: every OpenCL device found (CLKERNELS_TEST_DEVICES narrows it).

CLKERNELS_TEST_DEVICES is a comma-separated list of device specs as accepted
by clkernels.Device ("pocl", "nvidia", "0:1").
"""

import os

import numpy as np
import pytest

import clkernels
from clkernels.host.core.device import Device, select_cl_device


def _test_devices():
    spec = os.environ.get("CLKERNELS_TEST_DEVICES")
    if spec:
        return [Device(select_cl_device(s)) for s in spec.split(",") if s.strip()]
    return clkernels.devices()


DEVICES = _test_devices()


def _id(d):
    if d.is_nvidia:
        return "nvidia"
    if d.is_pocl:
        return "pocl"
    if "intel" in d.platform_name.lower():
        return "intel"
    return d.name.split()[0].lower()


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        if not DEVICES:
            pytest.fail("no OpenCL device found: " + clkernels.host.core.device.NO_PLATFORM_HELP)
        if "sg_backend" in metafunc.fixturenames:
            pairs = [(d, b) for d in DEVICES for b in d.sg_backends]
            metafunc.parametrize(("device", "sg_backend"), pairs,
                                 ids=[f"{_id(d)}-{b}" for d, b in pairs])
        else:
            metafunc.parametrize("device", DEVICES, ids=[_id(d) for d in DEVICES])


@pytest.fixture
def rng(request):
    """A fresh random generator per test; the seed is printed on failure and
    CLKERNELS_TEST_SEED=<seed> replays it."""
    seed = int(os.environ.get("CLKERNELS_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
    print(f"rng seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def _kernels_not_direct(request, monkeypatch):
    """Small one-radius counts take the direct kernel by default (one launch,
    every distance in double): the suite's small inputs would test it instead
    of the all-pairs and grid kernels. Off except in tests marked ``direct``,
    which test it (and its automatic choice) explicitly."""
    if request.node.get_closest_marker("direct") is None:
        from clkernels.host.twobody import plan

        monkeypatch.setattr(plan, "DIRECT_MAX_PAIRS", 0)


#: test files that start dask clusters: one xdist worker runs them in turn
DASK_FILES = ("test_distributed.py", "test_distributed_transport.py")


@pytest.hookimpl(tryfirst=True)     # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Tests marked ``checked`` (the kernels under Oclgrind, minutes long) run only
    when asked for: ``-m checked``. Under pytest-xdist (``--dist loadgroup``,
    setup.cfg) a file's tests share one worker, so the kernels it builds are
    compiled once (PoCL compiles a kernel at its first launch: most of a cold
    run's time); the files that start dask clusters share one worker; each
    checked test (an Oclgrind process of its own) goes to any worker."""
    run_checked = "checked" in (config.getoption("-m") or "")
    skip = pytest.mark.skip(reason="under a memory checker: run with -m checked")
    for item in items:
        if "checked" in item.keywords:
            if not run_checked:
                item.add_marker(skip)
            continue
        name = item.path.name
        item.add_marker(pytest.mark.xdist_group("dask" if name in DASK_FILES else name))


@pytest.fixture
def arena_state(monkeypatch):
    """The dask worker arena's state (``host.distributed.arena``), empty for
    one test: this process stands for a worker."""
    import collections

    from clkernels.host.core import hostmem
    from clkernels.host.distributed import arena
    for name, v in (("_free", hostmem.Blocks()), ("_lent", {}), ("_running", collections.Counter()),
                    ("_ended", collections.OrderedDict())):
        monkeypatch.setattr(arena, name, v)
    return arena
