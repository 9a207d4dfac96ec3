"""clkernels.mdanalysis.InterRDF against MDAnalysis's own InterRDF on the same
in-memory trajectories (skipped without MDAnalysis: the clkernels[md] extra)."""

import warnings

import numpy as np
import pytest

mda = pytest.importorskip("MDAnalysis")
from MDAnalysis.analysis.rdf import InterRDF as MDInterRDF  # noqa: E402
from MDAnalysis.coordinates.memory import MemoryReader  # noqa: E402

from clkernels.mdanalysis import InterRDF  # noqa: E402


def water_like(rng, nres=60, frames=4, side=14.0, angles=(90.0, 90.0, 90.0)):
    """A universe of nres 3-atom residues (OW, HW1, HW2) at random positions
    in boxes that change per frame, in memory."""
    n = 3 * nres
    u = mda.Universe.empty(n, n_residues=nres, atom_resindex=np.repeat(np.arange(nres), 3), trajectory=True)
    u.add_TopologyAttr("name", ["OW", "HW1", "HW2"] * nres)
    sides = side * (1 + 0.1 * rng.random((frames, 3)))
    coords = (rng.random((frames, n, 3)) * sides[:, None, :]).astype(np.float32)
    dims = np.concatenate([sides, np.broadcast_to(angles, (frames, 3))], axis=1).astype(np.float32)
    u.load_new(coords, format=MemoryReader, dimensions=dims)
    return u


CASES = [
    ("OW", "OW", {}),
    ("all", "all", dict(exclusion_block=(3, 3))),
    ("OW", "all", dict(exclude_same="residue")),
    ("all", "OW", dict(norm="density")),
    ("OW", "all", dict(norm="none", range=(1.0, 6.0), nbins=20)),
]


@pytest.mark.parametrize("sel1, sel2, kw", CASES)
def test_interrdf_matches_mdanalysis(device, rng, sel1, sel2, kw):
    u = water_like(rng)
    g1, g2 = (u.select_atoms(f"name {s}") if s != "all" else u.atoms for s in (sel1, sel2))
    kw = dict(kw)
    kw.setdefault("range", (0.0, 6.5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = MDInterRDF(g1, g2, **kw).run()
    got = InterRDF(g1, g2, device=device, **kw).run()
    np.testing.assert_array_equal(got.results.count, ref.results.count)
    np.testing.assert_array_equal(got.results.edges, ref.results.edges)
    np.testing.assert_array_equal(got.results.bins, ref.results.bins)
    np.testing.assert_allclose(got.results.rdf, ref.results.rdf, rtol=1e-12)
    assert got.n_frames == ref.n_frames == 4
    assert ref.results.count.sum() > 0


@pytest.mark.parametrize("angles", [(90.0, 90.0, 60.0), (70.0, 80.0, 65.0), (60.0, 60.0, 90.0)])
def test_interrdf_triclinic(device, rng, angles):
    u = water_like(rng, frames=3, angles=angles)
    O = u.select_atoms("name OW")
    kw = dict(range=(0.0, 4.5), nbins=30, exclusion_block=(3, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = MDInterRDF(u.atoms, u.atoms, **kw).run()
        ref_o = MDInterRDF(O, u.atoms, range=(0.0, 4.5), nbins=30, exclude_same="residue").run()
    got = InterRDF(u.atoms, u.atoms, device=device, **kw).run()
    np.testing.assert_array_equal(got.results.count, ref.results.count)
    np.testing.assert_allclose(got.results.rdf, ref.results.rdf, rtol=1e-12)
    got_o = InterRDF(O, u.atoms, range=(0.0, 4.5), nbins=30, exclude_same="residue", device=device).run()
    np.testing.assert_array_equal(got_o.results.count, ref_o.results.count)
    assert ref.results.count.sum() > 0


def test_interrdf_frames_and_errors(device, rng):
    u = water_like(rng, frames=5)
    O = u.select_atoms("name OW")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = MDInterRDF(O, O, range=(0.0, 6.0)).run(start=1, stop=5, step=2)
        ref2 = MDInterRDF(O, O, range=(0.0, 6.0)).run(frames=[0, 3])
    got = InterRDF(O, O, range=(0.0, 6.0), device=device).run(start=1, stop=5, step=2)
    np.testing.assert_array_equal(got.results.count, ref.results.count)
    seen = []
    got2 = InterRDF(O, O, range=(0.0, 6.0), device=device).run(frames=[0, 3],
                                                               progress=lambda d, t: seen.append((d, t)))
    np.testing.assert_array_equal(got2.results.count, ref2.results.count)
    assert seen == [(1, 2), (2, 2)]
    tri = water_like(rng, frames=1, angles=(90.0, 90.0, 60.0))
    with pytest.raises(ValueError, match="perpendicular width"):
        InterRDF(tri.atoms, tri.atoms, range=(0.0, 7.0), device=device).run()
    with pytest.raises(ValueError, match="exclude_same must be"):
        InterRDF(O, O, exclude_same="chain")
    with pytest.raises(ValueError, match="cannot be used together"):
        InterRDF(O, O, exclude_same="residue", exclusion_block=(1, 1))
    with pytest.raises(TypeError, match="AtomGroup"):
        InterRDF(np.zeros((3, 3)), O)
