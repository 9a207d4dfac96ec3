"""Cell-list grid (see api.py)."""
from .api import *  # noqa: F401,F403
from .api import pair_count_grid, distance_histogram_grid  # noqa: F401
