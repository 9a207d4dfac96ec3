"""Segmented sort (see api.py)."""
from .api import *  # noqa: F401,F403
from .api import TUNABLE, run, segmented_sort  # noqa: F401
