"""The cell-list grid (see :mod:`.api`): built on the device, pair counts and
distance histograms over it; two-body statistics use it for small radii."""

from .api import Grid, count_within, grid_histogram, grid_pair_count, histogram_within
from .pairs import pairs_within
from .plan import (BITONIC_MAX_POINTS, JOIN_K, JOIN_KERNELS, JOIN_ORDERS, VARIANTS, Geometry, JoinPlan, PairPlan,
                   choose_variant)

__all__ = ["Grid", "grid_pair_count", "grid_histogram", "count_within", "histogram_within", "pairs_within", "Geometry",
           "PairPlan", "VARIANTS", "choose_variant", "JoinPlan", "JOIN_KERNELS", "JOIN_K", "JOIN_ORDERS",
           "BITONIC_MAX_POINTS"]
