"""Every kernel family under Oclgrind, a simulator that reports out-of-bounds
accesses, data races and reads of uninitialised memory: run with
``python -m pytest -q tests -m checked`` (``.ci/run`` does, after the test
suite). Each family runs ``tests/checked_workload.py`` under
``oclgrind --data-races --uninitialized``; any report, or a result that
differs from the float64 reference, fails the test."""

import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.checked

HERE = os.path.dirname(os.path.abspath(__file__))
#: what Oclgrind prints when it finds something (its plugins' message heads)
REPORTS = ("Invalid read", "Invalid write", "Uninitialized value", "Controlflow depends on uninitialized",
           "Read-write data race", "Write-write data race", "Work-group divergence", "Oclgrind - ",
           "OCLGRIND FATAL ERROR")


@pytest.mark.parametrize("family", ["copy", "twobody", "cellgrid", "pairs", "pairs_order", "pairs_staged_auto",
                                    "pairs_staged_2", "pairs_staged_4x3", "pairs_staged_1x1", "theta", "segsort",
                                    "selfjoin", "selfjoin_tiled", "rectjoin",
                                    "segsort_forms", "paircounts"])
def test_family_under_oclgrind(family, tmp_path):
    exe = shutil.which("oclgrind")
    if exe is None:
        pytest.skip("oclgrind is not installed (Debian: apt-get install oclgrind)")
    env = dict(os.environ, CLKERNELS_DEVICE="oclgrind", CLKERNELS_TUNE_CACHE=str(tmp_path / "tuning.json"))
    env.pop("CLKERNELS_TEST_DEVICES", None)
    # (no --check-api: pyopencl's build cache queries device infos Oclgrind does not know)
    p = subprocess.run([exe, "--data-races", "--uninitialized", sys.executable,
                        os.path.join(HERE, "checked_workload.py"), family],
                       capture_output=True, text=True, env=env, timeout=1800)
    out = p.stdout + p.stderr
    found = [line for line in out.splitlines() if line.startswith(REPORTS)]
    assert not found, f"{len(found)} reports under Oclgrind, the first:\n" + "\n".join(
        out.splitlines()[:60])
    assert p.returncode == 0, out[-3000:]
    assert "device: <clkernels.Device Oclgrind" in out
