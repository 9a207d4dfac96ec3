"""How the cell grid's histogram kernels find a pair's bin
(``cellgrid.cl.mako``'s ``tally``): a guess from the edges (:func:`bin_guess`)
corrected by comparisons, and the bin table of the squared distance's high
bits (:func:`bin_table`) that decides most pairs without them."""

import dataclasses
import functools

import numpy as np


def bin_guess(sq):
    """:func:`_bin_guess`, remembered for the last few edges."""
    sq = np.asarray(sq)
    return _bin_guess(sq.tobytes(), sq.dtype.str)


@functools.lru_cache(maxsize=32)
def _bin_guess(sq, dtype):
    """How the histogram kernels find a pair's bin from the squared edges
    ``sq`` (the bytes of an array of ``dtype``; kernel scale, as the kernel
    holds them): ('uniform', lo, scale)
    when the edges sqrt(sq) are nearly evenly spaced (the guess
    (sqrt(d^2) - lo) * scale), ('log', lo, scale) when they are nearly
    geometric (log bins: (log2(d^2) - lo) * scale), else ('search', 0, 0).
    The kernel corrects a guess by comparisons with the edges, so the bin is
    the binary search's for any edges; a good guess only saves the search
    (4 dependent local loads at 14 bins, 8.4 of 39 ms on the clustered
    catalog on the H100)."""
    s = np.frombuffer(sq, dtype).astype(np.float64)
    nb = len(s) - 1
    if nb < 2 or not np.all(np.isfinite(s)) or s[0] < 0 or not np.all(np.diff(s) > 0):
        return "search", 0.0, 0.0
    e = np.sqrt(s)
    if not np.all((e == 0) | ((e >= 1e-18) & (e <= 1e18))):       # float32 guesses stay meaningful
        return "search", 0.0, 0.0
    w = np.diff(e)
    if np.all(np.abs(w - w.mean()) <= 1e-3 * w.mean()):
        return "uniform", float(e[0]), float(nb / (e[-1] - e[0]))
    if s[0] > 0:
        g = np.diff(np.log2(s))
        if np.all(np.abs(g - g.mean()) <= 1e-3 * g.mean()):
            return "log", float(np.log2(s[0])), float(nb / (np.log2(s[-1]) - np.log2(s[0])))
    return "search", 0.0, 0.0


#: the bin table (:func:`bin_table`): at most this many one-byte entries; the
#: entries' codes past the bins (TABLE_EDGE + k: one edge, k + 1, in the span,
#: where there are at most TABLE_EDGE_MAX_BINS bins); the largest cost of the
#: spans left to comparisons (:func:`bin_table`) for a table to be made: a warp
#: whose lanes meet such spans runs the lookup and the comparisons, so the table
#: pays where few do (H100: the clustered catalog's 14 log bins, cost 0.15%,
#: pair kernel 13.4 -> 7.8 ms; an RDF's 75 uniform bins, 2.3%, within the run
#: to run spread either way, left to the guess: examples/PERFORMANCE.md)
TABLE_MAX = 4096
TABLE_EDGE, TABLE_OUT, TABLE_AMBIG = 128, 254, 255
TABLE_EDGE_MAX_BINS = TABLE_OUT - TABLE_EDGE - 1
TABLE_MAX_AMBIG = 0.01
#: the fraction bits a table's index may keep
TABLE_KEEP = range(1, 13)
#: the cost of a span holding one edge (a comparison and the band tests) against
#: one left to the guess (a logarithm or root, its corrections, the band tests)
TABLE_EDGE_COST = 0.25


@dataclasses.dataclass(frozen=True)
class BinTable:
    """A pair's bin from the high bits of its squared distance: entry
    ``entries[min(max(bits(d2) >> shift, base) - base, n - 1)]`` (``bits``:
    the float's bits as an unsigned integer, monotone for d2 >= 0) is the bin
    (< nbins), TABLE_OUT (no bin), TABLE_EDGE + k (bin k or, from sq[k + 1]
    on, k + 1; then the band tests) or TABLE_AMBIG (decide by the guess and
    the band tests). ``entries`` is padded with TABLE_AMBIG to whole words;
    ``ambiguous``: the cost of the spans left to comparisons, per pair in
    range (:func:`bin_table`)."""
    entries: np.ndarray
    shift: int
    base: int
    n: int
    ambiguous: float


def _bin_decisions(v, sq, sb):
    """The histogram kernel's decision for squared distances ``v`` (the
    kernel's real type, every operation in it): (bin, band, in range), bin
    the largest k < nbins with sq[k] <= v (0 below sq[0]); band when v is
    within the band of sq[k] or sq[k + 1] (``sb < 0``: no band)."""
    nb = len(sq) - 1
    k = np.clip(np.searchsorted(sq, v, side="right") - 1, 0, nb - 1)
    band = (np.abs(v - sq[k]) <= sb[k]) | (np.abs(sq[k + 1] - v) <= sb[k + 1])
    return k, band, (v >= sq[0]) & (v <= sq[nb])


def table_fits(device, plan, d, nbins, itemsize, table):
    """Whether a histogram kernel's local memory (its histogram copies, the
    edges and bands, the 'cell' variant's tile, 1 KiB to spare) holds the
    bin table too (:meth:`PairPlan.resolve` budgets half the local memory
    for the copies, edges and bands; global histograms read the table from
    global memory)."""
    if not plan.hist_local:
        return True
    need = (nbins * (8 if plan.local64 else 4) * plan.hist_local + 2 * (nbins + 1) * itemsize
            + table.entries.nbytes + d * plan.wg_size * itemsize + 1024)
    return need <= device.local_mem_size


def _spread_weight(a, b, d):
    """Pairs of a uniform spread with squared distances in [a, b] (d^(d - 1) dd)."""
    return np.maximum(b.astype(np.float64), 0) ** (d / 2) - np.maximum(a.astype(np.float64), 0) ** (d / 2)


def _log_weight(a, b, sq):
    """Pairs of a scale-free (clustered) spread in [a, b]: equal for every
    factor of d^2 down to half the first positive edge (none below)."""
    pos = sq[sq > 0]
    floor = float(pos[0]) / 2 if pos.size else np.finfo(np.float64).tiny
    return np.log2(np.maximum(b.astype(np.float64), floor)) - np.log2(np.maximum(a.astype(np.float64), floor))


def _share(w, cost):
    """The cost of the spans (weights ``w``), per unit of weight."""
    total = w.sum()
    return float((w * cost).sum() / total) if total > 0 else 1.0


def bin_table(sq, sb, d):
    """The bin table (:func:`_bin_table`, remembered for the last few edges: a
    histogram repeated over frames or calls builds it once)."""
    sq = np.asarray(sq)
    sb = np.asarray(sb, sq.dtype)
    return _bin_table(sq.tobytes(), sb.tobytes(), sq.dtype.str, int(d))


@functools.lru_cache(maxsize=32)
def _bin_table(sq, sb, dtype, d):
    """The bin table of squared edges ``sq`` with bands ``sb`` (the kernel's
    real type and values) for ``d``-dimensional distances, or None.

    Entry e covers the squared distances whose bits lie in
    [(base + e) << shift, (base + e + 1) << shift) (the first entry from the
    range's lower cut, the last up to its upper cut: the kernel's
    ``lo_cut``/``hi_cut``). An entry holds a bin only when the kernel's own
    decisions (bin, band, range) at both ends of its span give that bin with
    no band pair: each decision is monotone in the squared distance (a
    correctly rounded subtraction is monotone), so every value between
    decides alike, and the table gives exactly the bins of the guess and
    band tests it replaces. A span with one edge inside, at most (k + 1
    between bins k and k + 1 at its ends), gets TABLE_EDGE + k: the kernel's
    bin there is k + (d2 >= sq[k + 1]), the same decision. The shift (one to
    twelve bits of the fraction kept) minimises the cost of the spans left
    to comparisons (1 for the guess, TABLE_EDGE_COST for one edge), per pair
    in range, the larger of two spreads' costs: a uniform spread's (the
    spans weighted by d^2 to the power d/2) and a clustered, scale-free
    one's (by log d^2: a table that leaves the small distances to the guess
    would lose most of a galaxy catalog's pairs); None when that cost passes
    TABLE_MAX_AMBIG or the bins do not fit a byte."""
    sq, sb = np.frombuffer(sq, dtype), np.frombuffer(sb, dtype)
    with np.errstate(all="ignore"):         # extreme edges: inf weights, log2 of 0 (no table then)
        return _bin_table_of(sq, sb, d)


def _bin_table_of(sq, sb, d):
    """:func:`_bin_table`'s work on arrays (numpy's floating-point warnings
    silenced around it by the caller)."""
    nb = len(sq) - 1
    if sq.dtype not in (np.float32, np.float64) or not 1 <= nb < TABLE_OUT or not np.all(np.isfinite(sq)):
        return None
    real = sq.dtype.type
    uint = np.uint32 if real is np.float32 else np.uint64
    frac = np.finfo(real).nmant
    lo_cut = np.nextafter(real(sq[0] - max(sb[0], real(0))), real(-np.inf))
    hi_cut = np.nextafter(real(sq[nb] + sb[nb]), real(np.inf))
    if not (np.isfinite(hi_cut) and hi_cut > 0):
        return None
    lo_bits = int(np.array(max(lo_cut, real(0)), real).view(uint))
    hi_bits = int(np.array(hi_cut, real).view(uint))
    best = None
    for keep in TABLE_KEEP:
        shift = frac - keep
        hb = hi_bits >> shift
        base = max(lo_bits >> shift, hb - TABLE_MAX + 1)
        n = hb - base + 1
        first = (np.arange(n, dtype=np.uint64) + np.uint64(base)) << np.uint64(shift)
        last = first + np.uint64((1 << shift) - 1)
        first[0], last[-1] = lo_bits, hi_bits
        a, b = first.astype(uint).view(real), last.astype(uint).view(real)
        ka, band_a, in_a = _bin_decisions(a, sq, sb)
        kb, band_b, in_b = _bin_decisions(b, sq, sb)
        clean = (ka == kb) & ~band_a & ~band_b
        entries = np.full(n, TABLE_AMBIG, np.uint8)
        if nb <= TABLE_EDGE_MAX_BINS:
            one = kb - ka <= 1
            entries[one] = TABLE_EDGE + ka[one]
        entries[clean & in_a & in_b] = ka[clean & in_a & in_b]
        entries[clean & ((b < sq[0]) | (a > sq[nb]))] = TABLE_OUT
        cost = (entries == TABLE_AMBIG) + TABLE_EDGE_COST * ((entries >= TABLE_EDGE) & (entries < TABLE_OUT))
        share = max(_share(_spread_weight(a, b, d), cost), _share(_log_weight(a, b, sq), cost))
        if best is None or share < best[0]:
            best = (share, entries, shift, base, n)
    share, entries, shift, base, n = best
    if not share <= TABLE_MAX_AMBIG:        # NaN: no weights at all
        return None
    # immutable (the table is shared by the calls the cache serves): an array over bytes
    entries = np.frombuffer(np.concatenate([entries, np.full(-n % 4, TABLE_AMBIG, np.uint8)]).tobytes(), np.uint8)
    return BinTable(entries, shift, base, n, share)
