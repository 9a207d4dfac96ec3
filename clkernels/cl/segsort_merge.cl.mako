## Segmented sort, medium and long segments (seed section 3.3 and the grid
## bin): the block kernel (reg-sort of sub-group chunks, then smem-merge:
## merge-path merging in local memory) and the global-memory merge rounds of
## the grid bin. Element helpers and the register network come from
## segsort.cl.mako (same render parameters).
<%namespace name="common" file="common.cl.mako"/>
<%namespace name="ss" file="segsort.cl.mako"/>

## Body shared by the two block kernels: needs keys, start, n (valid elements
## of this tile), toff (index of the tile's first element in its segment).
## b: the binding (networks.Binding) of the sub-group chunks. Leaves the
## sorted tile of P elements in lm.
<%def name="block_body(b, P)">
<% k, m = b.k, b.m %>
    const uint lid = get_local_id(0);
    const uint tl = lid % ${m}u, chunk = lid / ${m}u;
%for r in range(k):
    ELEM v${r};
    { uint il = chunk * ${k * m}u + ${r * m}u + tl, i = toff + il;
      v${r} = il < n ? LOAD_ELEM(start + i, i) : sentinel_elem(i); }
%endfor
${ss.network(b)}
%for r in range(k):
    lm[LPAD(chunk * ${k * m}u + tl * ${k}u + ${r}u)] = v${r};
%endfor
    barrier(CLK_LOCAL_MEM_FENCE);
    // smem-merge: rounds of pairwise merges of sorted chunks c -> 2c; each
    // work-item finds its first output's split by merge path and merges K.
    #define A(i) lm[LPAD(base + (i))]
    #define B(i) lm[LPAD(base + c + (i))]
    for (uint c = ${k * m}u; c < ${P}u; c <<= 1) {
        const uint pos = lid * ${k}u;
        const uint base = pos & ~(2u * c - 1u);
        const uint diag = pos - base;
        uint lo = (uint)max((int)diag - (int)c, 0), hi = diag < c ? diag : c;   // (signed: no usub.sat, which Oclgrind lacks)
        while (lo < hi) {
            uint mid = (lo + hi) >> 1;
            if (ELEM_LESS(A(mid), B(diag - 1u - mid))) lo = mid + 1u; else hi = mid;
        }
        uint ia = lo, ib = diag - lo;
        ELEM a = A(min(ia, c - 1u)), b = B(min(ib, c - 1u));
        ELEM o[${k}];
        #pragma unroll
        for (uint r = 0; r < ${k}u; ++r) {
            bool ta = ib >= c || (ia < c && ELEM_LESS(a, b));
            o[r] = ta ? a : b;
            if (ta) { ++ia; a = A(min(ia, c - 1u)); } else { ++ib; b = B(min(ib, c - 1u)); }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        #pragma unroll
        for (uint r = 0; r < ${k}u; ++r) lm[LPAD(pos + r)] = o[r];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    #undef A
    #undef B
</%def>

## The grid bin's segment j for a packed position p: the largest j < ng with
## pstart[j] <= p.
<%def name="find_seg()">
inline uint find_seg(__global const ulong *pstart, uint ng, ulong p) {
    uint lo = 0, hi = ng;
    while (hi - lo > 1u) { uint mid = (lo + hi) >> 1; if (pstart[mid] <= p) lo = mid; else hi = mid; }
    return lo;
}
</%def>

## Block bin: one work-group (wg_size = P / k) per segment of length <= P.
## Both kernels stride over their work (segments of the bin, tiles of the
## grid bin) by the number of work-groups, with a trip count uniform in the
## work-group (barriers inside): launched from counts read on the host, one
## round each; from upper bounds (async mode), work-groups past the count
## read from the device do none.
<%def name="block(wg_size, bind, P, nbins, stride=False)">
<% k = bind.k %>
${common.prelude(real='float', wg_size=wg_size)}
${ss.elements()}
${find_seg()}
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void block_sort(__global const KEYU *keys, VAL_ARGS, uint mode,
                __global const ulong *off, __global const uint *seg_ids,
                __global uint *ctl, uint bin, __global KEYU *okeys)
{
    SG_DECL;
    SPEC_DECL;
    ${ss.scratch_decl(k)}
    __local ELEM lm[LPAD(${P}u)];
    const uint first = ctl[${nbins} + 1 + bin];
%if stride:
    const uint count = ctl[bin];
    for (uint gi = get_group_id(0); gi < count; gi += get_num_groups(0)) {
%else:
    {   // launched from the read count: one segment per work-group
        const uint gi = get_group_id(0);
%endif
        const uint s = seg_ids[first + gi];
        const ulong start = off[s];
        const uint n = (uint)(off[s + 1] - start), toff = 0;
${block_body(bind, P)}
        for (uint e = lid; e < n; e += WG_SIZE) {
            ELEM x = lm[LPAD(e)];
            uint i = elem_idx(x);
            okeys[start + e] = OUT_KEY(x, start + i);
            move_val(vals, ovals, vbytes, start + e, start + i);
        }
%if stride:
        barrier(CLK_LOCAL_MEM_FENCE);        // lm is rewritten by the next round
%endif
    }
    SPEC_FLUSH(ctl, ${nbins});
}

// Grid bin, first pass: the tiles of P elements of the long segments (the
// layout in hdr = [segments, packed total, longest padded segment], pstart,
// gstart, glen: see grid_layout), each sorted into the packed buffer at its
// own position (t * P), sentinels included.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void tile_sort(__global const KEYU *keys, uint mode, __global const ulong *pstart, __global const ulong *gstart,
               __global const uint *glen, __global const ulong *hdr, __global ELEM *packed,
               __global uint *ctl)
{
    SG_DECL;
    SPEC_DECL;
    ${ss.scratch_decl(k)}
    __local ELEM lm[LPAD(${P}u)];
    const uint ng = (uint)hdr[0];
    const ulong ntiles = hdr[1] / ${P}u;
    for (ulong t = get_group_id(0); t < ntiles; t += get_num_groups(0)) {
        const ulong p = t * ${P}u;
        const uint j = find_seg(pstart, ng, p);
        const ulong start = gstart[j];
        const uint toff = (uint)(p - pstart[j]);
        const uint n = min(glen[j] - toff, ${P}u);
${block_body(bind, P)}
        for (uint e = lid; e < ${P}u; e += WG_SIZE) packed[p + e] = lm[LPAD(e)];
        barrier(CLK_LOCAL_MEM_FENCE);        // lm is rewritten by the next round
    }
    SPEC_FLUSH(ctl, ${nbins});
}
</%def>

## Grid bin, merge rounds: sorted runs of width w -> 2w in every long segment
## (packed, each padded to a multiple of the tile, which K * WG_SIZE divides).
## A work-group makes K * WG_SIZE consecutive outputs: two work-items find
## its merge-path splits in global memory, the group loads the two input
## ranges into local memory (coalesced), each work-item merges K outputs
## after a merge-path search in local memory, and the group stores them
## (coalesced); a lone run (no partner) is copied (a uniform branch that
## skips the barriers of the merge). Work-groups stride over the packed total; a round with w at
## or above the longest padded segment (async mode launches rounds for the
## longest possible one) does nothing, and the gather takes the buffer the
## last real round wrote. The layout (hdr, pstart, gstart, glen) is the
## host's (read counts) or grid_layout's (async mode).
<%def name="grid(wg_size, K, T)">
${common.prelude(real='float', wg_size=wg_size)}
${ss.elements()}
${find_seg()}
#define TILE_OUT ${K * wg_size}u

// The layout of the grid bin's segments on the device (async mode): one
// work-group reads the bin's count and segment ids (ctl, seg_ids as binning
// left them) and writes their starts, lengths, packed starts (each padded to
// a multiple of the tile: an exclusive scan) and hdr = [segments, packed
// total, longest padded segment]. Invalid offsets (a flag in ctl) or more
// segments than the buffers hold (cap) give an empty layout.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void grid_layout(__global const ulong *off, __global const uint *seg_ids, __global const uint *ctl,
                 uint nb, uint cap, __global ulong *pstart, __global ulong *gstart, __global uint *glen,
                 __global ulong *hdr)
{
    __local ulong scan[WG_SIZE];
    __local ulong carry;
    __local uint tiles;
    const uint lid = get_local_id(0);
    const uint bin = nb - 1u, first = ctl[nb + 1u + bin];
    const uint count = (ctl[nb] || ctl[bin] > cap) ? 0u : ctl[bin];
    if (lid == 0) { carry = 0; tiles = 0; }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint base = 0; base < count; base += WG_SIZE) {
        const uint j = base + lid;
        ulong pad = 0;
        if (j < count) {
            const uint s = seg_ids[first + j];
            const ulong a = off[s];
            const uint len = (uint)(off[s + 1] - a);
            const uint nt = (uint)(((ulong)len + ${T - 1}u) / ${T}u);
            pad = (ulong)nt * ${T}u;
            gstart[j] = a;
            glen[j] = len;
            atomic_max(&tiles, nt);
        }
        scan[lid] = pad;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint d = 1; d < WG_SIZE; d <<= 1) {
            const ulong t = lid >= d ? scan[lid - d] : 0ul;
            barrier(CLK_LOCAL_MEM_FENCE);
            scan[lid] += t;
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (j < count) pstart[j] = carry + scan[lid] - pad;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid == WG_SIZE - 1u) carry += scan[lid];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        pstart[count] = carry;
        hdr[0] = count;
        hdr[1] = carry;
        hdr[2] = (ulong)tiles * ${T}u;
    }
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void grid_merge(__global const ELEM *src, __global ELEM *dst, __global const ulong *pstart,
                __global const ulong *hdr, ulong w)
{
    __local ELEM tile[${K * wg_size}];
    __local ulong split[2];
    const uint lid = get_local_id(0);
    const uint ng = (uint)hdr[0];
    const ulong total = w < hdr[2] ? hdr[1] : 0ul;
    for (ulong p0 = (ulong)get_group_id(0) * TILE_OUT; p0 < total; p0 += (ulong)get_num_groups(0) * TILE_OUT) {
        const uint g = find_seg(pstart, ng, p0);
        const ulong s0 = pstart[g], L = pstart[g + 1] - s0, q0 = p0 - s0;
        const ulong base = q0 & ~(2ul * w - 1ul);
        const ulong la = min(w, L - base);
        const long rest_ = (long)(L - base) - (long)w;        // signed: no usub.sat (Oclgrind)
        const ulong lb = rest_ > 0 ? min(w, (ulong)rest_) : 0ul;
        if (lb == 0) {                                    // a lone run: copy (uniform in the group)
            for (uint e = lid; e < TILE_OUT; e += WG_SIZE) dst[p0 + e] = src[p0 + e];
        } else {
            __global const ELEM *A = src + s0 + base;
            __global const ELEM *B = A + w;
            const ulong diag0 = q0 - base;
            if (lid < 2u) {
                const ulong diag = diag0 + (lid ? TILE_OUT : 0u);
                ulong lo = (ulong)max((long)diag - (long)lb, 0L), hi = diag < la ? diag : la;
                while (lo < hi) {
                    ulong mid = (lo + hi) >> 1;
                    if (ELEM_LESS(A[mid], B[diag - 1ul - mid])) lo = mid + 1ul; else hi = mid;
                }
                split[lid] = lo;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            const ulong a0 = split[0], b0 = diag0 - a0;
            const uint na = (uint)(split[1] - a0), nb = TILE_OUT - na;
            for (uint e = lid; e < TILE_OUT; e += WG_SIZE) tile[e] = e < na ? A[a0 + e] : B[b0 + (e - na)];
            barrier(CLK_LOCAL_MEM_FENCE);
            const uint d = lid * ${K}u;
            uint lo = (uint)max((int)d - (int)nb, 0), hi = d < na ? d : na;
            while (lo < hi) {
                uint mid = (lo + hi) >> 1;
                if (ELEM_LESS(tile[mid], tile[na + d - 1u - mid])) lo = mid + 1u; else hi = mid;
            }
            uint ia = lo, ib = d - lo;
            ELEM o[${K}];
            ELEM a = tile[min(ia, TILE_OUT - 1u)], b = tile[min(na + ib, TILE_OUT - 1u)];
            #pragma unroll
            for (uint r = 0; r < ${K}u; ++r) {
                bool ta = ib >= nb || (ia < na && ELEM_LESS(a, b));
                o[r] = ta ? a : b;
                if (ta) { ++ia; a = tile[min(ia, TILE_OUT - 1u)]; } else { ++ib; b = tile[min(na + ib, TILE_OUT - 1u)]; }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            #pragma unroll
            for (uint r = 0; r < ${K}u; ++r) tile[d + r] = o[r];
            barrier(CLK_LOCAL_MEM_FENCE);
            for (uint e = lid; e < TILE_OUT; e += WG_SIZE) dst[p0 + e] = tile[e];
            barrier(CLK_LOCAL_MEM_FENCE);        // tile and split are rewritten by the next round
        }
    }
}

// Grid bin, last pass: gather the input's keys (and values) in sorted order
// from the buffer of the last merge round (packed1 after an odd number of
// rounds: those of widths T, 2T, ... below the longest segment).
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void grid_gather(__global const ELEM *packed0, __global const ELEM *packed1, __global const ulong *pstart,
                 __global const ulong *hdr, __global const ulong *gstart, __global const uint *glen,
                 __global const KEYU *keys, VAL_ARGS, uint mode, __global KEYU *okeys)
{
    const uint ng = (uint)hdr[0];
    const ulong total = hdr[1];
    uint rounds = 0;
    for (ulong w = ${T}u; w < hdr[2]; w <<= 1) ++rounds;
    __global const ELEM *src = (rounds & 1u) ? packed1 : packed0;
    for (ulong p = get_global_id(0); p < total; p += get_global_size(0)) {
        const uint g = find_seg(pstart, ng, p);
        const ulong q = p - pstart[g];
        if (q < glen[g]) {
            const ulong start = gstart[g];
            const ELEM x = src[p];
            const uint i = elem_idx(x);
            okeys[start + q] = OUT_KEY(x, start + i);
            move_val(vals, ovals, vbytes, start + q, start + i);
        }
    }
}
</%def>
