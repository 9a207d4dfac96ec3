"""A drop-in for MDAnalysis's ``InterRDF`` (``clkernels.mdanalysis.InterRDF``,
the ``clkernels[md]`` extra): the same arguments, ``run`` and ``results``,
the frames' pair counts on the device through :class:`.rdf.RDF`."""

import numpy as np

from .rdf import NORMS, RDF

#: InterRDF's exclude_same values and the AtomGroup attribute each compares
EXCLUDE_SAME = {"residue": "resindices", "segment": "segindices", "chain": "chainIDs"}


class InterRDF:
    """Intermolecular pair distribution function of two AtomGroups, as
    ``MDAnalysis.analysis.rdf.InterRDF(g1, g2, nbins, range, norm,
    exclusion_block, exclude_same)`` computes it, frame by frame on an
    OpenCL device (``device=``).

    Counts: every pair (i of g1, j of g2) at distance <= range[1] binned as
    ``numpy.histogram`` over ``nbins`` bins of ``range``, the minimum image
    in each frame's box (an atom paired with itself counts at r = 0, as in
    InterRDF); ``exclusion_block=(nA, nB)`` skips pairs with i // nA ==
    j // nB, ``exclude_same`` ('residue', 'segment' or 'chain') pairs of
    the same one. Distances are the float64 evaluation of the positions
    (MDAnalysis evaluates them itself; a pair within rounding of an edge
    may land one bin apart). Normalisation as InterRDF's, including its N:
    nA nB minus xA xB nA / xA with an exclusion block, not reduced by
    ``exclude_same``.

    Boxes: orthorhombic (``range`` up to half the shortest side) or
    triclinic (MDAnalysis's box vectors of the frame; ``range`` below half
    the cell's shortest perpendicular width; triclinic frames run the
    double-precision kernel); beyond those reaches, or for a frame without
    a box, ValueError (MDAnalysis computes such ranges; the minimum image
    here would miss pairs). ``backend`` and ``verbose`` are accepted as
    InterRDF's; ``norm`` is case-insensitive as there.

    ``run(start=None, stop=None, step=None, frames=None, verbose=None,
    progress=None)``: progress shown with ``verbose=True`` (InterRDF's),
    or as ``progress`` says (:meth:`.rdf.RDF.run`). Results in ``results``: ``count``,
    ``edges``, ``bins``, ``rdf``, ``volume_cum``; ``n_frames``.
    """

    def __init__(self, g1, g2, nbins=75, range=(0.0, 15.0), norm="rdf", exclusion_block=None,
                 exclude_same=None, backend="serial", *, device=None, **kwargs):
        norm = str(norm).lower()
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
        if exclude_same is not None and exclude_same not in EXCLUDE_SAME:
            raise ValueError(f"exclude_same must be one of {tuple(EXCLUDE_SAME)} or None, got {exclude_same!r}")
        if exclude_same is not None and exclusion_block is not None:
            raise ValueError("exclude_same and exclusion_block cannot be used together")
        unknown = set(kwargs) - {"verbose"}
        if unknown:
            raise TypeError(f"unexpected keyword arguments {sorted(unknown)}")
        for g, name in ((g1, "g1"), (g2, "g2")):
            if not (hasattr(g, "positions") and hasattr(g, "universe")):
                raise TypeError(f"{name} must be an MDAnalysis AtomGroup, got {type(g).__name__}")
        self.g1, self.g2, self.norm = g1, g2, norm
        self.backend = backend              # accepted for InterRDF's signature; the device does the work
        self._verbose = bool(kwargs.get("verbose", False))
        self._exclusion_block = exclusion_block
        self.exclude_same = None if exclude_same is None else EXCLUDE_SAME[exclude_same]   # InterRDF's attribute
        groups = None
        if exclude_same is not None:
            # ids as integers (chainIDs are strings), numbered over both groups together
            a1, a2 = np.asarray(getattr(g1, self.exclude_same)), np.asarray(getattr(g2, self.exclude_same))
            _, inv = np.unique(np.concatenate([a1, a2]), return_inverse=True)
            groups = (inv[:len(a1)].astype(np.int64), inv[len(a1):].astype(np.int64))
        self._settings = dict(bins=nbins, range=range, exclusion_block=exclusion_block, groups=groups,
                              device=device)
        self._rdf = None
        self._volume_cum = 0.0
        self.results = None
        self.n_frames = 0

    def _frames(self, sliced):
        g1, g2, me = self.g1, self.g2, self
        me._volume_cum = 0.0

        class Frames:           # sized, so that progress knows the total
            def __len__(self):
                return len(sliced)

            def __iter__(self):
                for ts in sliced:
                    me._volume_cum += float(ts.volume)      # InterRDF's volumes (its float32 box)
                    yield g1.positions, _box(ts), g2.positions
        return Frames()

    def run(self, start=None, stop=None, step=None, frames=None, verbose=None, progress=None):
        """Accumulate the frames (a trajectory slice, or ``frames``: indices or
        a boolean mask) and normalise; returns self."""
        traj = self.g1.universe.trajectory
        if frames is not None:
            if start is not None or stop is not None or step is not None:
                raise ValueError("start/stop/step cannot be combined with frames")
            sliced = traj[np.asarray(frames)]
        else:
            sliced = traj[start:stop:step]
        rdf = RDF(norm="none", **self._settings)
        if progress is None:
            progress = bool(self._verbose if verbose is None else verbose)   # InterRDF: only when verbose
        rdf.run(self._frames(sliced), progress=progress)
        self._rdf = rdf
        self.n_frames = rdf.frames
        self.results = _results(rdf, self._norm(rdf), self._volume_cum)
        return self

    def _norm(self, rdf):
        norm = float(max(rdf.frames, 1))
        if self.norm in ("rdf", "density"):
            norm = norm * 4 / 3 * np.pi * np.diff(np.power(rdf.edges, 3))
        if self.norm == "rdf":
            nA, nB = len(self.g1), len(self.g2)
            N = nA * nB
            if self._exclusion_block:
                xA, xB = self._exclusion_block
                N -= xA * xB * (nA / xA)
            norm = norm * (N / (self._volume_cum / max(rdf.frames, 1)))
        return norm


def _box(ts):
    """The frame's box: its dimensions when orthorhombic, else MDAnalysis's own
    box vectors (``triclinic_vectors``, the cell its distance functions use)."""
    dims = ts.dimensions
    if dims is None:
        raise ValueError(f"frame {ts.frame} has no box: InterRDF here needs periodic boxes")
    if np.all(np.asarray(dims[3:]) == 90):
        return dims
    from MDAnalysis.lib.mdamath import triclinic_vectors
    return np.asarray(triclinic_vectors(dims), np.float64)


def _results(rdf, norm, volume_cum):
    """MDAnalysis's Results (attribute access) when importable, else a dict subclass alike."""
    try:
        from MDAnalysis.analysis.base import Results
    except ImportError:         # pragma: no cover - the adapter is used with MDAnalysis objects
        class Results(dict):
            __getattr__ = dict.__getitem__
    res = Results()
    res.count = rdf.count.astype(np.float64)
    res.edges = rdf.edges
    res.bins = rdf.bins
    res.volume_cum = volume_cum
    with np.errstate(divide="ignore", invalid="ignore"):
        res.rdf = res.count / norm
    return res


__all__ = ["InterRDF", "EXCLUDE_SAME"]
