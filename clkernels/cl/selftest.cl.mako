## Kernels that exercise common.cl.mako's primitives; the tests and
## `python -m clkernels info --check` run them against numpy.
<%namespace name="common" file="common.cl.mako"/>

<%def name="subgroups(wg_size)">
${common.prelude(real='float', wg_size=wg_size)}
// One work-item per element; every primitive's result written per lane.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void sg_check(__global const uint *a, __global const uint *lanes, __global const uint *masks,
              __global const float *f, __global const ulong *w,
              __global uint *o_shuffle, __global uint *o_xor, __global uint *o_bcast,
              __global uint *o_sum, __global float *o_fsum, __global ulong *o_wsum,
              __global ulong *o_wshuffle, __global uint *o_max,
              __global uint *o_ballot, __global uint *o_lane, __global uint *o_size,
              __global uint *o_scan)
{
    SG_DECL;
    size_t i = get_global_id(0);
    uint v = a[i];
    o_shuffle[i] = sg_shuffle(sg_mem, v, lanes[i] % sg_size());
    o_xor[i] = sg_shuffle_xor(sg_mem, v, masks[i] % sg_size());
    o_bcast[i] = sg_broadcast(sg_mem, v, (sg_id() * 7u + 3u) % sg_size());
    o_sum[i] = sg_reduce_add(sg_mem, v);
    o_fsum[i] = sg_reduce_add_f(sg_mem, f[i]);
    o_wsum[i] = sg_reduce_add_ul(sg_mem, w[i]);
    o_wshuffle[i] = sg_shuffle_ul(sg_mem, w[i], lanes[i] % sg_size());
    o_max[i] = sg_reduce_max(sg_mem, v);
    o_ballot[i] = sg_ballot(sg_mem, (int)(v & 1u));
    o_lane[i] = sg_lane();
    o_size[i] = sg_size();
    o_scan[i] = sg_scan_add(sg_mem, v);
}
</%def>

<%def name="atomics(wg_size)">
${common.prelude(real='float', wg_size=wg_size)}
// Heavy contention: every work-item hits the same few words.
// g32[0] += a[i]; g32[1] = inc; g32[2] = max; g64[0] += w[i]; gf[0] += f[i];
// l32 / l64 accumulate per work-group in local memory, then one work-item adds
// them to g32[3] / g64[1] (tests local and global atomics together).
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void atomics_check(__global const uint *a, __global const ulong *w, __global const float *f, uint n,
                   volatile __global uint *g32, volatile __global ulong *g64, volatile __global float *gf
%if int64_extended_atomics:
                   , volatile __global ulong *g64max
%endif
                   )
{
    __local uint l32;
    __local ulong l64;
    size_t i = get_global_id(0);
    if (get_local_id(0) == 0) { l32 = 0; l64 = 0; }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i < n) {
        atomic_add_u32_g(g32, a[i]);
        atomic_inc_u32_g(g32 + 1);
        atomic_max_u32_g(g32 + 2, a[i]);
        atomic_add_u64_g(g64, w[i]);
        atomic_add_f32_g(gf, f[i]);
        atomic_add_u32_l(&l32, a[i]);
        atomic_add_u64_l(&l64, w[i]);
%if int64_extended_atomics:
        atomic_max_u64_g(g64max, w[i]);
%endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
        atomic_add_u32_g(g32 + 3, l32);
        atomic_add_u64_g(g64 + 1, l64);
    }
}
</%def>

## Deliberately broken: the tests check that its build log comes back.
<%def name="broken()">
${common.prelude(real='float', wg_size=32)}
__kernel void broken(__global uint *out) { out[0] = this_name_is_undeclared; }
</%def>

## Autotuner tests (tests/test_autotune.py): a tunable kernel with injectable
## failures. variant: 'good'; 'broken' (does not build); 'wrong' (one element
## off). Each work-item maps `items` consecutive elements; no
## reqd_work_group_size, so the kernel's own limit decides what launches.
<%def name="tune_probe(wg_size, variant, items)">
${common.prelude(real='float', wg_size=wg_size)}
__kernel void tune_probe(__global const uint *a, __global uint *out, uint n)
{
%if variant == 'broken':
    this_name_is_undeclared_too;
%endif
    for (uint j = 0; j < ${items}u; ++j) {
        size_t i = get_global_id(0) * ${items}u + j;
        if (i < n) {
            uint v = a[i] * 2654435761u + 12345u;
%if variant == 'wrong':
            if (i == n / 2) v += 1u;
%endif
            out[i] = v;
        }
    }
}
</%def>

## common.cl.mako's clk_image_count, one value a work-item (tests/test_primitives.py
## checks it against numpy's rint(d / L)).
<%def name="image_count()">
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF
${common.image_count()}
__kernel void image_count_check(__global const double *d, __global const double *L, const uint n,
                                __global double *out)
{
    const uint i = get_global_id(0);
    if (i < n) out[i] = clk_image_count(d[i], L[i], 1.0 / L[i]);
}
</%def>
