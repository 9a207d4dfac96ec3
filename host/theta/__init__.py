"""Nested-loop theta joins (``theta.cl.mako``): all pairs of rows of two
tables for which an OpenCL C predicate holds (see :mod:`.api`)."""

from .api import parse_predicate, theta_join, theta_join_events
from .plan import CTYPES, JoinPlan

__all__ = ["theta_join", "theta_join_events", "parse_predicate", "JoinPlan", "CTYPES"]
