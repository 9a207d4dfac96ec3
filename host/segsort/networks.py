"""Schedules of the register sorts: the data the templates turn into OpenCL C.

A segment of ``k * m`` elements is sorted by ``m`` work-items holding ``k``
registers each (the seed's N-to-M binding): element ``e = tl * k + r`` lives
in register ``r`` of work-item ``tl``. Two schedules describe the work:

* :func:`bitonic_steps`: the bitonic network of the seed's Algorithm 1 as a
  list of :class:`Step` (compare-exchange steps, each within a work-item or
  across work-items);
* :func:`transpose_schedule`: the in-register transpose (seed section 3.4)
  from that direct layout to the striped one (element ``e`` in register
  ``e / m`` of work-item ``e % m``), by sub-group shuffles only.

Nothing here is OpenCL C: ``segsort.cl.mako`` (``network``, ``transpose``)
emits one block of code per step. :func:`binding` bundles both for a
template's render parameters.
"""

import dataclasses
import functools


@dataclasses.dataclass(frozen=True)
class Step:
    """One compare-exchange step: element ``e`` meets element ``e ^ mask``.

    kind     "local": the partner is in the same work-item (exch_local):
             registers ``r`` (those of ``regs``) and ``r ^ mask`` are
             compare-swapped; "intxn" (the mirror step that opens a stage)
             or "parallel" (a half-cleaner step): the partner is register
             ``r ^ reg`` of work-item ``tl ^ partner``
    lo_bit   cross steps: a work-item with ``tl & lo_bit == 0`` keeps the
             minimum of each pair (ascending order)
    """
    kind: str
    mask: int
    regs: tuple = ()
    partner: int = 0
    reg: int = 0
    lo_bit: int = 0


@dataclasses.dataclass(frozen=True)
class Swap:
    """One shuffle of the transpose: work-items with ``(tl / unit) & bit`` set
    send register ``lo`` and receive into it, the others send and receive
    register ``hi``; the partner is lane ``^ lanes``."""
    unit: int
    bit: int
    lo: int
    hi: int
    lanes: int


@dataclasses.dataclass(frozen=True)
class Move:
    """Register ``dst`` takes the value register ``src`` held before the moves."""
    dst: int
    src: int


@dataclasses.dataclass(frozen=True)
class Transpose:
    """The transpose: the ``swaps`` (xor stages over square blocks), then for
    k >= m the register renaming ``moves``, or for k < m (``groups`` = m / k
    > 0) one indexed shuffle of every register from lane
    ``(tl % k) * groups + tl / k`` of the segment."""
    swaps: tuple
    moves: tuple = ()
    groups: int = 0


@dataclasses.dataclass(frozen=True)
class Binding:
    """A register sort of ``k * m`` elements: ``network`` (the steps) and the
    ``transpose`` for striped write-outs by shuffles (None where not used)."""
    k: int
    m: int
    network: tuple
    transpose: object = None

    @property
    def P(self):
        return self.k * self.m


def _log2(x):
    return x.bit_length() - 1


def _pow2(x):
    return isinstance(x, int) and x >= 1 and not x & (x - 1)


@functools.lru_cache(maxsize=None)
def bitonic_steps(k, m):
    """The bitonic network on ``k`` registers of ``m`` work-items (powers of two).

    Each stage s (2, 4, ..., k * m) starts with the mirror step (e with
    e ^ (s - 1); the paper's exch_intxn when the partner is in another
    work-item) followed by the half-cleaner steps (e with e ^ j, j = s/4 ..
    1; exch_parallel across work-items). Steps whose partner is in the same
    work-item are exch_local (register compare-swaps)."""
    if not (_pow2(k) and _pow2(m)):
        raise ValueError(f"k and m must be powers of two, got k={k}, m={m}")
    out = []
    lk = _log2(k)
    s = 2
    while s <= k * m:
        masks = [(s - 1, "intxn")]
        j = s // 4
        while j >= 1:
            masks.append((j, "parallel"))
            j //= 2
        for mask, kind in masks:
            if mask < k:
                out.append(Step("local", mask, regs=tuple(r for r in range(k) if r < r ^ mask)))
                continue
            tm = mask >> lk
            out.append(Step(kind, mask, partner=tm, reg=mask & (k - 1),
                            lo_bit=(tm + 1) // 2 if kind == "intxn" else tm))
        s *= 2
    return tuple(out)


@functools.lru_cache(maxsize=None)
def transpose_schedule(k, m):
    """The in-register transpose of a ``k`` x ``m`` binding (powers of two).

    With s = min(k, m), square s x s blocks are transposed in log2(s) xor
    stages (per stage and register pair one shuffle, the sender picking the
    register by its lane bit); k >= m then only renames registers, k < m
    moves each register once more with an indexed shuffle."""
    if not (_pow2(k) and _pow2(m)):
        raise ValueError(f"k and m must be powers of two, got k={k}, m={m}")
    if k >= m:
        blocks = [[c * m + j for j in range(m)] for c in range(k // m)]
        unit, s = 1, m
    else:
        blocks = [list(range(k))]
        unit, s = m // k, k
    swaps = []
    d = 1
    while d < s:
        for regs in blocks:
            for j in range(s):
                if not j & d:
                    swaps.append(Swap(unit, d, regs[j], regs[j | d], d * unit))
        d *= 2
    if k >= m:
        # block c, local register j -> final register j * (k / m) + c
        q = k // m
        moves = tuple(Move(j * q + c, c * m + j) for c in range(q) for j in range(m))
        return Transpose(tuple(swaps), moves=moves)
    return Transpose(tuple(swaps), groups=m // k)


@functools.lru_cache(maxsize=None)
def binding(k, m, transpose=False):
    """The :class:`Binding` of ``k`` x ``m`` (with its transpose if asked and m > 1)."""
    return Binding(k, m, bitonic_steps(k, m), transpose_schedule(k, m) if transpose and m > 1 else None)


__all__ = ["Step", "Swap", "Move", "Transpose", "Binding", "bitonic_steps", "transpose_schedule", "binding"]
