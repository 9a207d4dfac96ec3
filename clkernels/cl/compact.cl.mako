## Stream compaction of the runs of equal keys in a sorted uint64 array
## (host/primitives/compact.py): a flag where a run starts, an exclusive scan
## of the flags (scan.cl.mako), then each run's key and start scattered to its
## slot, and each run's length (and the longest).
<%namespace name="common" file="common.cl.mako"/>

<%def name="runs(wg_size)">
${common.prelude(real='float', wg_size=wg_size)}

// flags[i] = 1 where a new run starts in the sorted keys; longest[0] zeroed
// for run_lengths.
__kernel void run_flags(__global const ulong *keys, const uint n, __global uint *flags, __global uint *longest)
{
    const uint i = get_global_id(0);
    if (i == 0) longest[0] = 0u;
    if (i >= n) return;
    flags[i] = (i == 0 || keys[i] != keys[i - 1]) ? 1u : 0u;
}

// pos = exclusive scan of the flags; in place it becomes the run index of each
// element; the runs' keys and starts are scattered.
__kernel void run_scatter(__global const ulong *keys, const uint n, __global uint *pos,
                          __global ulong *run_keys, __global uint *run_start)
{
    const uint i = get_global_id(0);
    if (i >= n) return;
    const uint start = (i == 0 || keys[i] != keys[i - 1]) ? 1u : 0u;
    const uint c = pos[i] + start - 1u;
    if (start) { run_keys[c] = keys[i]; run_start[c] = i; }
    pos[i] = c;
}

// Each run's length, and the longest in longest[0]: the work-group's largest
// (a tree in local memory) in one atomic per group.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void run_lengths(__global const uint *run_start, const uint nruns, const uint n,
                 __global uint *run_len, volatile __global uint *longest)
{
    __local uint lmax[WG_SIZE];
    const uint c = get_global_id(0), lid = get_local_id(0);
    uint len = 0u;
    if (c < nruns) {
        len = (c + 1 < nruns ? run_start[c + 1] : n) - run_start[c];
        run_len[c] = len;
    }
    lmax[lid] = len;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG_SIZE / 2; s > 0; s >>= 1) {
        if (lid < s) lmax[lid] = max(lmax[lid], lmax[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) atomic_max(longest, lmax[0]);
}
</%def>

## Rows of an (n, D) row-major array X whose first coordinate s lies in
## [lo, hi) (compared in X's type; lo = -inf / hi = inf open the ends; with
## rest, every row whose s is not below lo: NaN and +inf too, so the last of
## a set of ranges loses no row): a flag per row, the exclusive scan of the
## flags (scan.cl.mako), then each selected row copied to its slot with its
## position plus start (the row's place in a larger array uploaded in chunks;
## host/primitives/compact.py: select_rows; a slab of a distributed join
## picks its points).
<%def name="select(real, dims, wg_size)">
${common.prelude(real=real, wg_size=wg_size)}
#define D ${dims}
#define SELECTED(s) (rest ? !((s) < lo) : ((s) >= lo && (s) < hi))

__kernel void select_flags(__global const REAL *X, const uint n, const REAL lo, const REAL hi, const uint rest,
                           __global uint *flags)
{
    const uint i = get_global_id(0);
    if (i >= n) return;
    const REAL s = X[(size_t)i * D];
    flags[i] = SELECTED(s) ? 1u : 0u;
}

// pos = exclusive scan of the flags: a selected row's slot
__kernel void select_gather(__global const REAL *X, const uint n, const REAL lo, const REAL hi, const uint rest,
                            __global const uint *pos, const long start, __global REAL *rows, __global long *ids)
{
    const uint i = get_global_id(0);
    if (i >= n) return;
    const REAL s = X[(size_t)i * D];
    if (SELECTED(s)) {
        const size_t p = pos[i];
        for (uint k = 0; k < D; ++k) rows[p * D + k] = X[(size_t)i * D + k];
        ids[p] = start + (long)i;
    }
}
</%def>
