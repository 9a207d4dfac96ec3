"""Device primitives every family may use (each with its template in
``clkernels/cl``): bounds and layout of point sets, sort of (key, value)
pairs, exclusive scan, compaction of runs and selection of rows. They import only ``core``."""

from .compact import Runs, runs, select_rows
from .points import Bounds, bounds, layout
from .scan import exclusive_scan
from .sort import padded_length, sort_pairs

__all__ = ["Bounds", "bounds", "layout", "exclusive_scan", "sort_pairs", "padded_length", "Runs", "runs", "select_rows"]
