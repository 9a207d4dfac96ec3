"""Rectangle spatial join (``rectjoin.cl.mako``): count, count per query or
list the intersecting pairs of two sets of axis-aligned boxes (see :mod:`.api`)."""

from .api import rect_join, rect_join_events
from .plan import Geometry, RectPlan

__all__ = ["rect_join", "rect_join_events", "RectPlan", "Geometry"]
