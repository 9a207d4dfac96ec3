"""Periodic boxes of the binned pair counts: orthorhombic side lengths, or a
triclinic cell as a lower-triangular matrix of box vectors (rows a, b, c:
a along x, b in the xy plane), the form MDAnalysis and GROMACS use.

Triclinic minimum image, as the kernel evaluates it (float64, in this order,
no fused multiply-adds): with d = x_i - y_j,

    n = rint(d_z / c_z);  d_x -= n c_x;  d_y -= n c_y;  d_z -= n c_z
    n = rint(d_y / b_y);  d_x -= n b_x;  d_y -= n b_y
    n = rint(d_x / a_x);  d_x -= n a_x

For separations below half the box's shortest perpendicular width w (the
edges must stay there) this finds the minimum image whenever one lies in
range: an image in range has |e_z| < c_z / 2, |e_y| < b_y / 2 and
|e_x| < a_x / 2 (the widths along x, y, z are at most a_x, b_y, c_z), and each
step keeps the only multiple that can satisfy its axis; two images are a
lattice vector (>= w) apart, so at most one is in range.
"""

import numpy as np

from ..core import inputs


def _matrix(a):
    """A 3x3 box matrix (rows a, b, c): side lengths when diagonal, else a checked
    lower-triangular float64 matrix."""
    if not np.isfinite(a).all():
        raise ValueError("box must be finite")
    if np.count_nonzero(a - np.diag(np.diag(a))) == 0:
        return inputs.box(np.diag(a).copy(), 3)
    if a[0, 1] != 0 or a[0, 2] != 0 or a[1, 2] != 0:
        raise ValueError("a triclinic box matrix must be lower triangular (rows a, b, c: a along x, b in the xy "
                         "plane), as MDAnalysis's triclinic_vectors gives it; rotate the system first")
    if not (a[0, 0] > 0 and a[1, 1] > 0 and a[2, 2] > 0):
        raise ValueError("a triclinic box needs a_x, b_y, c_z > 0 (a right-handed, non-degenerate cell)")
    return a.copy()


def from_dimensions(dims):
    """Box vectors of an MDAnalysis ``dimensions`` [A, B, C, alpha, beta,
    gamma] (degrees) in float64, MDAnalysis's formula; side lengths when every
    angle is 90."""
    A, B, C, alpha, beta, gamma = (float(v) for v in dims)
    if not (A > 0 and B > 0 and C > 0):
        raise ValueError("box lengths must be > 0")
    if alpha == beta == gamma == 90.0:
        return inputs.box([A, B, C], 3)
    if not all(0 < v < 180 for v in (alpha, beta, gamma)):
        raise ValueError(f"box angles must lie in (0, 180) degrees, got {(alpha, beta, gamma)}")

    def cos(v):
        return 0.0 if v == 90.0 else np.cos(np.deg2rad(v))

    ca, cb, cg = cos(alpha), cos(beta), cos(gamma)
    sg = 1.0 if gamma == 90.0 else np.sin(np.deg2rad(gamma))
    cy = (ca - cb * cg) / sg
    cz2 = 1.0 - cb * cb - cy * cy
    if not cz2 > 0:
        raise ValueError(f"box angles {(alpha, beta, gamma)} do not make a cell of positive volume")
    return np.array([[A, 0.0, 0.0], [B * cg, B * sg, 0.0], [C * cb, C * cy, C * np.sqrt(cz2)]])


def periodic_box(box, d):
    """None, d orthorhombic side lengths (a number: a cube), or for d = 3 a
    triclinic (3, 3) lower-triangular matrix, from lengths, a 3x3 matrix or
    MDAnalysis ``dimensions``."""
    if box is None:
        return None
    try:
        if isinstance(box, (str, bytes)) or np.asarray(box).dtype.kind in "USV":  # numpy parses '1'
            raise TypeError
        a = np.asarray(box, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"box must be side lengths, [a, b, c, alpha, beta, gamma] or a 3x3 matrix, "
                        f"got {type(box).__name__}") from None
    if d == 3 and a.shape == (6,):
        if not np.isfinite(a).all():
            raise ValueError("box must be finite")
        return from_dimensions(a)
    if d == 3 and a.shape == (3, 3):
        return _matrix(a)
    return inputs.box(a, d)


def is_triclinic(box):
    return box is not None and np.ndim(box) == 2


def volume(box):
    return float(np.prod(np.diag(box)) if is_triclinic(box) else np.prod(box))


def widths(box):
    """Perpendicular widths of the cell (the side lengths of an orthorhombic one)."""
    if not is_triclinic(box):
        return np.asarray(box, np.float64)
    a, b, c = box
    v = volume(box)
    return np.array([v / np.linalg.norm(np.cross(b, c)), v / np.linalg.norm(np.cross(c, a)),
                     v / np.linalg.norm(np.cross(a, b))])


def kernel_box(box):
    """The box as the kernel reads it: D side lengths, or (a_x, b_x, b_y, c_x, c_y, c_z)."""
    if is_triclinic(box):
        return np.array([box[0, 0], box[1, 0], box[1, 1], box[2, 0], box[2, 1], box[2, 2]], np.float64)
    return np.asarray(box, np.float64)


__all__ = ["periodic_box", "from_dimensions", "is_triclinic", "volume", "widths", "kernel_box"]
