"""README.md stays true to what runs: every ```python block is executed, in
order, in one namespace (later blocks use earlier names), on the default
device, in a fresh interpreter. The sizes are the README's own (small enough
for a CPU device). A block that imports an optional extra this machine
lacks (dask, MDAnalysis, ...) is reported and skipped; CI installs them all."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = """
import re, sys
OPTIONAL = {"dask", "distributed", "MDAnalysis", "matplotlib", "scipy", "torch", "shapely"}
src = open(sys.argv[1], encoding="utf-8").read()
ns = {"__name__": "__readme__"}
for k, block in enumerate(re.findall(r"```python\\n(.*?)```", src, re.S)):
    try:
        exec(compile(block, f"README.md python block {k + 1}", "exec"), ns)
    except ModuleNotFoundError as e:      # an optional extra this machine lacks: say so, go on
        if (e.name or "").split(".")[0] not in OPTIONAL:
            raise
        print(f"README block {k + 1} skipped: {e.name} is not installed")
print("README blocks:", k + 1)
"""


@pytest.mark.slow
def test_readme_python_blocks_run():
    path = os.path.join(ROOT, "README.md")
    with open(path, encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) >= 5, "README.md lost its python examples"
    r = subprocess.run([sys.executable, "-c", RUNNER, path], capture_output=True, text=True, timeout=900,
                       cwd=ROOT)
    assert r.returncode == 0, f"a README block failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    assert f"README blocks: {len(blocks)}" in r.stdout
