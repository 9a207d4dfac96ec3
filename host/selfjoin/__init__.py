"""Similarity self-join: every pair of points within eps (see :mod:`.api`)."""

from .api import self_join

__all__ = ["self_join"]
