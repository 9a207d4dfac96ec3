## Device cell-list grid: bounds, 64-bit cell keys, a bitonic sort of
## (key, index) pairs, an exclusive scan, cell compaction and the SoA gather.
## Host side: host/grid.py. The pair kernels over the grid: grid_pairs.cl.mako.
##
## Geometry buffers (written by the host, read by every kernel that needs
## them; D = dim):
##   geom  REAL[4*D]:  lo[D], width[D], box[D], 1/box[D]   (box only when periodic)
##   igeom ulong[2*D]: ncell[D], stride[D]                 (stride[0] = 1)
## A point's cell coordinate is c = clamp(floor((x - lo) / width), 0, ncell - 1)
## (x wrapped into [0, box) first when periodic); its key sum(c * stride).
<%namespace name="common" file="common.cl.mako"/>

## ------------------------------------------------------------ point kernels
<%def name="points(real, dim, periodic, wg_size)">
${common.prelude(real=real, wg_size=wg_size)}
#define D ${dim}

// Partial bounds: group g writes its min/max per dimension to mins/maxs[g*D+k]
// and whether it saw a NaN/inf to bad[g]. x is AoS (n, D), row-major.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void grid_bounds(__global const REAL *x, uint n,
                 __global REAL *mins, __global REAL *maxs, __global uint *bad)
{
    __local REAL lmin[WG_SIZE];
    __local REAL lmax[WG_SIZE];
    __local uint lbad[WG_SIZE];
    uint t = get_local_id(0);
    REAL mn[D], mx[D];
    uint nonfinite = 0;
%for k in range(dim):
    mn[${k}] = INFINITY; mx[${k}] = -INFINITY;
%endfor
    for (uint i = get_global_id(0); i < n; i += get_global_size(0)) {
%for k in range(dim):
        {
            REAL v = x[(size_t)i * D + ${k}];
            nonfinite |= !isfinite(v);
            mn[${k}] = fmin(mn[${k}], v);
            mx[${k}] = fmax(mx[${k}], v);
        }
%endfor
    }
    lbad[t] = nonfinite;
%for k in range(dim):
    lmin[t] = mn[${k}]; lmax[t] = mx[${k}];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG_SIZE / 2; s > 0; s >>= 1) {
        if (t < s) {
            lmin[t] = fmin(lmin[t], lmin[t + s]);
            lmax[t] = fmax(lmax[t], lmax[t + s]);
%if k == 0:
            lbad[t] |= lbad[t + s];
%endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) {
        mins[get_group_id(0) * D + ${k}] = lmin[0];
        maxs[get_group_id(0) * D + ${k}] = lmax[0];
%if k == 0:
        bad[get_group_id(0)] = lbad[0];
%endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);
%endfor
}

// keys[i] = cell key of point i, vals[i] = i for i < n; padding up to n2
// (a power of two) gets the largest key and index so it sorts last.
__kernel void grid_keys(__global const REAL *x, uint n, uint n2,
                        __global const REAL *geom, __global const ulong *igeom,
                        __global ulong *keys, __global uint *vals)
{
    uint i = get_global_id(0);
    if (i >= n2) return;
    if (i >= n) { keys[i] = 0xffffffffffffffffUL; vals[i] = 0xffffffffu; return; }
    ulong key = 0;
%for k in range(dim):
    {
        REAL v = x[(size_t)i * D + ${k}];
%if periodic:
        REAL L = geom[${2 * dim + k}];
        v = v - L * floor(v / L);
%endif
        REAL c = floor((v - geom[${k}]) / geom[${dim + k}]);
        ulong m = igeom[${k}];
        ulong ci = c <= (REAL)0 ? 0UL : (c >= (REAL)m ? m - 1UL : (ulong)c);
        ci = min(ci, m - 1UL);
        key += ci * igeom[${dim + k}];
    }
%endfor
    keys[i] = key;
    vals[i] = i;
}

// SoA gather in sorted order: coords[k*n + i] = x[perm[i]*D + k].
__kernel void grid_gather(__global const REAL *x, uint n, __global const uint *perm,
                          __global REAL *coords)
{
    uint i = get_global_id(0);
    if (i >= n) return;
    size_t src = (size_t)perm[i] * D;
%for k in range(dim):
    coords[(size_t)${k} * n + i] = x[src + ${k}];
%endfor
}
</%def>

## -------------------------------------------------------------- bitonic sort
## Sorts (key, val) pairs ascending by (key, val) in place; the length is a
## power of two and at least 2*WG_SIZE. Work-group blocks of 2*WG_SIZE pairs
## are handled in local memory; longer strides by one launch per step.
<%def name="sort(wg_size)">
${common.prelude(real='float', wg_size=wg_size)}
#define BLOCK (2 * WG_SIZE)

inline void cmpx_local(__local ulong *lk, __local uint *lv, uint i, uint p, int asc)
{
    ulong ka = lk[i], kb = lk[p];
    uint va = lv[i], vb = lv[p];
    int greater = ka > kb || (ka == kb && va > vb);
    if (greater == asc) { lk[i] = kb; lk[p] = ka; lv[i] = vb; lv[p] = va; }
}

// Full bitonic sort of each block (stages k = 2 .. BLOCK), directions set by
// the global position so that the blocks form the next stage's sequences.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void bitonic_block_sort(__global ulong *keys, __global uint *vals)
{
    __local ulong lk[BLOCK];
    __local uint lv[BLOCK];
    uint t = get_local_id(0);
    size_t base = get_group_id(0) * (size_t)BLOCK;
    lk[t] = keys[base + t]; lk[t + WG_SIZE] = keys[base + t + WG_SIZE];
    lv[t] = vals[base + t]; lv[t + WG_SIZE] = vals[base + t + WG_SIZE];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint k = 2; k <= BLOCK; k <<= 1) {
        for (uint j = k >> 1; j > 0; j >>= 1) {
            uint i = ((t & ~(j - 1)) << 1) | (t & (j - 1));
            cmpx_local(lk, lv, i, i + j, ((base + i) & k) == 0);
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    keys[base + t] = lk[t]; keys[base + t + WG_SIZE] = lk[t + WG_SIZE];
    vals[base + t] = lv[t]; vals[base + t + WG_SIZE] = lv[t + WG_SIZE];
}

// One compare-exchange step of stage k at stride j >= BLOCK (global memory).
__kernel void bitonic_step(__global ulong *keys, __global uint *vals, ulong k, ulong j)
{
    ulong t = get_global_id(0);
    ulong i = ((t & ~(j - 1)) << 1) | (t & (j - 1));
    ulong p = i + j;
    int asc = (i & k) == 0;
    ulong ka = keys[i], kb = keys[p];
    uint va = vals[i], vb = vals[p];
    int greater = ka > kb || (ka == kb && va > vb);
    if (greater == asc) { keys[i] = kb; keys[p] = ka; vals[i] = vb; vals[p] = va; }
}

// The remaining steps j = WG_SIZE .. 1 of stage k, within each block.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void bitonic_block_merge(__global ulong *keys, __global uint *vals, ulong k)
{
    __local ulong lk[BLOCK];
    __local uint lv[BLOCK];
    uint t = get_local_id(0);
    size_t base = get_group_id(0) * (size_t)BLOCK;
    lk[t] = keys[base + t]; lk[t + WG_SIZE] = keys[base + t + WG_SIZE];
    lv[t] = vals[base + t]; lv[t + WG_SIZE] = vals[base + t + WG_SIZE];
    barrier(CLK_LOCAL_MEM_FENCE);
    int asc = (base & k) == 0;     // k >= 2*BLOCK: one direction per block
    for (uint j = WG_SIZE; j > 0; j >>= 1) {
        uint i = ((t & ~(j - 1)) << 1) | (t & (j - 1));
        cmpx_local(lk, lv, i, i + j, asc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    keys[base + t] = lk[t]; keys[base + t + WG_SIZE] = lk[t + WG_SIZE];
    vals[base + t] = lv[t]; vals[base + t + WG_SIZE] = lv[t + WG_SIZE];
}
</%def>

## ------------------------------------------------------------------- scan
## Exclusive scan of uint in place, multi-level: scan_block scans chunks of
## WG_SIZE*ITEMS and writes each chunk's total to sums[group]; the host scans
## sums the same way and scan_add adds them back.
<%def name="scan(wg_size, items)">
${common.prelude(real='float', wg_size=wg_size)}
#define ITEMS ${items}
#define CHUNK (WG_SIZE * ITEMS)

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void scan_block(__global uint *data, uint n, __global uint *sums)
{
    __local uint buf[CHUNK];
    __local uint tot[WG_SIZE];
    uint t = get_local_id(0);
    size_t base = get_group_id(0) * (size_t)CHUNK;
    for (uint s = 0; s < ITEMS; ++s) {
        size_t idx = base + s * WG_SIZE + t;
        buf[s * WG_SIZE + t] = idx < n ? data[idx] : 0u;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    uint acc = 0;
    for (uint s = 0; s < ITEMS; ++s) {
        uint v = buf[t * ITEMS + s];
        buf[t * ITEMS + s] = acc;
        acc += v;
    }
    tot[t] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint off = 1; off < WG_SIZE; off <<= 1) {
        uint v = t >= off ? tot[t - off] : 0u;
        barrier(CLK_LOCAL_MEM_FENCE);
        tot[t] += v;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    uint prefix = tot[t] - acc;
    for (uint s = 0; s < ITEMS; ++s) buf[t * ITEMS + s] += prefix;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = 0; s < ITEMS; ++s) {
        size_t idx = base + s * WG_SIZE + t;
        if (idx < n) data[idx] = buf[s * WG_SIZE + t];
    }
    if (t == WG_SIZE - 1) sums[get_group_id(0)] = tot[WG_SIZE - 1];
}

__kernel void scan_add(__global uint *data, uint n, __global const uint *sums)
{
    size_t idx = get_global_id(0);
    if (idx < n) data[idx] += sums[idx / CHUNK];
}
</%def>

## ------------------------------------------------------------- compaction
<%def name="compact(wg_size)">
${common.prelude(real='float', wg_size=wg_size)}

// flags[i] = 1 where a new cell starts in the sorted keys.
__kernel void cell_flags(__global const ulong *keys, uint n, __global uint *flags)
{
    uint i = get_global_id(0);
    if (i >= n) return;
    flags[i] = (i == 0 || keys[i] != keys[i - 1]) ? 1u : 0u;
}

// pos = exclusive scan of the flags; in place it becomes point_cell (the
// index of each sorted point's cell); cell starts and ids are scattered.
__kernel void cell_compact(__global const ulong *keys, uint n, __global uint *pos,
                           __global ulong *cell_ids, __global uint *cell_start)
{
    uint i = get_global_id(0);
    if (i >= n) return;
    uint start = (i == 0 || keys[i] != keys[i - 1]) ? 1u : 0u;
    uint c = pos[i] + start - 1u;
    if (start) { cell_ids[c] = keys[i]; cell_start[c] = i; }
    pos[i] = c;
}

__kernel void cell_counts(__global const uint *cell_start, uint ncells, uint n,
                          __global uint *cell_count)
{
    uint c = get_global_id(0);
    if (c >= ncells) return;
    cell_count[c] = (c + 1 < ncells ? cell_start[c + 1] : n) - cell_start[c];
}
</%def>
