## Device-to-device copy (host/copy): the smallest tuned operation and the bandwidth ceiling.
<%namespace name="common" file="common.cl.mako"/>

<%def name="copy(wg_size)">
${common.prelude(real='float', wg_size=wg_size)}
// Grid-stride copy of n uint4 words: the device-to-device bandwidth ceiling.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void copy_u4(__global const uint4 *restrict src, __global uint4 *restrict dst, ulong n)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        dst[i] = src[i];
}
</%def>
