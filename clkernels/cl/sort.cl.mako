## Sort of (key, value) pairs: uint64 keys, uint32 values (host/primitives/sort.py).
<%namespace name="common" file="common.cl.mako"/>

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

