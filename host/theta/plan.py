"""The theta join's plan: the columns the predicate reads (with their OpenCL
types), the rewritten predicate, the work-group size (= rows of B per
tile in local memory) and the pairs' staged records per writer."""

import dataclasses

import numpy as np

from ..core.launch import check_wg_size, pow2_floor
from ..primitives.pages import stage_fit

TEMPLATE = "theta.cl.mako"
#: records a writer of the 'pairs' output stages in local memory (halved to fit beside the
#: tile): the test loop holds no atomic, the work-group takes one run of pages a commit
STAGE = 16
#: grouped staging (a sub-group's writers share one buffer, the pool filled densely) where the
#: sample finds more than this many pairs a writer per tile of B: past it the per-writer stages
#: overflow and spill in most tiles (H100, 2^14 x 2^14 rows in 16 parts of B, tiles of 256 rows:
#: per-writer 0.14 / 1.36 ms against grouped 0.30 / 0.39 ms at 2.5 / 25 pairs a writer a tile)
GROUPED_MIN = 5.0
#: writers per work-item the device holds at once (A's rows, times B's parts where A is short)
WRITERS_PER_ITEM = 8
#: the grouped 'pairs' kernel's work-group (tiles of as many rows; it divides wg_size, so the
#: layout's parts hold) and its records a writer (halved to fit): the larger a sub-group's
#: buffer, the fewer flushes (H100, 2^14 x 2^14 dense: work-groups of 256 with 16 records a
#: writer 1.41 TB/s of records, 64 with 64: 2.67 TB/s, of the 3.15 TB/s the device writes)
GROUPED_WG = 64
GROUPED_STAGE = 64
#: rows per table: indices are uint32 on the device, with room for a tile past the end
MAX_ROWS = (1 << 31) - 1
#: numpy dtype -> OpenCL C type of a column
CTYPES = {np.dtype(np.int32): "int", np.dtype(np.int64): "long", np.dtype(np.uint32): "uint",
          np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_SIZES = {"int": 4, "long": 8, "uint": 4, "float": 4, "double": 8}


@dataclasses.dataclass(frozen=True)
class JoinPlan:
    """``acols``/``bcols``: ((name, ctype), ...) the predicate reads, in order
    of appearance; ``predicate``: the expression over ``ta_<name>`` and
    ``tb_<name>``; ``wg_size``: work-items per group and rows per tile;
    ``min_writers``: writers that fill the device (:meth:`layout`)."""
    acols: tuple
    bcols: tuple
    predicate: str
    wg_size: int
    stage: int = 0          # 'pairs': records a writer stages in local memory (0: none)
    order_on_device: bool = False   # the pairs put in (i, j) order by the segmented sort (GPUs)
    grouped_stage: int = 0  # 'pairs', grouped: records a writer's share of its sub-group's buffer
    min_writers: int = 1
    grouped_wg: int = 0     # 'pairs', grouped: work-items per group (divides wg_size)

    @classmethod
    def resolve(cls, device, acols, bcols, predicate, wg_size=None):
        if wg_size is None:
            # the device's usual size, halved while the tile would take over half the local memory
            row = sum(_SIZES[t] for _, t in bcols)
            wg_size = pow2_floor(device.default_wg_size())
            while wg_size > 32 and wg_size * row > device.local_mem_size // 2:
                wg_size //= 2
        row = sum(_SIZES[t] for _, t in bcols)
        gwg = min(GROUPED_WG, int(wg_size))
        plan = cls(tuple(acols), tuple(bcols), predicate, int(wg_size),
                   stage_fit(device, int(wg_size), STAGE, int(wg_size) * row), bool(device.is_gpu),
                   stage_fit(device, gwg, GROUPED_STAGE, gwg * row + 8, grouped=True),
                   WRITERS_PER_ITEM * device.compute_units * int(wg_size), gwg)
        plan.validate(device)
        return plan

    def validate(self, device):
        w = self.wg_size
        check_wg_size(device, w)
        row = sum(_SIZES[t] for _, t in self.bcols)
        if w * row > device.local_mem_size:
            raise ValueError(f"a tile of {w} rows of b's columns ({w * row} bytes) exceeds the "
                             f"{device.local_mem_size} bytes of local memory of {device.name}")

    def params(self, output, grouped=False):
        """Template parameters of the 'join' def for ``output`` (``grouped``:
        the 'pairs' kernel with grouped staging)."""
        grouped = self.is_grouped(output, grouped)
        stage = (self.grouped_stage if grouped else self.stage) if output == "pairs" else 0
        return dict(acols=self.acols, bcols=self.bcols, predicate=self.predicate,
                    wg_size=self.grouped_wg if grouped else self.wg_size, output=output, stage=stage,
                    grouped=grouped)

    def is_grouped(self, output, grouped):
        """Whether the kernel of ``output`` asked ``grouped`` is the grouped
        'pairs' kernel (work-groups of ``grouped_wg``)."""
        return bool(grouped and output == "pairs" and self.grouped_stage)

    def layout(self, na, nb):
        """(parts, na_pad, plen) of a join of ``na`` by ``nb`` rows: writer w
        is row w % na_pad of A against B's rows [s * plen, (s + 1) * plen), s =
        w // na_pad, for parts * na_pad writers. One part (plen = nb) unless
        A has fewer rows than ``min_writers``: then as many parts as fill the
        device, each of at least four tiles, aligned to tiles (a work-group's
        writers share one part)."""
        wg = self.wg_size
        parts = max(1, min(-(-self.min_writers // max(na, 1)), nb // (4 * wg)))
        if parts == 1:
            return 1, na, nb
        na_pad = -(-na // wg) * wg
        plen = -(-(-(-nb // parts)) // wg) * wg
        return -(-nb // plen), na_pad, plen
