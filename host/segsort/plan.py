"""The segmented-sort plan: every decision, its validation, the tuning space.

:meth:`Plan.resolve` turns the tuned (or model-based default) parameters of
a problem, overlaid with the caller's overrides, into a frozen :class:`Plan`:
the bins (segment length bounds), each bin's binding (:class:`RegBin`,
:class:`BlockBin`), which bins the small sort takes, the work-group sizes and
the merge parameters, after the local-memory fits (fewer reg-sort work-items,
a narrower merge) and the block kernels' work-group limits (more elements per
work-item). :meth:`Plan.validate` is the one check; the Tunable's ``restrict``
calls it, so a cached configuration that fails it is ignored (with one
warning) by :mod:`clkernels.host.core.tuning`.
"""

import dataclasses
import numbers

import numpy as np
import pyopencl as cl

from ..core import tuning
from ..core.build import build
from . import networks

TEMPLATES = ("segsort.cl.mako", "segsort_merge.cl.mako")
KEY_DTYPES = {np.dtype(t): kind for t, kind in (
    (np.uint32, 0), (np.int32, 1), (np.float32, 2), (np.uint64, 0), (np.int64, 1), (np.float64, 2))}
REG_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
BLOCK_SIZES = (256, 512, 1024, 2048, 4096, 8192)
WRITES = ("direct", "striped", "transpose")
EXCHANGES = ("shuffle", "scratch")
#: async mode's launches from upper bounds: at most this many work-groups per
#: compute unit (enough to fill a GPU's units several times over; the kernels
#: stride over the rest of their work)
ASYNC_GROUPS_PER_CU = 32
INT_PARAMS = ("bin_wg", "reg_wg", "reg_max", "small_max", "block_k", "block_m", "block_max", "merge_k", "merge_wg")
PARAMS = INT_PARAMS + ("reg_write", "xchg") + tuple(f"k{P}" for P in REG_SIZES)


def sg_width(device):
    """Sub-group width the bindings may assume (khr: unknown until run time, take 8)."""
    return device.sg_size_for(device.sg_backend, 256) or 8


def default_params(device, problem):
    """Model-based defaults: bins by powers of two, k elements per work-item."""
    key_bits = np.dtype(problem.get("dtype", "uint32")).itemsize * 8
    sg = sg_width(device)
    reg_cap = min(512, 16 * sg)         # the longest segment a sub-group holds at k <= 16
    scratch = device.sg_backend == "local"
    # GPUs with hardware shuffles: the 257-512 bin sorts faster as a block bin
    # (1.38x on the H100) and the block bins from 2-work-item chunks of 16
    # registers merged in local memory (1.08-1.12x) than from sub-group
    # networks (PERFORMANCE.md, "Block bins from short runs"); 64-bit keys keep
    # 8 registers (their elements take twice the registers), keys-only sorts
    # (4- or 8-byte elements: cheap networks) the sub-group chunks
    gpu = device.is_gpu and not scratch
    short_runs = gpu and problem.get("dims", 32) != 0
    reg_max = min(256, reg_cap) if gpu else reg_cap
    # small_max: on back ends without hardware shuffles every network step of
    # smallsort is a barrier, and PoCL's compile time grows steeply with them
    # (cold, measured: 7 s for bins <= 16, 17 s <= 32, 53 s <= 64, 304 s <= 128)
    p = {"bin_wg": 256, "reg_wg": 128, "reg_max": reg_max,
         "block_k": 16 if short_runs and key_bits == 32 else 8, "block_m": 2 if short_runs else sg,
         "small_max": min(16 if scratch else 128, reg_max),
         "reg_write": "striped" if device.is_gpu else "direct",
         "xchg": "scratch" if scratch else "shuffle",
         "block_max": 4096 if key_bits == 32 else 2048, "merge_k": 8, "merge_wg": 256}
    kmin = 4 if scratch else 2      # shuffles: more work-items per short segment pay (measured)
    for P in REG_SIZES:
        if P <= reg_cap:
            p[f"k{P}"] = min(P, max(kmin, P // sg)) if P > 1 else 1
    return p


def _pow2(x):
    return x >= 1 and not x & (x - 1)


def _int(params, name):
    if name not in params:
        raise ValueError(f"missing segsort parameter {name}")
    v = params[name]
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {v!r}")
    return int(v)


def _lpad(n, elem_bytes):
    """Slots of a local array of n elements padded as the templates' LPAD."""
    return n + n // (128 // elem_bytes)


@dataclasses.dataclass(frozen=True)
class RegBin:
    """Segments of length <= P sorted in registers: m work-items x k elements."""
    P: int
    k: int
    m: int


@dataclasses.dataclass(frozen=True)
class BlockBin:
    """Segments of length <= P sorted by one work-group of P / k work-items:
    register sorts of sub-group chunks (m work-items x k elements), then
    merges in local memory. The last block bin also sorts the grid's tiles."""
    P: int
    k: int
    m: int

    @property
    def wg(self):
        return self.P // self.k


@dataclasses.dataclass(frozen=True)
class Plan:
    """Every decision of a segmented sort on one device for one key width.

    Bin i holds the segments of length <= ``bounds[i]`` (and above the bound
    before); the reg bins come first, then the block bins, then the grid bin
    (longer segments: tiles of ``tile`` elements, merge rounds, gather). Reg
    bins ``0 .. nsmall - 1`` are sorted by the small sort (no bin counts
    needed); key kind, order and value width are run-time arguments.
    """
    key_bits: int
    sg_backend: str
    sg: int                   # sub-group width the bindings assume
    reg_bins: tuple           # RegBin per reg bin, P = 1, 2, 4, ... reg_max
    block_bins: tuple         # BlockBin per block bin, P increasing
    nsmall: int
    reg_write: str
    xchg: str
    bin_wg: int
    reg_wg: int
    merge_k: int
    merge_wg: int
    source: str = "default"
    bare: bool = False        # keys only: elements are the mapped keys alone (see elem_bytes)

    # ---------------------------------------------------------- shape
    @property
    def bounds(self):
        return [b.P for b in self.reg_bins] + [b.P for b in self.block_bins]

    @property
    def nbins(self):
        return len(self.reg_bins) + len(self.block_bins) + 1

    @property
    def bins(self):
        """RegBin / BlockBin per bin but the grid bin (index = bin number)."""
        return self.reg_bins + self.block_bins

    @property
    def grid_bin(self):
        return self.nbins - 1

    @property
    def tile(self):
        return self.block_bins[-1].P if self.block_bins else 0

    @property
    def elem_bytes(self):
        """Bytes of a sorted element: (mapped key, index), or the mapped key
        alone for a bare plan (keys only: equal integer keys are equal bits,
        so neither stability nor the write-out needs the index; float keys'
        -0.0 and NaN payloads are put back by ``floatfix``)."""
        return self.key_bits // 8 * (1 if self.bare else 2)

    # ------------------------------------------------- local memory (bytes)
    def reg_local_bytes(self, bins=None):
        """regsort's largest local arrays (xs when declared; an emulated
        sub-group's sg_mem, 4 per work-item) for ``bins`` (default: all)."""
        bins = self.reg_bins if bins is None else bins
        kmax = max((b.k for b in bins), default=1)
        return _lpad(kmax * self.reg_wg, self.elem_bytes) * self.elem_bytes + 4 * self.reg_wg

    def small_local_bytes(self):
        """smallsort's local arrays: regsort's for its classes, llen + lstart
        (12 per work-item), cnt + cbase (8 per class), the bin counts (64)."""
        if not self.nsmall:
            return 0
        return (self.reg_local_bytes(self.reg_bins[:self.nsmall]) + 12 * self.reg_wg
                + 8 * self.nsmall + 64)

    def block_local_bytes(self, b):
        """The block kernels' tile (and exchange scratch) plus sg_mem."""
        scratch = b.P if self.xchg == "scratch" else 0
        return _lpad(b.P + scratch, self.elem_bytes) * self.elem_bytes + 4 * b.wg + 64

    def merge_local_bytes(self):
        return self.merge_k * self.merge_wg * self.elem_bytes + 64

    # ------------------------------------------------------------ resolve
    @classmethod
    def from_params(cls, device, key_bits, params, source="default", bare=False):
        """The plan of a full parameter dict, local-memory fits applied (no
        build; :meth:`validate` not called, see :meth:`resolve`). Raises
        TypeError / ValueError for parameters that name no plan (a missing
        one, a non-integer size, bin bounds outside REG_SIZES / BLOCK_SIZES)."""
        ip = {name: _int(params, name) for name in INT_PARAMS}
        for name, allowed in (("reg_max", REG_SIZES), ("small_max", (0,) + REG_SIZES),
                              ("block_max", BLOCK_SIZES)):
            if ip[name] not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {ip[name]}")
        for name in ("reg_write", "xchg"):
            if name not in params:
                raise ValueError(f"missing segsort parameter {name}")
        sg = sg_width(device)
        reg_max = ip["reg_max"]
        regs = []
        for P in REG_SIZES:
            if P <= reg_max:
                k = _int(params, f"k{P}")
                regs.append(RegBin(P, k, P // k if k > 0 else 0))
        bk = ip["block_k"]
        bm = ip["block_m"]
        blocks = []
        for P in BLOCK_SIZES:
            if reg_max < P <= ip["block_max"]:
                k = min(bk, max(1, P // sg)) if bk > 0 else 0     # at least a sub-group of work-items
                blocks.append(BlockBin(P, k, min(bm, sg, P // k) if k > 0 else 0))
        nsmall = sum(1 for P in REG_SIZES if P <= min(reg_max, ip["small_max"]))
        plan = cls(key_bits, device.sg_backend, sg, tuple(regs), (), nsmall, params["reg_write"],
                   params["xchg"], ip["bin_wg"], ip["reg_wg"], ip["merge_k"], ip["merge_wg"], source, bare)
        if bk > 0:
            # local memory: block tile + (local back end) the exchange scratch
            while blocks and plan.block_local_bytes(blocks[-1]) > device.local_mem_size:
                blocks.pop()
        plan = dataclasses.replace(plan, block_bins=tuple(blocks))
        # a configuration tuned for 32-bit keys may not fit 64-bit keys' local
        # arrays: fewer work-items per work-group then (same bindings; smallsort
        # needs one work-item per bin: at least 16)
        while plan.reg_wg > max(sg, 16) and max(plan.reg_local_bytes(),
                                                plan.small_local_bytes()) > device.local_mem_size:
            plan = dataclasses.replace(plan, reg_wg=plan.reg_wg // 2)
        # a merge work-group's outputs (local memory) must divide the tile
        while plan.tile and plan.merge_k > 1 and (plan.merge_k * plan.merge_wg > plan.tile or
                                                  plan.merge_local_bytes() > device.local_mem_size):
            plan = dataclasses.replace(plan, merge_k=plan.merge_k // 2)
        return plan

    @classmethod
    def resolve(cls, device, problem, **overrides):
        """The plan of ``problem`` ({"size", "dtype": key dtype, "dims": value
        bits, 0 for keys only}): tuned parameters (or defaults) overlaid with
        ``overrides`` (any of :data:`PARAMS`), fitted, checked. Memoized.
        Keys without values get a bare plan (see :attr:`elem_bytes`)."""
        problem = {**TUNABLE.problem_defaults, **problem}
        # memo: this Device object, the problem's class and size bucket, the
        # overrides (plain ints and strings only), and the same loaded tuning
        # cache (its token changes with the file or an invalidation)
        token = tuning.state_token()
        plain = all(type(v) is int or type(v) is str for v in overrides.values())
        quick = (id(device), problem["dtype"], problem["dims"], tuning.size_bucket(problem.get("size", 1)),
                 tuple(sorted(overrides.items()))) if plain else None
        hit = _quick.get(quick) if quick else None
        if hit is not None and hit[0] is device and hit[1] is token:
            return hit[2]
        params, source = TUNABLE.resolve(device, problem)
        if overrides:
            unknown = set(overrides) - set(PARAMS)
            if unknown:
                raise TypeError(f"unknown segsort parameter(s): {', '.join(sorted(unknown))}")
            params = {**params, **overrides}
            source = "forced"
        kdt = np.dtype(problem["dtype"])
        key_bits = kdt.itemsize * 8
        bare = problem["dims"] == 0
        key = _memo_key(device, params, device.context.int_ptr, key_bits, source, bare)
        plan = _plans.get(key) if key else None
        if plan is None:
            plan = cls.from_params(device, key_bits, params, source, bare)
            plan.validate(device)
            plan = plan._fit_block_kernels(device)
            if key:
                _plans[key] = plan
        if quick:
            if len(_quick) >= 256:      # entries hold their Device: keep it bounded
                _quick.clear()
            _quick[quick] = (device, token, plan)
        return plan

    def _fit_block_kernels(self, device):
        """Where a block kernel cannot launch P / k work-items (its
        CL_KERNEL_WORK_GROUP_SIZE, e.g. from register use on NVIDIA), give
        each work-item twice the elements (up to 16) instead."""
        out = []
        for b in self.block_bins:
            while True:
                prg = build(device, *self.block_source(b))
                limit = min(cl.Kernel(prg, name).get_work_group_info(
                    cl.kernel_work_group_info.WORK_GROUP_SIZE, device.cl_device)
                    for name in ("block_sort", "tile_sort"))
                if b.wg <= limit or b.k >= 16 or b.P // (2 * b.k) < b.m:
                    break
                b = dataclasses.replace(b, k=2 * b.k)
            out.append(b)
        return dataclasses.replace(self, block_bins=tuple(out))

    # ----------------------------------------------------------- validate
    def validate(self, device):
        """Raise ValueError unless every kernel of the plan can be built and
        launched correctly on ``device`` (the plan's only check)."""
        err = self._problems(device)
        if err:
            raise ValueError("invalid segsort configuration: " + "; ".join(err))

    def _problems(self, device):
        out = []
        sg, mwg, lmem = self.sg, device.max_work_group_size, device.local_mem_size

        def wg_ok(name, wg, lo):
            if not (isinstance(wg, int) and _pow2(wg) and lo <= wg <= mwg and wg % sg == 0):
                out.append(f"{name} must be a power of two in [{max(lo, sg)}, {mwg}] and a multiple of "
                           f"the sub-group width {sg}, got {wg}")
                return False
            return True

        if self.key_bits not in (32, 64):
            out.append(f"key_bits must be 32 or 64, got {self.key_bits}")
        if self.sg_backend != device.sg_backend or sg != sg_width(device):
            out.append("the plan was made for another sub-group back end")
        if self.reg_write not in WRITES:
            out.append(f"reg_write must be one of {', '.join(WRITES)}, got {self.reg_write!r}")
        if self.xchg not in EXCHANGES:
            out.append(f"xchg must be one of {', '.join(EXCHANGES)}, got {self.xchg!r}")
        wg_ok("bin_wg", self.bin_wg, 32)
        reg_ok = wg_ok("reg_wg", self.reg_wg, 16 if self.nsmall else 1)
        if not self.reg_bins or [b.P for b in self.reg_bins] != list(REG_SIZES[:len(self.reg_bins)]):
            out.append(f"reg_max must be one of {REG_SIZES}")
        for b in self.reg_bins:
            if not (_pow2(b.k) and b.k <= 16 and b.k * b.m == b.P and 1 <= b.m <= sg):
                out.append(f"k{b.P} must be a power of two <= 16 dividing {b.P} with {b.P} / k <= "
                           f"the sub-group width {sg}, got {b.k}")
        if not self.block_bins:
            out.append("no block bin: block_max must be one of "
                       f"{BLOCK_SIZES} above reg_max, with a tile that fits local memory")
        last = self.reg_bins[-1].P if self.reg_bins else 0
        for b in self.block_bins:
            if b.P not in BLOCK_SIZES or b.P <= last:
                out.append(f"block bin sizes must grow from {BLOCK_SIZES}, got {b.P}")
            last = b.P
            if not (_pow2(b.k) and b.k <= 16 and sg <= b.wg <= mwg and b.P % (b.k * b.m) == 0):
                out.append(f"block_k must be a power of two <= 16 with {b.P} / k work-items in "
                           f"[{sg}, {mwg}], got {b.k}")
            elif not (_pow2(b.m) and b.m <= min(sg, b.wg)):
                out.append(f"block_m must be a power of two <= the sub-group width {sg}, got {b.m}")
            elif self.block_local_bytes(b) > lmem:
                out.append(f"the block bin of {b.P} needs {self.block_local_bytes(b)} bytes of local memory")
        if not 0 <= self.nsmall <= len(self.reg_bins):
            out.append("small_max must be 0 or one of the reg bin sizes")
        elif self.nsmall and device.sg_backend == "local" and self.reg_bins[self.nsmall - 1].P > 32:
            out.append("small_max must be <= 32 on the local back end (compile time)")
        if reg_ok and not out:
            if self.reg_local_bytes() > lmem:
                out.append(f"regsort needs {self.reg_local_bytes()} bytes of local memory")
            if self.small_local_bytes() > lmem:
                out.append(f"smallsort needs {self.small_local_bytes()} bytes of local memory")
        if wg_ok("merge_wg", self.merge_wg, 32) and self.tile:
            if not (isinstance(self.merge_k, int) and _pow2(self.merge_k)
                    and self.merge_k * self.merge_wg <= self.tile):
                out.append(f"merge_k must be a power of two with merge_k * merge_wg <= {self.tile}, "
                           f"got {self.merge_k}")
            elif self.merge_local_bytes() > lmem:
                out.append(f"the grid merge needs {self.merge_local_bytes()} bytes of local memory")
        return out

    # ------------------------------------------- render parameters, launches
    def _base(self):
        return {"key_bits": self.key_bits, "xchg": self.xchg, "bare": self.bare}

    def binning_source(self, device):
        return ("segsort.cl.mako", "binning",
                {"wg_size": self.bin_wg, "bounds": self.bounds, "nsmall": self.nsmall,
                 "sg_size": device.sg_size_for(self.sg_backend, self.bin_wg)})

    def small_source(self, count=True):
        """``count``: the small sort also counts the bins (the async mode; the
        sync path counts with ``bin_hist`` first)."""
        tr = self.reg_write == "transpose"
        return ("segsort.cl.mako", "smallsort",
                dict(self._base(), wg_size=self.reg_wg, write=self.reg_write, bounds=self.bounds,
                     classes=tuple(networks.binding(b.k, b.m, tr) for b in self.reg_bins[:self.nsmall]),
                     count=count))

    def reg_source(self, b, stride=False):
        """``stride``: the async mode's kernel (launched from a bound, striding
        over the bin's real count); the sync path's launches from the read
        count, straight-line."""
        return ("segsort.cl.mako", "regsort",
                dict(self._base(), wg_size=self.reg_wg, nbins=self.nbins, write=self.reg_write,
                     bind=networks.binding(b.k, b.m, self.reg_write == "transpose"), stride=stride))

    def block_source(self, b, stride=False):
        return ("segsort_merge.cl.mako", "block",
                dict(self._base(), wg_size=b.wg, bind=networks.binding(b.k, b.m), P=b.P, nbins=self.nbins,
                     stride=stride))

    def floatfix_source(self):
        """A bare plan's fix-up of float keys' zero and NaN runs: segments of
        the reg bins a work-item each, the longer ones (block and grid bins) a
        work-group each."""
        nreg = len(self.reg_bins)
        return ("segsort.cl.mako", "floatfix",
                dict(self._base(), wg_size=self.bin_wg, nbins=self.nbins, first_long=nreg,
                     short_max=self.reg_bins[-1].P))

    @property
    def ctl_words(self):
        """Control words: counts, flags, starts, cursors, SPEC (segsort.cl.mako)."""
        return 3 * self.nbins + 2

    def grid_source(self):
        return ("segsort_merge.cl.mako", "grid",
                dict(self._base(), wg_size=self.merge_wg, K=self.merge_k, T=self.tile))

    # ------------------------------------------ async mode: launch bounds
    def bin_bound(self, i, n, nseg):
        """The most segments bin ``i`` can hold, from ``n`` and ``nseg`` alone
        (async mode launches this many): bin 0 (lengths 0 and 1) any of them, a
        bin of lengths in (a, b] (the grid bin's b unbounded) at most n // (a + 1)."""
        return nseg if i == 0 else min(nseg, n // (self.bounds[i - 1] + 1))

    def grid_bounds(self, n, nseg):
        """(segments, packed total, merge widths) that bound the grid bin's
        layout in async mode: each of its segments is longer than the tile T
        and padded by less than T; the longest is at most ``n``."""
        T = self.tile
        cg = self.bin_bound(self.grid_bin, n, nseg)
        if not cg:
            return 0, 0, ()
        total = (n + cg * (T - 1)) // T * T
        widths, w, maxlen = [], T, -(-n // T) * T
        while w < maxlen:
            widths.append(w)
            w *= 2
        return cg, total, tuple(widths)

    @staticmethod
    def async_cap(device):
        """The most work-groups of one async-mode launch (the kernels stride
        over the rest of their work): :data:`ASYNC_GROUPS_PER_CU` per compute unit."""
        return ASYNC_GROUPS_PER_CU * device.compute_units


_plans = {}
_quick = {}
_restrict_memo = {}


def _memo_key(device, params, *extra):
    """A memo key of the device's facts and ``params``, or None where a value
    is not a plain int or str (256.0 and True hash as 256 and 1: never memoized)."""
    if not all(type(v) is int or type(v) is str for v in params.values()):
        return None
    return (device.cl_device.int_ptr, device.sg_backend, device.local_mem_size,
            device.max_work_group_size, *extra, tuple(sorted(params.items())))


def _restrict(params, device):
    """The Tunable's restriction: the plans of both key widths validate."""
    key = _memo_key(device, params)
    ok = _restrict_memo.get(key) if key else None
    if ok is None:
        try:
            for key_bits in (32, 64):
                Plan.from_params(device, key_bits, params).validate(device)
            ok = True
        except (TypeError, ValueError, KeyError, ArithmeticError):
            ok = False
        if key:
            _restrict_memo[key] = ok
    return ok


SPACE = {
    "bin_wg": [64, 128, 256, 512],
    "reg_wg": [64, 128, 256],
    "small_max": [0, 16, 32, 64, 128, 256],
    "reg_write": list(WRITES),
    "xchg": list(EXCHANGES),
    "block_k": [4, 8, 16],
    "block_m": [1, 2, 4, 32],
    "reg_max": [256, 512],
    "block_max": [2048, 4096],
    "merge_k": [4, 8, 16],
    "merge_wg": [64, 128, 256],
    **{f"k{P}": [x for x in (1, 2, 4, 8, 16) if x <= P and P // x <= 32] for P in REG_SIZES[1:]},
}

TUNABLE = tuning.register(tuning.Tunable(
    "segsort", TEMPLATES, SPACE, default_params, restrict=_restrict,
    problem_defaults={"dtype": "uint32", "dims": 32}))
