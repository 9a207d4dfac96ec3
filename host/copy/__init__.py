"""Device-to-device copy (``copy.cl.mako``), tuned: the smallest real operation.

It gives the autotuner one op that is always present (``autotune --ops copy``)
and measures the device's bandwidth ceiling (``examples/bench.py copy``).
"""

from .api import copy
from .plan import TUNABLE, Plan

__all__ = ["copy", "Plan", "TUNABLE"]
