"""The self-join beyond the cell grid (9..64 dimensions): a tiled all-pairs
join (``selfjoin_tiled.cl.mako``) -- work-groups of anchor blocks walking the
partner tiles above the diagonal in local memory, every pair i < j once.

:class:`TiledPlan` decides the work-group size, the partners per tile (local
memory) and the anchors per work-item (private memory); :func:`launch`
enqueues one pass. The ops mirror the grid's (``cellgrid.pairs``):
:func:`within` (the pairs through the ``Pairs`` output), :func:`degrees`
(per-point counts, no pair materialised) and :func:`csr` (built on the host
from the pairs with numpy: both directions, every row's neighbours
ascending, int32 as scipy.sparse keeps them).

Exact as the grid: v = d^2 - eps^2 in the input's precision from kernel
coordinates x * scale (``choose_scaling``: a power of two, exact); a pair
with |v| within ``count_band`` is decided in double from the original
coordinates (``exact_within``, the float64 evaluation d <= eps), any other by
the sign of v.
"""

import dataclasses

import numpy as np

from ..core import inputs
from ..core.build import kernel
from ..core.launch import Events, check_wg_size, global_size, pow2_floor
from ..core.transfer import download, kept, upload, zeros
from ..outputs.exact import choose_scaling, count_band
from ..outputs.pairs import Pairs, collect, device_ids, sampled_writers
from ..primitives import bounds as device_bounds

TEMPLATE = "selfjoin_tiled.cl.mako"
#: dimensions of this path (the grid takes d <= GRID_DIMS)
GRID_DIMS, MAX_DIMS = 8, 64
#: points: uint32 indices with room for the anchor arithmetic past n
MAX_POINTS = 2 ** 31 - 1
#: private values per work-item for its anchors' coordinates (anchors * d)
ANCHOR_VALUES = 64
#: writers sampled for the first pool's size (at least this many, or 1/64 of them)
SAMPLE_WRITERS = 256
#: the pair collection without a choice (no tuned entry for this path)
DEFAULT_METHOD, DEFAULT_PAGE = "pages", 16


def _real(dtype):
    return "double" if np.dtype(dtype) == np.float64 else "float"


@dataclasses.dataclass(frozen=True)
class TiledPlan:
    """``wg_size`` work-items per group, ``tile`` partners per tile (local
    memory: tile * dims values), ``anchors`` per work-item (a group's block:
    wg_size * anchors points)."""
    dims: int
    dtype: np.dtype
    wg_size: int
    tile: int
    anchors: int

    @classmethod
    def resolve(cls, device, dims, dtype, n, *, wg_size=None, tile=None, anchors=None):
        item = np.dtype(dtype).itemsize
        for name, v in (("wg_size", wg_size), ("tile", tile), ("anchors", anchors)):
            if v is not None:
                _positive(name, v)
        if anchors is None:
            # ANCHOR_VALUES floats (half as many doubles) of private coordinates
            anchors = max(1, min(4, ANCHOR_VALUES * 4 // (item * dims)))
        if wg_size is None:
            # the device's usual size, halved (down to 32) while the blocks of anchors
            # would give fewer than two work-groups per compute unit
            wg_size = pow2_floor(device.default_wg_size())
            while wg_size > 32 and -(-n // (wg_size * anchors)) < 2 * device.compute_units:
                wg_size //= 2
        if tile is None:
            # as many partners as the work-group has work-items, within half the local memory
            tile = wg_size
            while tile > 8 and tile * dims * item > device.local_mem_size // 2:
                tile //= 2
        plan = cls(int(dims), np.dtype(dtype), int(wg_size), int(tile), int(anchors))
        plan.validate(device)
        return plan

    def validate(self, device):
        if not GRID_DIMS < self.dims <= MAX_DIMS:
            raise ValueError(f"the tiled self-join takes {GRID_DIMS + 1} to {MAX_DIMS} dimensions, "
                             f"got {self.dims}")
        check_wg_size(device, self.wg_size)
        _positive("tile", self.tile)
        _positive("anchors", self.anchors)
        local = self.tile * (self.dims * self.dtype.itemsize + 4) + 4
        if local > device.local_mem_size:
            raise ValueError(f"a tile of {self.tile} points of {self.dims} dimensions ({local} bytes) exceeds "
                             f"the {device.local_mem_size} bytes of local memory of {device.name}")

    def writers(self, n):
        """Work-items (writers) that cover n anchors: whole groups of
        wg_size * anchors points."""
        return -(-n // (self.wg_size * self.anchors)) * self.wg_size

    def params(self, output, exact):
        """Template parameters of the 'join' def."""
        return dict(real=_real(self.dtype), orig=_real(self.dtype), dims=self.dims, wg_size=self.wg_size,
                    tile=self.tile, anchors=self.anchors, output=output, exact=bool(exact))


def _positive(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")


def reject_grid_options(dims, **options):
    """ValueError for the cell grid's options given with d > 8."""
    for name, v in options.items():
        if v is not None:
            raise ValueError(f"{name} is an option of the cell-grid self-join (d <= {GRID_DIMS}); "
                             f"x has {dims} dimensions (the tiled all-pairs join)")


@dataclasses.dataclass
class _Setup:
    """One call's device state: the points, the plan, the kernel's
    threshold arguments (scale, [xp,] thr, band) and the writer list of
    launches without one."""
    dev: object
    xo: object
    n: int
    plan: TiledPlan
    exact: bool
    head: list
    events: Events
    no_list: object
    na: int


def _setup(queue, x, r, exact, events, owned=None):
    from ..core.device import as_device

    dev = as_device(queue)
    X = inputs.points(x, "x", max_dims=MAX_DIMS, max_n=MAX_POINTS)
    r = inputs.scalar(r, "r", positive=True)
    inputs.check_context(dev, X.array)
    dev.check_dtype(X.dtype)
    if exact and not dev.fp64:
        from ..core.errors import DeviceCapabilityError

        raise DeviceCapabilityError(f"exact pairs are decided in double, which {dev.name} lacks; "
                                    "pass exact=False")
    plan = TiledPlan.resolve(dev, X.d, X.dtype, X.n)
    events = Events() if events is None else events
    xo = X.array if X.on_device else upload(dev, X.array, events=events)
    # every coordinate as one column: the NaN/inf check and the largest magnitude (all the
    # scaling reads when eps > 0) in one reduction whose kernel does not unroll d dimensions
    flat = xo.reshape(X.n * X.d, 1)
    bnd = device_bounds(dev.queue, flat, name="x", events=events) if X.n else None
    sc = choose_scaling(X.dtype, X.d, bnd, thresholds=[r])
    real = sc.real.type
    t = (r * sc.scale) ** 2
    wide = np.float64 if dev.fp64 else np.float32
    head = [wide(sc.scale)]
    if exact:
        xs = sc.exact_scale
        head.append(kept(dev.queue, np.array([xs] + [0.0] * X.d + [r * xs], np.float64)).data)
    head += [real(t), real(count_band(sc, t) if exact else 0.0)]
    na = X.n if owned is None else int(owned)
    if not 0 <= na <= X.n:
        raise ValueError(f"owned must be in [0, {X.n}], got {owned!r}")
    return _Setup(dev, xo, X.n, plan, exact, head, events, zeros(dev.queue, 1, np.uint32, events=events), na)


def launch(s, output, tail, nw, w0=0, wl=None):
    """One pass of the kernel for ``output`` over writers [w0, w0 + nw), or
    the nw ids of the device list ``wl``; ``tail``: the output's arguments."""
    q, plan = s.dev.queue, s.plan
    k = kernel(s.dev, TEMPLATE, "join", "selfjoin_tiled", plan.params(output, s.exact))
    lst = wl if wl is not None else s.no_list
    args = [s.xo.data, np.uint32(s.n), np.uint32(s.na)] + s.head + [np.uint32(nw), np.uint32(w0), lst.data,
                                                    np.uint32(wl is not None)] + list(tail)
    s.events.add("pairs", k(q, (global_size(nw, plan.wg_size),), (plan.wg_size,), *args))


def degrees(queue, x, *, r, exact=True, events=None):
    """Neighbours within r of every point of ``x`` (itself excluded): int64
    numpy, by per-point atomic counts. Returns (degrees, Events)."""
    s = _setup(queue, x, r, exact, events)
    if s.n < 2:
        return np.zeros(s.n, np.int64), s.events
    deg = zeros(s.dev.queue, s.n, np.uint32, events=s.events)
    launch(s, "degree", [deg.data], s.plan.writers(s.n))
    return download(s.dev, deg, events=s.events).astype(np.int64), s.events


def within(queue, x, *, r, exact=True, method=None, page=None, npages=None, max_device_bytes=None,
           progress=None, events=None, owned=None, ids=None):
    """Every pair i < j of ``x`` within r: ((i, j) int64 numpy in no
    particular order, Events), collected by the ``Pairs`` output (``method``
    'pages' or 'scan', default 'pages' with 16-record pages; nothing is lost
    whatever the pool). ``owned``: only the pairs with i < owned (a slab's
    own points ahead of its halo); ``ids``: the points' int64 ids, each pair
    coming out as (min, max) of its ids (:func:`..cellgrid.pairs.within`)."""
    spec = Pairs(DEFAULT_METHOD if method is None else method, DEFAULT_PAGE if page is None else page,
                 npages, max_device_bytes)
    spec.validate()
    s = _setup(queue, x, r, exact, events, owned)
    ids = device_ids(s.dev, ids, s.n, s.n, s.events)
    if s.n < 2 or s.na == 0:
        return (np.empty(0, np.int64), np.empty(0, np.int64)), s.events
    q, nwr = s.dev.queue, s.plan.writers(s.na)

    def estimate():
        # the sampled writers' pairs by the 'degree' kernel (built for counts anyway): each
        # pair adds to two points
        m = min(nwr, max(SAMPLE_WRITERS, nwr // 64))
        deg = zeros(q, s.n, np.uint32, events=s.events)
        launch(s, "degree", [deg.data], m, 0, sampled_writers(q, nwr, m)[1])
        return int(download(s.dev, deg, events=s.events).astype(np.int64).sum()) / 2 * nwr / m

    ij = collect(q, nwr, spec,
                 launch_pages=lambda nw, wl, args: launch(s, "pairs", args, nw, 0, wl),
                 launch_count=lambda w0, nw, wl, cnt: launch(s, "paircount", [cnt.data], nw, w0, wl),
                 launch_write=lambda w0, nw, offs, out: launch(s, "pairwrite", [offs.data, out.data], nw, w0),
                 estimate=estimate, events=s.events, progress=progress, ids=ids)
    return ij, s.events


def csr(queue, x, *, r, exact=True, include_self=False, events=None):
    """The neighbours within r of every point of ``x`` as CSR: the pairs of
    :func:`within`, put in both rows (and the diagonal with
    ``include_self``) and sorted by (row, column) on the host with numpy.
    Returns ((indptr, indices) int32 numpy arrays; Events). More than
    2^31 - 1 entries raise ValueError (``output='pairs'`` streams them)."""
    (i, j), events = within(queue, x, r=r, exact=exact, events=events)
    n = inputs.points(x, "x", max_dims=MAX_DIMS).n
    total = 2 * len(i) + (n if include_self else 0)
    if total >= 2 ** 31:
        raise ValueError(f"{total} CSR entries: more than 2^31 - 1 (use output='pairs', which streams)")
    rows, cols = [i, j], [j, i]
    if include_self:
        k = np.arange(n, dtype=np.int64)
        rows.append(k)
        cols.append(k)
    key = np.sort(np.concatenate(rows) * n + np.concatenate(cols))
    indptr = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(key // max(n, 1), minlength=n), out=indptr[1:])
    return (indptr, (key % max(n, 1)).astype(np.int32)), events
