"""Outputs of pair kernels."""
