## Stream compaction of the runs of equal keys in a sorted uint64 array
## (host/primitives/compact.py): a flag where a run starts, an exclusive scan
## of the flags (scan.cl.mako), then each run's key and start scattered to its
## slot, and each run's length.
<%namespace name="common" file="common.cl.mako"/>

<%def name="runs(wg_size)">
${common.prelude(real='float', wg_size=wg_size)}

// flags[i] = 1 where a new run starts in the sorted keys.
__kernel void run_flags(__global const ulong *keys, const uint n, __global uint *flags)
{
    const uint i = get_global_id(0);
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

__kernel void run_lengths(__global const uint *run_start, const uint nruns, const uint n,
                          __global uint *run_len)
{
    const uint c = get_global_id(0);
    if (c >= nruns) return;
    run_len[c] = (c + 1 < nruns ? run_start[c + 1] : n) - run_start[c];
}
</%def>
