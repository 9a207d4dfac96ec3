"""clkernels.autotune: per-device sweeps of kernel parameters, cached for every call."""
