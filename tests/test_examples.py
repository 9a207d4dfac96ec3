"""The user-facing examples run end to end (small settings)."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def test_rdf_water_synthetic(device, capsys, monkeypatch, tmp_path):
    import rdf_water

    monkeypatch.setattr(rdf_water, "HERE", str(tmp_path))       # the PNG goes to a scratch folder
    monkeypatch.setattr(rdf_water.clkernels, "default_device", lambda: device)
    assert rdf_water.main(["--synthetic", "--rmax", "6", "--bins", "30"]) == 0
    out = capsys.readouterr().out
    assert "O-O (synthetic, no structure): mean g over r > 3 A = 0.9" in out or \
        "O-O (synthetic, no structure): mean g over r > 3 A = 1.0" in out
    pytest.importorskip("matplotlib")
    assert os.path.exists(tmp_path / "rdf_water.png")
