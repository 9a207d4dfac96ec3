"""Segmented sort: sort many independent segments of keys (and values) at once.

``segmented_sort`` (numpy or device arrays in, the same kind out) and ``sort``
(device arrays on a queue -> (result, SortEvents); ``sync=False`` waits
for nothing) in api.py; the decisions in
plan.py (``Plan``, the ``TUNABLE``); enqueues in execute.py; the register
network and transpose schedules in networks.py; the tuner's problems in
tune.py (imported only by clkernels.autotune).
"""

from .api import SortEvents, check_inputs, segmented_sort, sort, sort_long
from .plan import ASYNC_GROUPS_PER_CU, BLOCK_SIZES, KEY_DTYPES, REG_SIZES, TUNABLE, BlockBin, Plan, RegBin

__all__ = ["segmented_sort", "sort", "sort_long", "SortEvents", "check_inputs", "Plan", "RegBin", "BlockBin", "TUNABLE",
           "REG_SIZES", "BLOCK_SIZES", "KEY_DTYPES", "ASYNC_GROUPS_PER_CU"]
