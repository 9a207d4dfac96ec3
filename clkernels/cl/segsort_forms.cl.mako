## Segmented sort, extended input forms (host/segsort/forms.py): small grid-stride
## kernels around the segmented sort of segsort.cl.mako. Each def is one program;
## launches use 1-D work-groups of WG_SIZE and loop over the elements.
<%namespace name="common" file="common.cl.mako"/>

## keys of 8/16 bits -> 32 bits (sign or zero extension); float16 bits -> float32
## (vload_half is core OpenCL C: no cl_khr_fp16 needed; NaN stays NaN, -0.0 stays -0.0)
<%def name="widen(src_t, dst_t, wg_size=256)">
${common.prelude(real='float', wg_size=wg_size)}
__kernel void clk_widen(__global const ${src_t} *restrict src, __global ${dst_t} *restrict dst, const ulong n)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
%if src_t == 'half':
        dst[i] = vload_half(i, src);
%else:
        dst[i] = (${dst_t})src[i];
%endif
}
</%def>

## dst[i] = i
<%def name="iota(idx_t, wg_size=256)">
${common.prelude(real='float', wg_size=wg_size)}
__kernel void clk_iota(__global ${idx_t} *restrict dst, const ulong n)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        dst[i] = (${idx_t})i;
}
</%def>

## dst[didx ? didx[i] : i] = src[perm ? perm[i] : i] for items of 1..16 bytes: `words`
## words of item_t each (host/segsort/forms.py item_words)
<%def name="gather(item_t, idx_t, perm, didx, words=1, wg_size=256)">
${common.prelude(real='float', wg_size=wg_size)}
__kernel void clk_gather(__global const ${item_t} *restrict src, __global ${item_t} *restrict dst,
                         __global const ${idx_t} *restrict perm, __global const ${idx_t} *restrict didx,
                         const ulong n)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
%if perm:
        const ulong s = (ulong)perm[i];
%else:
        const ulong s = i;
%endif
%if didx:
        const ulong d = (ulong)didx[i];
%else:
        const ulong d = i;
%endif
%if words == 1:
        dst[d] = src[s];
%else:
%for w in range(words):
        dst[d * ${words} + ${w}] = src[s * ${words} + ${w}];
%endfor
%endif
    }
}
</%def>

## out[i] = perm[i] - begin of the segment holding position i (CSR offsets, off[0] = 0,
## nseg >= 1 when n > 0): the largest off[s] <= i, by binary search
<%def name="local_index(idx_t, wg_size=256)">
${common.prelude(real='float', wg_size=wg_size)}
__kernel void clk_local_index(__global const ${idx_t} *restrict perm, __global const ulong *restrict off,
                              const ulong nseg, __global long *restrict out, const ulong n)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        ulong lo = 0, hi = nseg - 1;
        while (lo < hi) {
            const ulong mid = lo + (hi - lo + 1) / 2;
            if (off[mid] <= i)
                lo = mid;
            else
                hi = mid - 1;
        }
        out[i] = (long)perm[i] - (long)off[lo];
    }
}
</%def>

## Segment ids (non-decreasing, in [0, nseg)) -> CSR offsets: off[s] = lower_bound(ids, s).
## clk_ids_check sets flag bit 1 for an id out of [0, nseg), bit 2 for a decrease.
<%def name="ids_offsets(id_t, wg_size=256)">
${common.prelude(real='float', wg_size=wg_size)}
__kernel void clk_ids_check(__global const ${id_t} *restrict ids, const ulong n, const ulong nseg,
                            __global uint *flag)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const long v = (long)ids[i];        // ulong ids beyond LONG_MAX turn negative: out of range
        uint bad = (v < 0 || (ulong)v >= nseg) ? 1u : 0u;
        if (i > 0 && (long)ids[i - 1] > v)
            bad |= 2u;
        if (bad)
            atomic_or(flag, bad);
    }
}

__kernel void clk_ids_offsets(__global const ${id_t} *restrict ids, const ulong n, const ulong nseg,
                              __global ulong *restrict off)
{
    for (ulong s = get_global_id(0); s <= nseg; s += get_global_size(0)) {
        ulong lo = 0, hi = n;
        while (lo < hi) {
            const ulong mid = lo + (hi - lo) / 2;
            if ((long)ids[mid] < (long)s)
                lo = mid + 1;
            else
                hi = mid;
        }
        off[s] = lo;
    }
}
</%def>

## Segments given by begins and ends (int64, device): check them, their lengths for
## the scan, the packed -> original position map, and the overlap check.
## flag bits: 1 begin < 0 or end > n, 2 begin > end, 4 overlap, 8 a segment of 2**32 or more
<%def name="gaps(idx_t, wg_size=256)">
${common.prelude(real='float', wg_size=wg_size)}
__kernel void clk_gap_lengths(__global const long *restrict begins, __global const long *restrict ends,
                              const ulong nseg, const long n, __global uint *restrict lens,
                              __global uint *flag)
{
    for (ulong s = get_global_id(0); s <= nseg; s += get_global_size(0)) {
        if (s == nseg) {
            lens[s] = 0u;
            continue;
        }
        const long b = begins[s], e = ends[s];
        uint bad = 0u;
        if (b < 0 || e > n)
            bad |= 1u;
        if (b > e)
            bad |= 2u;
        if (!bad && e - b >= 0x100000000L)
            bad |= 8u;
        if (bad)
            atomic_or(flag, bad);
        lens[s] = bad ? 0u : (uint)(e - b);
    }
}

// gidx[j] = begins[s] + j - off[s] for the segment s of packed position j; cover counts
// the packed positions landing on each original position (more than one: overlap)
__kernel void clk_gap_index(__global const ulong *restrict off, __global const long *restrict begins,
                            const ulong nseg, __global ${idx_t} *restrict gidx, __global uint *restrict cover,
                            __global uint *flag, const ulong total, const ulong n)
{
    for (ulong j = get_global_id(0); j < total; j += get_global_size(0)) {
        ulong lo = 0, hi = nseg - 1;
        while (lo < hi) {
            const ulong mid = lo + (hi - lo + 1) / 2;
            if (off[mid] <= j)
                lo = mid;
            else
                hi = mid - 1;
        }
        const ulong p = (ulong)begins[lo] + (j - off[lo]);
        gidx[j] = (${idx_t})p;
        if (p >= n || atomic_inc(cover + p) != 0u)   // p >= n: lengths that wrapped, overlapping
            atomic_or(flag, 4u);
    }
}
</%def>
