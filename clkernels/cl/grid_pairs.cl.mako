## Pair counts and distance histograms over the cell-list grid (grid.cl.mako
## builds it; host/grid.py drives both).
##
## A = the grid whose cells (or points) the work is split over; B = the grid
## searched (B is A for self pairs). Points are SoA in cell order
## (x[k*n + i]); cells are sorted unique 64-bit ids with start/count.
## Neighbour cells: the 3^D stencil around a cell, wrapped when periodic (a
## dimension with 1 or 2 cells gets only its distinct neighbours, so no pair is
## seen twice), each looked up by binary search in B's sorted cell ids.
## Self pairs: neighbour cells with a larger id, plus j > i inside the own cell.
##
## Parameters: real, dim, periodic, wg_size, variant (which kernel: 'point' |
##   'row' | 'cell'), and at run time cross (A != B),
##   output 'count' (d^2 < r2) | 'hist' (nbins bins at run time, squared edges sq[0..nbins];
##   bin b holds sq[b] <= d^2 < sq[b+1], the last bin also d^2 == sq[nbins]),
##   hist_local (per-work-group histogram in local memory -- the edges and the
##   counters come as __local arguments sized by the host -- else global atomics),
##   local64 (64-bit local counters: a work-group may tally >= 2^32 pairs).
<%namespace name="common" file="common.cl.mako"/>

<%def name="helpers(dim, periodic)">
#define D ${dim}
#define NSTENCIL ${3 ** dim}

// lower_bound of key in ids[lo..n); the index or -1 when absent.
inline int find_cell(__global const ulong *ids, uint lo, uint n, ulong key)
{
    uint hi = n;
    while (lo < hi) {
        uint mid = (lo + hi) >> 1;
        if (ids[mid] < key) lo = mid + 1; else hi = mid;
    }
    return (lo < n && ids[lo] == key) ? (int)lo : -1;
}

// lower_bound: the first index with ids[index] >= key (n when none).
inline int find_first(__global const ulong *ids, uint n, ulong key)
{
    uint lo = 0, hi = n;
    while (lo < hi) {
        uint mid = (lo + hi) >> 1;
        if (ids[mid] < key) lo = mid + 1; else hi = mid;
    }
    return (int)lo;
}
</%def>

## Declares the geometry in private memory: m[D], stride[D] (and L, invL).
<%def name="load_geometry(dim, periodic)">
    ulong m[D], stride[D];
%if periodic:
    REAL L[D], invL[D];
%endif
%for k in range(dim):
    m[${k}] = igeom[${k}]; stride[${k}] = igeom[${dim + k}];
%if periodic:
    L[${k}] = geom[${2 * dim + k}]; invL[${k}] = geom[${3 * dim + k}];
%endif
%endfor
</%def>

## Cell coordinates c[D] (long) of cell id `cid`.
<%def name="decode(dim, cid)">
    long c[D];
%for k in range(dim):
    c[${k}] = (long)((${cid} / stride[${k}]) % m[${k}]);
%endfor
</%def>

## Opens the stencil loop: inside, `nid` is a valid neighbour id. Close with }.
<%def name="stencil_open(dim, periodic)">
    for (uint o = 0; o < NSTENCIL; ++o) {
        uint rem = o;
        ulong nid = 0;
        int ok = 1;
%for k in range(dim):
        {
            long dk = (long)(rem % 3u) - 1; rem /= 3u;
            long nc = c[${k}] + dk;
%if periodic:
            if (m[${k}] == 1UL && dk != 0) ok = 0;          // one cell: itself only
            if (m[${k}] == 2UL && dk == -1) ok = 0;         // two cells: -1 is +1
            nc = nc < 0 ? nc + (long)m[${k}] : (nc >= (long)m[${k}] ? nc - (long)m[${k}] : nc);
%else:
            if (nc < 0 || nc >= (long)m[${k}]) ok = 0;
%endif
            nid += (ulong)nc * stride[${k}];
        }
%endfor
        if (!ok) continue;
</%def>

## d2 = squared (minimum-image) distance between private p[D] and B's point j.
<%def name="dist2(dim, periodic, q)">
        REAL d2 = 0;
%for k in range(dim):
        {
            REAL dx = p[${k}] - ${q(k)};
%if periodic:
            dx -= L[${k}] * rint(dx * invL[${k}]);
%endif
            d2 = fma(dx, dx, d2);
        }
%endfor
</%def>

<%def name="tally(output, hist_local, local64)">
%if output == 'count':
        cnt += d2 < r2 ? 1UL : 0UL;
%else:
        if (d2 >= sq[0] && d2 <= sq[nbins]) {
            uint lo = 0, hi = nbins;
            while (hi - lo > 1) {
                uint mid = (lo + hi) >> 1;
                if (sq[mid] <= d2) lo = mid; else hi = mid;
            }
%if not hist_local:
            atomic_add_u64_g(out + lo, 1UL);
%elif local64:
            atomic_add_u64_l(lh + lo, 1UL);
%else:
            atomic_inc_u32_l(lh + lo);
%endif
        }
%endif
</%def>

## Kernel arguments shared by both variants.
<%def name="args(output)">
    __global const REAL *xa, uint na, __global const uint *a_point_cell,
    __global const ulong *a_ids, __global const uint *a_start, __global const uint *a_count, uint a_ncells,
    __global const REAL *xb, uint nb,
    __global const ulong *b_ids, __global const uint *b_start, __global const uint *b_count, uint b_ncells,
    __global const REAL *geom, __global const ulong *igeom, uint cross,
%if output == 'count':
    REAL r2,
%elif hist_local:
    uint nbins, __global const REAL *g_sq, __local REAL *sq, __local ${'ulong' if local64 else 'uint'} *lh,
%else:
    uint nbins, __global const REAL *g_sq,
%endif
    __global ulong *out
</%def>

## Set-up of the output state at kernel start (uniform).
<%def name="out_begin(output, hist_local, local64)">
%if output == 'count':
    __local ulong lred[WG_SIZE];
    ulong cnt = 0;
%elif hist_local:
    for (uint b = get_local_id(0); b < nbins; b += WG_SIZE) lh[b] = 0;
    for (uint b = get_local_id(0); b <= nbins; b += WG_SIZE) sq[b] = g_sq[b];
    barrier(CLK_LOCAL_MEM_FENCE);
%else:
    __global const REAL *sq = g_sq;
%endif
</%def>

## Flush at kernel end (uniform): the group's count or local histogram.
<%def name="out_end(output, hist_local, local64)">
%if output == 'count':
    uint t = get_local_id(0);
    lred[t] = cnt;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG_SIZE / 2; s > 0; s >>= 1) {
        if (t < s) lred[t] += lred[t + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0 && lred[0]) atomic_add_u64_g(out, lred[0]);
%elif hist_local:
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint b = get_local_id(0); b < nbins; b += WG_SIZE)
        if (lh[b]) atomic_add_u64_g(out + b, (ulong)lh[b]);
%endif
</%def>

## ------------------------------------------------------------------ kernels
<%def name="pairs(real, dim, periodic, wg_size, variant, output, hist_local, local64)">
${common.prelude(real=real, wg_size=wg_size)}
${helpers(dim, periodic)}
<% q_point = lambda k: "xb[(size_t)%d * nb + j]" % k %>
<% q_tile = lambda k: "tile[%d][tt]" % k %>

%if variant == 'point':
// One work-item per point of A (in cell order): the point against every
// point of its neighbour cells in B.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void grid_pairs_point(${args(output)})
{
${out_begin(output, hist_local, local64)}
${load_geometry(dim, periodic)}
    uint i = get_global_id(0);
    if (i < na) {
        REAL p[D];
%for k in range(dim):
        p[${k}] = xa[(size_t)${k} * na + i];
%endfor
        uint ca = a_point_cell[i];
        ulong aid = a_ids[ca];
${decode(dim, 'aid')}
${stencil_open(dim, periodic)}
            int own = !cross && nid == aid;
            if (!cross && nid < aid) continue;
            int cb = own ? (int)ca : find_cell(b_ids, cross ? 0 : ca + 1, b_ncells, nid);
            if (cb < 0) continue;
            uint j0 = own ? i + 1 : b_start[cb];
            uint j1 = b_start[cb] + b_count[cb];
            for (uint j = j0; j < j1; ++j) {
${dist2(dim, periodic, q_point)}
${tally(output, hist_local, local64)}
            }
        }
    }
${out_end(output, hist_local, local64)}
}

%endif
%if variant == 'row':
// One work-item per point of A, neighbour cells taken a row at a time: for
// each of the 3^(D-1) offsets in dimensions 1.., the row's cells c0-1..c0+1 of
// dimension 0 (stride 1) have consecutive ids, so their points are one
// contiguous range (two where a periodic row wraps): one binary search per
// range instead of one per cell. Self pairs: every neighbour point at a later
// sorted position (sorted by cell id, that is the larger cells plus j > i
// inside the own cell).
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void grid_pairs_row(${args(output)})
{
${out_begin(output, hist_local, local64)}
${load_geometry(dim, periodic)}
    uint i = get_global_id(0);
    if (i < na) {
        REAL p[D];
%for k in range(dim):
        p[${k}] = xa[(size_t)${k} * na + i];
%endfor
        ulong aid = a_ids[a_point_cell[i]];
${decode(dim, 'aid')}
        long m0 = (long)m[0], c0 = c[0];
        long lo0, hi0, lo1 = 1, hi1 = 0;        // dimension-0 ranges [lo, hi]
%if periodic:
        if (m0 <= 3) { lo0 = 0; hi0 = m0 - 1; }
        else if (c0 == 0) { lo0 = 0; hi0 = 1; lo1 = m0 - 1; hi1 = m0 - 1; }
        else if (c0 == m0 - 1) { lo0 = 0; hi0 = 0; lo1 = m0 - 2; hi1 = m0 - 1; }
        else { lo0 = c0 - 1; hi0 = c0 + 1; }
%else:
        lo0 = max(c0 - 1, (long)0); hi0 = min(c0 + 1, m0 - 1);
%endif
        for (uint o = 0; o < NSTENCIL / 3; ++o) {
            uint rem = o;
            ulong rid = 0;
            int ok = 1;
%for k in range(1, dim):
            {
                long dk = (long)(rem % 3u) - 1; rem /= 3u;
                long nc = c[${k}] + dk;
%if periodic:
                if (m[${k}] == 1UL && dk != 0) ok = 0;
                if (m[${k}] == 2UL && dk == -1) ok = 0;
                nc = nc < 0 ? nc + (long)m[${k}] : (nc >= (long)m[${k}] ? nc - (long)m[${k}] : nc);
%else:
                if (nc < 0 || nc >= (long)m[${k}]) ok = 0;
%endif
                rid += (ulong)nc * stride[${k}];
            }
%endfor
            if (!ok) continue;
            for (int seg = 0; seg < 2; ++seg) {
                long lo = seg ? lo1 : lo0, hi = seg ? hi1 : hi0;
                if (lo > hi) continue;
                ulong idhi = rid + (ulong)hi;
                int s = find_first(b_ids, b_ncells, rid + (ulong)lo);
                uint e = (uint)s;
                while (e < b_ncells && b_ids[e] <= idhi) ++e;
                if (e == (uint)s) continue;
                uint j0 = b_start[s], j1 = b_start[e - 1] + b_count[e - 1];
                if (!cross) j0 = max(j0, i + 1);
                for (uint j = j0; j < j1; ++j) {
${dist2(dim, periodic, q_point)}
${tally(output, hist_local, local64)}
                }
            }
        }
    }
${out_end(output, hist_local, local64)}
}

%endif
%if variant == 'cell':
// One work-group per cell of A: its points (WG_SIZE at a time, one per
// work-item) against tiles of each neighbour cell's points staged in local
// memory. Every branch around a barrier depends only on the cell (uniform).
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void grid_pairs_cell(${args(output)})
{
    __local REAL tile[D][WG_SIZE];
${out_begin(output, hist_local, local64)}
${load_geometry(dim, periodic)}
    uint lid = get_local_id(0);
    uint ca = get_group_id(0);
    ulong aid = a_ids[ca];
    uint a0 = a_start[ca], an = a_count[ca];
${decode(dim, 'aid')}
    for (uint abase = 0; abase < an; abase += WG_SIZE) {
        int va = abase + lid < an;
        REAL p[D];
%for k in range(dim):
        p[${k}] = va ? xa[(size_t)${k} * na + a0 + abase + lid] : (REAL)0;
%endfor
${stencil_open(dim, periodic)}
            int own = !cross && nid == aid;
            if (!cross && nid < aid) continue;
            int cb = own ? (int)ca : find_cell(b_ids, cross ? 0 : ca + 1, b_ncells, nid);
            if (cb < 0) continue;
            uint bfirst = own ? abase : 0;    // own cell: only j > i
            uint b0 = b_start[cb], bn = b_count[cb];
            for (uint bbase = bfirst; bbase < bn; bbase += WG_SIZE) {
                barrier(CLK_LOCAL_MEM_FENCE);
                if (bbase + lid < bn) {
%for k in range(dim):
                    tile[${k}][lid] = xb[(size_t)${k} * nb + b0 + bbase + lid];
%endfor
                }
                barrier(CLK_LOCAL_MEM_FENCE);
                uint tn = min((uint)WG_SIZE, bn - bbase);
                uint tfirst = own && bbase == abase ? lid + 1 : 0;
                if (va) {
                    for (uint tt = tfirst; tt < tn; ++tt) {
${dist2(dim, periodic, q_tile)}
${tally(output, hist_local, local64)}
                    }
                }
            }
        }
    }
${out_end(output, hist_local, local64)}
}
%endif
</%def>
