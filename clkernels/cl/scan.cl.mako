## Exclusive prefix sum of uint32 (host/primitives/scan.py).
<%namespace name="common" file="common.cl.mako"/>

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

