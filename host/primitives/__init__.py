"""Shared device primitives."""
