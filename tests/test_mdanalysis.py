"""clkernels.mdanalysis.InterRDF against MDAnalysis's own InterRDF on the same
in-memory trajectories (skipped without MDAnalysis: the clkernels[md] extra).

Counts equal a float64 evaluation computed here exactly; MDAnalysis
evaluates distances its own way, so its counts may differ from ours only by
pairs whose float64 distance lies within rounding (1e-5 relative) of a bin
edge, and its normalisation must equal ours."""

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
    u = mda.Universe.empty(n, n_residues=nres, n_segments=2, atom_resindex=np.repeat(np.arange(nres), 3),
                           residue_segindex=(np.arange(nres) >= nres // 2).astype(int), trajectory=True)
    u.add_TopologyAttr("name", ["OW", "HW1", "HW2"] * nres)
    u.add_TopologyAttr("chainIDs", np.repeat(["A", "B", "C"], -(-n // 3))[:n])     # string ids
    u.add_TopologyAttr("segids", ["S1", "S2"])
    sides = side * (1 + 0.1 * rng.random((frames, 3)))
    coords = (rng.random((frames, n, 3)) * sides[:, None, :]).astype(np.float32)
    dims = np.concatenate([sides, np.broadcast_to(angles, (frames, 3))], axis=1).astype(np.float32)
    u.load_new(coords, format=MemoryReader, dimensions=dims)
    return u


CASES = [
    ("OW", "OW", {}),
    ("all", "all", dict(exclude_same="chain")),
    ("all", "OW", dict(exclude_same="segment")),
    ("all", "all", dict(exclusion_block=(3, 3))),
    ("OW", "all", dict(exclude_same="residue")),
    ("all", "OW", dict(norm="density")),
    ("OW", "all", dict(norm="none", range=(1.0, 6.0), nbins=20)),
]


def float64_reference(u, g1, g2, edges, block=None, attr=None, frames=slice(None)):
    """(counts, pairs within 1e-5 relative of an edge) over all frames: every
    (i of g1, j of g2) by numpy in float64 from the float32 positions, the
    minimum image of MDAnalysis's box vectors (reduced along c, b, a), pairs
    of an exclusion block or of equal ``attr`` skipped."""
    from MDAnalysis.lib.mdamath import triclinic_vectors

    counts, near = np.zeros(len(edges) - 1, np.int64), 0
    ia, ib = np.meshgrid(np.arange(len(g1)), np.arange(len(g2)), indexing="ij")
    keep = np.ones(ia.shape, bool)
    if block is not None:
        keep = ia // block[0] != ib // block[1]
    if attr is not None:
        keep = np.asarray(getattr(g1, attr))[ia] != np.asarray(getattr(g2, attr))[ib]
    for ts in u.trajectory[frames]:
        H = np.asarray(triclinic_vectors(ts.dimensions), np.float64)
        d = g1.positions.astype(np.float64)[:, None, :] - g2.positions.astype(np.float64)[None, :, :]
        for k in (2, 1, 0):                            # along c, then b, then a
            n = np.rint(d[..., k] / H[k, k])
            for m in range(k + 1):
                d[..., m] = d[..., m] - n * H[k, m]
        r = np.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1] + d[..., 2] * d[..., 2])[keep]
        counts += np.histogram(r, edges)[0]
        near += int(np.sum(np.min(np.abs(r[:, None] - edges[None, :]), axis=1) <= 1e-5 * np.maximum(r, 1e-3)))
    return counts, near


def check_against(got, ref, f64, near):
    np.testing.assert_array_equal(got.results.count, f64)          # exact: the float64 evaluation
    assert np.abs(ref.results.count - f64).sum() <= near           # MDAnalysis: only pairs at an edge move
    np.testing.assert_array_equal(got.results.edges, ref.results.edges)
    np.testing.assert_array_equal(got.results.bins, ref.results.bins)
    with np.errstate(divide="ignore", invalid="ignore"):            # the same normalisation
        np.testing.assert_allclose(np.where(got.results.count > 0, got.results.count / got.results.rdf, 0),
                                   np.where(ref.results.count > 0, ref.results.count / ref.results.rdf, 0),
                                   rtol=1e-12)


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
    attr = {"chain": "chainIDs", "segment": "segindices", "residue": "resindices"}.get(kw.get("exclude_same"))
    check_against(got, ref, *float64_reference(u, g1, g2, got.results.edges, kw.get("exclusion_block"), attr))
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
    check_against(got, ref, *float64_reference(u, u.atoms, u.atoms, got.results.edges, (3, 3)))
    got_o = InterRDF(O, u.atoms, range=(0.0, 4.5), nbins=30, exclude_same="residue", device=device).run()
    check_against(got_o, ref_o, *float64_reference(u, O, u.atoms, got_o.results.edges, attr="resindices"))
    assert ref.results.count.sum() > 0


def test_interrdf_frames_and_errors(device, rng):
    u = water_like(rng, frames=5)
    O = u.select_atoms("name OW")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = MDInterRDF(O, O, range=(0.0, 6.0)).run(start=1, stop=5, step=2)
        ref2 = MDInterRDF(O, O, range=(0.0, 6.0)).run(frames=[0, 3])
    got = InterRDF(O, O, range=(0.0, 6.0), device=device).run(start=1, stop=5, step=2)
    check_against(got, ref, *float64_reference(u, O, O, got.results.edges, frames=slice(1, 5, 2)))
    seen = []
    got2 = InterRDF(O, O, range=(0.0, 6.0), device=device).run(frames=[0, 3],
                                                               progress=lambda d, t: seen.append((d, t)))
    check_against(got2, ref2, *float64_reference(u, O, O, got2.results.edges, frames=[0, 3]))
    assert seen == [(1, 2), (2, 2)]
    tri = water_like(rng, frames=1, angles=(90.0, 90.0, 60.0))
    with pytest.raises(ValueError, match="perpendicular width"):
        InterRDF(tri.atoms, tri.atoms, range=(0.0, 7.0), device=device).run()
    with pytest.raises(ValueError, match="exclude_same must be"):
        InterRDF(O, O, exclude_same="molecule")
    with pytest.raises(TypeError, match="unexpected keyword"):
        InterRDF(O, O, colour="red")
    r = InterRDF(O, O, norm="RDF", backend="serial", verbose=False, device=device)
    assert r.norm == "rdf"
    with pytest.raises(ValueError, match="cannot be used together"):
        InterRDF(O, O, exclude_same="residue", exclusion_block=(1, 1))
    with pytest.raises(TypeError, match="AtomGroup"):
        InterRDF(np.zeros((3, 3)), O)
