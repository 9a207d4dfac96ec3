"""Input checks shared by the host modules (clear errors before anything is enqueued)."""

import numpy as np


def check_box(box, d):
    """An orthorhombic periodic box as d float64 side lengths (None: no box).

    A scalar means a cube. Raises ValueError for a wrong shape or a side that
    is not finite and positive.
    """
    if box is None:
        return None
    b = np.asarray(box, dtype=np.float64)
    if b.ndim == 0:
        b = np.full(d, float(b))
    if b.shape != (d,):
        raise ValueError(f"box must be a scalar or {d} side lengths, got shape {b.shape}")
    if not (np.isfinite(b).all() and (b > 0).all()):
        raise ValueError("box side lengths must be finite and > 0")
    return b
