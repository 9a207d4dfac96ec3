"""Device selection, facts, template building and the info command."""

import io
import os

import numpy as np
import pyopencl as cl
import pytest

import clkernels
from clkernels.__main__ import info
from clkernels.host.core import build
from clkernels.host.core import device as dev
from clkernels.host.core import icd


def test_facts(device):
    assert device.compute_units >= 1 and device.max_work_group_size >= 1
    assert device.local_mem_size > 0
    assert device.sg_backend in device.sg_backends and "local" in device.sg_backends
    assert device.preferred_wg_multiple >= 1
    if device.is_nvidia and device.is_gpu:
        assert device.sg_backend == "nv"
    if device.is_pocl:
        assert device.sg_backend == "local"


def test_select_by_index_and_substring(device, monkeypatch):
    found = dev._all_cl_devices()
    pi, di, p, d = next(x for x in found if x[3] == device.cl_device)
    assert dev.select_cl_device(f"{pi}:{di}") == d
    assert dev.select_cl_device(device.name.upper()[:12]) is not None
    monkeypatch.setenv("CLKERNELS_DEVICE", f"{pi}:{di}")
    assert dev.select_cl_device() == d
    assert clkernels.Device().cl_device == d


def test_unknown_device_spec(monkeypatch):
    monkeypatch.setenv("CLKERNELS_DEVICE", "no-such-device-xyz")
    with pytest.raises(clkernels.NoDeviceError, match="no-such-device-xyz"):
        clkernels.Device()
    with pytest.raises(clkernels.NoDeviceError, match="found"):
        clkernels.Device("9:9")


def test_no_platform(monkeypatch):
    def none():
        raise cl.LogicError("clGetPlatformIDs", cl.status_code.PLATFORM_NOT_FOUND_KHR, "none")
    monkeypatch.setattr(cl, "get_platforms", none)
    with pytest.raises(clkernels.NoDeviceError, match=r"clkernels\[pocl\]"):
        dev.select_cl_device()
    out = io.StringIO()
    assert info(out) == 1
    assert "pip install" in out.getvalue()


def test_wrap_user_queue(device):
    q = cl.CommandQueue(device.context)
    d = clkernels.Device(queue=q)
    assert d.queue is q and d.context == device.context
    assert dev.as_device(q).queue is q


def test_forced_backend_must_exist(device):
    assert clkernels.Device(device.cl_device, sg_backend="local").sg_backend == "local"
    missing = next((b for b in dev.SG_BACKENDS if b not in device.sg_backends), None)
    if missing is None:
        pytest.skip("device supports every back end")
    with pytest.raises(clkernels.DeviceCapabilityError, match=missing):
        clkernels.Device(device.cl_device, sg_backend=missing)


def test_build_error_carries_log_and_source(device):
    with pytest.raises(clkernels.BuildError) as ei:
        build.build(device, "selftest.cl.mako", "broken", {})
    e = ei.value
    assert "this_name_is_undeclared" in e.log
    assert os.path.exists(e.source_path)
    with open(e.source_path) as f:
        assert "this_name_is_undeclared" in f.read()
    assert e.source_path in str(e)


def test_missing_template_parameter(device):
    with pytest.raises(clkernels.BuildError, match="wg_size"):
        build.build(device, "selftest.cl.mako", "subgroups", {})


def test_builds_are_memoized(device):
    a = build.build(device, "copy.cl.mako", "copy", {"wg_size": 64})
    b = build.build(device, "copy.cl.mako", "copy", {"wg_size": 64})
    c = build.build(device, "copy.cl.mako", "copy", {"wg_size": 32})
    assert a is b and a is not c


def test_info_lists_devices():
    out = io.StringIO()
    assert info(out) == 0
    text = out.getvalue()
    for d in clkernels.devices():
        assert d.name in text


def test_unregistered_nvidia_icd(tmp_path, monkeypatch):
    lib = tmp_path / "libnvidia-opencl.so.1"
    lib.write_text("")
    vendors = tmp_path / "vendors"
    vendors.mkdir()
    (vendors / "pocl.icd").write_text("libpocl.so.2\n")
    monkeypatch.setattr(icd, "_NVIDIA_LIB_GLOBS", (str(lib),))
    monkeypatch.setenv("OCL_ICD_VENDORS", str(vendors))
    assert icd.find_unregistered_nvidia_icd() == str(lib)
    assert "OCL_ICD_VENDORS" in icd.nvidia_icd_fix(str(lib))
    (vendors / "nvidia.icd").write_text(str(lib) + "\n")
    assert icd.find_unregistered_nvidia_icd() is None


def test_dtype_check(device):
    device.check_dtype(np.float32)
    if not device.fp64:
        with pytest.raises(clkernels.DeviceCapabilityError):
            device.check_dtype(np.float64)


class _FakeDev:
    def __init__(self, name):
        self.name, self.driver_version = name, "1.0"


class _FakePlatform:
    def __init__(self, name, devices):
        self.name, self.vendor, self.version, self._devs = name, "v", "OpenCL 3.0", devices

    def get_devices(self):
        return self._devs


def test_same_model_devices_kept_runtime_named_twice_dropped(monkeypatch):
    """Two GPUs of one model share every name and version: both are listed;
    one runtime named by two vendors files (two equal platforms) once."""
    gpus = [_FakeDev("H100"), _FakeDev("H100")]
    twin = [_FakeDev("cpu")]
    plats = [_FakePlatform("NVIDIA CUDA", gpus), _FakePlatform("Intel", twin),
             _FakePlatform("Intel", [_FakeDev("cpu")])]
    monkeypatch.setattr(cl, "get_platforms", lambda: plats)
    found = dev._all_cl_devices()
    assert [(pi, di, d) for pi, di, _, d in found] == [(0, 0, gpus[0]), (0, 1, gpus[1]), (1, 0, twin[0])]


SAME_MODEL = r"""
import numpy as np, clkernels
devs = [d for d in clkernels.devices() if d.is_pocl]
assert len(devs) == 2, devs
rng = np.random.default_rng(5)
x = rng.random((1500, 3)).astype(np.float32)
d = np.sqrt(((x[:, None, :].astype(np.float64) - x[None]) ** 2).sum(-1))[np.triu_indices(len(x), 1)]
for r in (0.1, 0.3):
    assert clkernels.pair_count(x, r, device=devs, method="allpairs") == int((d <= r).sum())
h, e = clkernels.distance_histogram(x, 12, (0.0, 1.5), device=devs)
assert np.array_equal(h, np.histogram(d, 12, (0.0, 1.5))[0])
import warnings
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    assert clkernels.pair_count(x, 0.1, device=[devs[0], devs[0]], method="allpairs") == int((d <= 0.1).sum())
assert any("more than once" in str(m.message) for m in w), [str(m.message) for m in w]
print("ok")
"""


@pytest.mark.skipif(not any(d.is_pocl for d in clkernels.devices()), reason="needs PoCL")
def test_two_devices_of_one_model():
    """PoCL made to show two identical CPU devices (POCL_DEVICES): both are
    found, a call spread over them equals the float64 reference, and a list
    naming one device twice is warned of."""
    import subprocess
    import sys
    env = dict(os.environ, POCL_DEVICES="pthread pthread", CLKERNELS_DEVICE="pocl")
    res = subprocess.run([sys.executable, "-c", SAME_MODEL], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stdout[-2000:] + res.stderr[-4000:]
