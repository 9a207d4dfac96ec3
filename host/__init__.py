"""clkernels.host: device facts, planning, building and launching kernels."""
