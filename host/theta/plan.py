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
    ``tb_<name>``; ``wg_size``: work-items per group and rows per tile."""
    acols: tuple
    bcols: tuple
    predicate: str
    wg_size: int
    stage: int = 0          # 'pairs': records a writer stages in local memory (0: none)
    order_on_device: bool = False   # the pairs put in (i, j) order by the segmented sort (GPUs)

    @classmethod
    def resolve(cls, device, acols, bcols, predicate, wg_size=None):
        if wg_size is None:
            # the device's usual size, halved while the tile would take over half the local memory
            row = sum(_SIZES[t] for _, t in bcols)
            wg_size = pow2_floor(device.default_wg_size())
            while wg_size > 32 and wg_size * row > device.local_mem_size // 2:
                wg_size //= 2
        row = sum(_SIZES[t] for _, t in bcols)
        plan = cls(tuple(acols), tuple(bcols), predicate, int(wg_size),
                   stage_fit(device, int(wg_size), STAGE, int(wg_size) * row), bool(device.is_gpu))
        plan.validate(device)
        return plan

    def validate(self, device):
        w = self.wg_size
        check_wg_size(device, w)
        row = sum(_SIZES[t] for _, t in self.bcols)
        if w * row > device.local_mem_size:
            raise ValueError(f"a tile of {w} rows of b's columns ({w * row} bytes) exceeds the "
                             f"{device.local_mem_size} bytes of local memory of {device.name}")

    def params(self, output):
        """Template parameters of the 'join' def for ``output``."""
        return dict(acols=self.acols, bcols=self.bcols, predicate=self.predicate, wg_size=self.wg_size,
                    output=output, stage=self.stage if output == "pairs" else 0)
