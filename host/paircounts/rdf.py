"""A radial distribution function accumulated over frames, as MDAnalysis's
``InterRDF`` computes it, with the counts from :func:`.api.paircounts` (its
fast path: the cell grid's exact histogram in the positions' precision,
exclusions subtracted as an exact histogram of the excluded pairs, listed
once for all frames)."""

import numpy as np

from ..core import inputs
from ..core.progress import bar as progress_bar
from ..outputs.pairlist import group_sizes
from . import boxes
from .api import paircounts
from .estimators import ball_volume

NORMS = ("rdf", "density", "none")


def frame_box(box):
    """A frame's periodic box: 3 side lengths, MDAnalysis ``dimensions`` [a, b,
    c, alpha, beta, gamma] (triclinic when an angle is not 90) or a 3x3
    matrix of box vectors (lower triangular when not diagonal); see
    :func:`.boxes.periodic_box`."""
    return boxes.periodic_box(box, 3)


def _groups(n, which, groups, exclusion_block):
    """Group ids of the n points of set ``which`` (0: positions, 1: y), or None."""
    if exclusion_block is not None:
        return (np.arange(n) // exclusion_block[which]).astype(np.int64)
    if groups is None:
        return None
    return groups[which]


class RDF:
    """g(r) of 3-D points in periodic boxes (orthorhombic or triclinic: see
    :func:`frame_box`), accumulated frame by frame the way MDAnalysis's
    ``InterRDF`` does.

    ``bins``, ``range``: ``bins`` uniform bins over ``range`` (numpy.histogram's
    rules: [lo, hi), the last one closed). ``norm``:

    * ``'rdf'``: count / (frames * shell volume * N / <V>), N the number of
      pairs that count (below) and <V> the mean box volume over frames;
    * ``'density'``: count / (frames * shell volume);
    * ``'none'``: count / frames.

    Pairs per frame (:meth:`accumulate`): with ``y``, every (i of positions,
    j of y), N = n_x n_y; without, every ordered pair i != j of positions,
    N = n (n - 1) (InterRDF(g, g) also counts each atom with itself at
    r = 0 and has N = n^2 unless an exclusion removes it). Exclusions skip
    pairs and leave N exact: ``exclusion_block=(nA, nB)`` as InterRDF (i // nA
    == j // nB skipped; without ``y`` nA must equal nB), N = n_x n_y minus
    the skipped pairs (InterRDF's n_x n_y - nA nB n_x / nA where blocks divide
    evenly); ``groups``: int group ids per point (an array; with ``y`` a pair
    (ids of positions, ids of y)), pairs in the same group skipped.

    Attributes: ``count`` (int64, pairs summed over frames), ``edges``,
    ``bins`` (centres), ``rdf``, ``frames``; :meth:`cdf` is InterRDF's
    cumulative count per frame, cumsum(count) / frames (divide by n_x for
    the coordination number per point).
    """

    def __init__(self, bins=75, range=(0.0, 15.0), *, norm="rdf", exclusion_block=None, groups=None,
                 device=None):
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
        if exclusion_block is not None and groups is not None:
            raise ValueError("give exclusion_block or groups, not both")
        if exclusion_block is not None:
            try:
                nA, nB = (int(v) for v in exclusion_block)
            except (TypeError, ValueError):
                raise ValueError(f"exclusion_block must be a pair (nA, nB) of positive integers, "
                                 f"got {exclusion_block!r}") from None
            if nA <= 0 or nB <= 0:
                raise ValueError(f"exclusion_block must be positive, got {exclusion_block!r}")
            exclusion_block = (nA, nB)
        if not isinstance(bins, (int, np.integer)) or isinstance(bins, bool):
            raise TypeError(f"bins must be a positive integer, got {bins!r}")
        self.edges = inputs.histogram_edges(int(bins), range).edges
        if self.edges[0] < 0:
            raise ValueError(f"range must start at 0 or above (separations are >= 0), got {range!r}")
        self.bins = 0.5 * (self.edges[1:] + self.edges[:-1])
        self.norm, self.exclusion_block, self.groups, self.device = norm, exclusion_block, groups, device
        self.count = np.zeros(len(self.edges) - 1, np.int64)
        self.frames = 0
        self.volume = 0.0
        self.npairs = None
        self._shape = self._n = None

    def _frame_groups(self, nx, ny, cross):
        g = self.groups
        if g is None:
            pair = (None, None)
        elif cross:
            if not (isinstance(g, (tuple, list)) and len(g) == 2):
                raise ValueError("with y, groups must be a pair (ids of positions, ids of y)")
            pair = tuple(g)
        else:
            pair = (g, None)
        if self.exclusion_block is not None and not cross and self.exclusion_block[0] != self.exclusion_block[1]:
            raise ValueError("without y, exclusion_block must be (k, k): one set of points")
        gx = _groups(nx, 0, pair, self.exclusion_block)
        gy = _groups(ny, 1, pair, self.exclusion_block) if cross else None
        return gx, gy

    def accumulate(self, positions, box, y=None):
        """Add one frame: ``positions`` (n, 3), ``box`` (see :func:`frame_box`),
        ``y`` the second set of points (None: pairs within ``positions``)."""
        b = frame_box(box)
        if b is None:
            raise ValueError("box is required: an RDF frame needs its periodic box (side lengths, MDAnalysis "
                             "dimensions or a 3x3 matrix) for the density")
        X = inputs.points(positions, "positions", dims=3)
        cross = y is not None
        ny = inputs.points(y, "y", dims=3).n if cross else X.n
        gx, gy = self._frame_groups(X.n, ny, cross)
        res = paircounts(positions, self.edges, y=y, groups=gx, y_groups=gy, box=b, mode="r",
                         ordered=True, device=self.device)
        key = (X.n, ny, cross)
        if key != self._shape:              # N depends on the sizes alone (the groups are the RDF's)
            self._shape, self._n = key, self._pairs(X.n, ny, cross, gx, gy)
        n = self._n
        if self.npairs is not None and n != self.npairs:
            raise ValueError(f"this frame has {n} counted pairs, the earlier ones {self.npairs}: every "
                             "frame must have the same points and exclusions")
        self.npairs = n
        self.count += res["npairs"].astype(np.int64)
        self.frames += 1
        self.volume += boxes.volume(b)
        return self

    def run(self, frames, *, progress=None):
        """Accumulate every frame of ``frames``: an iterable (a list, a
        generator reading a trajectory) of ``(positions, box)`` or
        ``(positions, box, y)``. ``progress``: None (a tqdm bar when tqdm is
        installed and there are 8 or more frames, or a number not known
        ahead: a generator), True
        (always; lines on stderr without tqdm), False, or a callable
        ``fn(done, total)`` (total None for an iterable of unknown length).
        Returns self."""
        total = len(frames) if hasattr(frames, "__len__") else None
        bar = progress_bar(progress, total, "RDF frames", long=total is None or total >= 8, unit="frames")
        try:
            for frame in frames:
                if not isinstance(frame, (tuple, list)) or len(frame) not in (2, 3):
                    raise TypeError("every frame must be (positions, box) or (positions, box, y)")
                self.accumulate(*frame)
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        return self

    @staticmethod
    def _pairs(nx, ny, cross, gx, gy):
        """Pairs a frame counts over all separations (N)."""
        if gx is None:
            return nx * ny if cross else nx * (nx - 1)
        ids, cx = group_sizes(gx)
        if not cross:
            return nx * (nx - 1) - int(np.sum(cx * (cx - 1)))
        idy, cy = group_sizes(gy)
        at = np.clip(np.searchsorted(idy, ids), 0, max(len(idy) - 1, 0))
        both = (idy[at] == ids) if len(idy) else np.zeros(len(ids), bool)
        return nx * ny - int(np.sum(cx[both] * cy[at[both]]))

    @property
    def rdf(self):
        """g(r) of the frames so far (per ``norm``); zeros before any frame."""
        if not self.frames:
            return np.zeros(len(self.count))
        norm = float(self.frames)
        if self.norm in ("rdf", "density"):
            norm = norm * np.diff(ball_volume(self.edges, 3))
        if self.norm == "rdf":
            norm = norm * (self.npairs / (self.volume / self.frames))
        norm = np.broadcast_to(norm, self.count.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(norm > 0, self.count / np.where(norm > 0, norm, 1.0), 0.0)

    def cdf(self):
        """Cumulative pair count per frame, cumsum(count) / frames (InterRDF's
        ``get_cdf``)."""
        return np.cumsum(self.count) / max(self.frames, 1)


__all__ = ["RDF", "frame_box", "NORMS"]
