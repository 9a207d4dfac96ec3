## Segmented sort (seed: fast-segmented-sort-on-gpus.txt, section 3):
## element helpers, the N-to-M register bitonic network (Algorithm 1),
## binning (histogram-scan-bin), the reg-sort kernel of the warp bins and
## smallsort (the shortest bins, one launch over all segments that needs no
## bin counts and counts them for the other bins).
## The local-memory merge and the grid merge live in segsort_merge.cl.mako.
##
## Every element is sorted as a composite (mapped key, index in its segment)
## -- keys-only sorts as the mapped key alone (`bare` below: padding then ties
## with a real maximum key, the same bits):
## the mapped key is an unsigned integer whose order is the requested order
## (floats: sign flip, NaN canonicalized to the maximum, -0.0 as +0.0;
## descending: complemented, NaN kept at the maximum), the index breaks ties
## (so the sort is stable and every element is distinct) and lets the write-out
## gather the values and, for float keys, the input's own key bits (integer
## keys are un-mapped in registers). Padding elements carry the
## maximum key and an index >= the segment length, so they sort after every
## real element, NaN included.
##
## Render parameters shared by every def:
##   key_bits 32|64 (key kind, order and value width are run-time arguments)
##   bare: keys only (the host decides): an element is the mapped key alone
##     -- equal integer keys are equal bits, so neither stability nor the
##     write-out needs the index -- half the registers, shuffles and local
##     memory, and one compare per exchange. Float keys that tie without
##     being equal bits (-0.0 and +0.0; NaNs of other payloads) come out
##     canonical (+0.0, the canonical NaN); a kernel that loads one raises the
##     control word SPEC, and `floatfix` then rewrites the zero and NaN runs
##     of the segments holding such keys with the input's own bits, in input
##     order (stable).
<%namespace name="common" file="common.cl.mako"/>

## Types, key mapping, comparisons and the element shuffle.
<%def name="elements()">
<%
    ku = 'uint' if key_bits == 32 else 'ulong'
    sign = '0x80000000u' if key_bits == 32 else '0x8000000000000000ul'
    ones = '0xFFFFFFFFu' if key_bits == 32 else '0xFFFFFFFFFFFFFFFFul'
    expm = '0x7F800000u' if key_bits == 32 else '0x7FF0000000000000ul'
%>
typedef ${ku} KEYU;                 // raw key bits
#define KEY_ONES ${ones}
#define CANON_NAN ${'0x7FC00000u' if key_bits == 32 else '0x7FF8000000000000ul'}

// mode: bits 0-1 key kind (0 unsigned, 1 signed, 2 float), bit 2 descending
// (run-time arguments: one program serves every key type of a width).
inline KEYU map_key(KEYU u, uint mode) {
    const uint kind = mode & 3u;
    if (kind == 2u) {
        if ((u & ~${sign}) > ${expm}) return KEY_ONES;  // NaN: last in both orders
        if (u == ${sign}) u = 0;                        // -0.0 ties with +0.0
        u = (u & ${sign}) ? ~u : (u | ${sign});
    } else if (kind == 1u) {
        u ^= ${sign};
    }
    if (mode & 4u) u = ~u;
    return u;
}

// The input key of an element: integer keys invert the mapping (no memory
// access); float keys are gathered so that -0.0 and NaN payloads survive.
inline KEYU unmap_key(KEYU u, uint mode) {
    if (mode & 4u) u = ~u;
    return (mode & 3u) == 1u ? (u ^ ${sign}) : u;
}
%if bare:
// the input key of a bare element (floats: the canonical zero and NaN)
inline KEYU unmap_bare(KEYU u, uint mode) {
    if ((mode & 3u) != 2u) return unmap_key(u, mode);
    if (u == KEY_ONES) return CANON_NAN;
    if (mode & 4u) u = ~u;
    return (u & ${sign}) ? (u ^ ${sign}) : ~u;
}
#define OUT_KEY(e, src) unmap_bare(elem_key(e), mode)
%else:
#define OUT_KEY(e, src) (((mode & 3u) == 2u) ? keys[src] : unmap_key(elem_key(e), mode))
%endif

// Values: any 4- or 8-byte type, moved as bits; vbytes 0 means none.
#define VAL_ARGS __global const uchar *vals, __global uchar *ovals, uint vbytes
inline void move_val(__global const uchar *vals, __global uchar *ovals, uint vbytes, ulong dst, ulong src) {
    if (vbytes == 4u) ((__global uint *)ovals)[dst] = ((__global const uint *)vals)[src];
    else if (vbytes == 8u) ((__global ulong *)ovals)[dst] = ((__global const ulong *)vals)[src];
}

%if bare:
typedef KEYU ELEM;
#define ELEM_LESS(a, b) ((a) < (b))
inline int key_nan(KEYU u) { return (u & ~${sign}) > ${expm}; }
// 1 for a float key the bare output would not give back bit for bit
inline uint special_key(KEYU u, uint mode) {
    return ((mode & 3u) == 2u && (u == ${sign} || (key_nan(u) && u != CANON_NAN))) ? 1u : 0u;
}
inline ELEM load_elem(KEYU u, uint mode, uint *spec) { *spec |= special_key(u, mode); return map_key(u, mode); }
#define SPEC_DECL uint spec_ = 0u
#define LOAD_ELEM(src, i) load_elem(keys[src], mode, &spec_)
#define SPEC_FLUSH(ctl, nb) if (spec_) atomic_or((ctl) + SPEC_WORD(nb), 1u)
inline ELEM sentinel_elem(uint i) { return KEY_ONES; }     // ties with a real maximum: the same bits
inline uint elem_idx(ELEM e) { return 0u; }
inline KEYU elem_key(ELEM e) { return e; }
%if key_bits == 32:
#define SHFL_XOR_ELEM(v, m) sg_shuffle_xor(sg_mem, (v), (m))
#define SHFL_ELEM(v, l) sg_shuffle(sg_mem, (v), (l))
%else:
#define SHFL_XOR_ELEM(v, m) sg_shuffle_xor_ul(sg_mem, (v), (m))
#define SHFL_ELEM(v, l) sg_shuffle_ul(sg_mem, (v), (l))
%endif
%elif key_bits == 32:
// (mapped key << 32) | index: one 64-bit compare orders key, then index.
typedef ulong ELEM;
#define ELEM_LESS(a, b) ((a) < (b))
inline ELEM make_elem(KEYU k, uint i, uint mode) { return ((ulong)map_key(k, mode) << 32) | i; }
inline ELEM sentinel_elem(uint i) { return ((ulong)0xFFFFFFFFu << 32) | i; }
inline uint elem_idx(ELEM e) { return (uint)e; }
inline KEYU elem_key(ELEM e) { return (uint)(e >> 32); }
#define SHFL_XOR_ELEM(v, m) sg_shuffle_xor_ul(sg_mem, (v), (m))
#define SHFL_ELEM(v, l) sg_shuffle_ul(sg_mem, (v), (l))
%else:
// (mapped key, index) in a ulong2.
typedef ulong2 ELEM;
#define ELEM_LESS(a, b) ((a).x < (b).x || ((a).x == (b).x && (a).y < (b).y))
inline ELEM make_elem(KEYU k, uint i, uint mode) { return (ulong2)(map_key(k, mode), (ulong)i); }
inline ELEM sentinel_elem(uint i) { return (ulong2)(KEY_ONES, (ulong)i); }
inline uint elem_idx(ELEM e) { return (uint)e.y; }
inline KEYU elem_key(ELEM e) { return e.x; }
inline ELEM shfl_xor_elem2(__local uint *sg_mem, ELEM v, uint m) {
    return (ulong2)(sg_shuffle_xor_ul(sg_mem, v.x, m), (ulong)sg_shuffle_xor(sg_mem, (uint)v.y, m));
}
#define SHFL_XOR_ELEM(v, m) shfl_xor_elem2(sg_mem, (v), (m))
inline ELEM shfl_elem2(__local uint *sg_mem, ELEM v, uint l) {
    return (ulong2)(sg_shuffle_ul(sg_mem, v.x, l), (ulong)sg_shuffle(sg_mem, (uint)v.y, l));
}
#define SHFL_ELEM(v, l) shfl_elem2(sg_mem, (v), (l))
%endif
%if not bare:
#define SPEC_DECL
#define LOAD_ELEM(src, i) make_elem(keys[src], (i), mode)
#define SPEC_FLUSH(ctl, nb)
%endif
// the control word SPEC of a plan of nb bins (the ctl layout at binning)
#define SPEC_WORD(nb) (3u * (nb) + 1u)
// Local arrays of ELEMs are padded by one element per 128 bytes: LPAD(i) is
// element i's slot, so that work-items at a stride of k elements (the direct
// layout of the networks) hit different banks.
<% elem_bytes = key_bits // 8 * (1 if bare else 2) %>
#define LPAD(i) ((i) + ((i) >> ${{4: 5, 8: 4, 16: 3}[elem_bytes]}))
#define CMP_SWAP(a, b) { ELEM _a = (a), _b = (b); bool _s = ELEM_LESS(_b, _a); (a) = _s ? _b : _a; (b) = _s ? _a : _b; }
</%def>

## The bitonic network of binding b (a networks.Binding: b.k registers
## v0..v{k-1} of b.m cooperating work-items, b.network its steps, one block of
## code each); needs `tl` (0..m-1, the work-item's rank in its segment) and
## `lid`. Render parameter
## xchg: 'shuffle' exchanges through the sub-group shuffles (registers on
## nv/khr); 'scratch' through the local array `xs` of k * WG_SIZE elements
## with one barrier pair per step (the default of the `local` back end, whose
## emulated shuffles would cost a barrier pair per shuffled word).
<%def name="network(b)">
%for st in b.network:
%if st.kind == 'local':
// exch_local mask ${st.mask}
%for r in st.regs:
CMP_SWAP(v${r}, v${r ^ st.mask});
%endfor
%else:
{   // exch_${st.kind}: partner work-item tl ^ ${st.partner}, register r ^ ${st.reg}
    const bool lo = (tl & ${st.lo_bit}u) == 0;
%if xchg == 'scratch':
    barrier(CLK_LOCAL_MEM_FENCE);
%for r in range(b.k):
    xs[${r} * WG_SIZE + lid] = v${r};
%endfor
    barrier(CLK_LOCAL_MEM_FENCE);
%for r in range(b.k):
    ELEM p${r} = xs[${r ^ st.reg} * WG_SIZE + (lid ^ ${st.partner}u)];
%endfor
%else:
%for r in range(b.k):
    ELEM p${r} = SHFL_XOR_ELEM(v${r ^ st.reg}, ${st.partner}u);
%endfor
%endif
%for r in range(b.k):
    v${r} = (ELEM_LESS(p${r}, v${r}) == lo) ? p${r} : v${r};
%endfor
}
%endif
%endfor
</%def>

## The in-register transpose of binding b (b.transpose, a schedule of
## host/segsort/networks.py): xor-stage shuffles, then register moves (k >= m)
## or one indexed shuffle per register (k < m).
<%def name="transpose(b)">
<% t = b.transpose %>
%for sw in t.swaps:
{ const bool b = (tl / ${sw.unit}u) & ${sw.bit}u; ELEM t = SHFL_XOR_ELEM(b ? v${sw.lo} : v${sw.hi}, ${sw.lanes}u); if (b) v${sw.lo} = t; else v${sw.hi} = t; }
%endfor
%if t.groups:
{ const uint src = (tl % ${b.k}u) * ${t.groups}u + tl / ${b.k}u + (sg_lane() - tl);
%for r in range(b.k):
  v${r} = SHFL_ELEM(v${r}, src);
%endfor
}
%else:
%for r in range(b.k):
ELEM w${r} = v${r};
%endfor
%for mv in t.moves:
v${mv.dst} = w${mv.src};
%endfor
%endif
</%def>

<%def name="scratch_decl(k, striped=False)">
%if xchg == 'scratch' or striped:
    __local ELEM xs[LPAD(${k}u * WG_SIZE)];
%endif
</%def>

## ---------------------------------------------------------------- binning
## bounds: upper segment length of each bin but the last (the grid bin).
## The histogram is counted by `bin_hist`, or by `smallsort` where that runs
## (it reads every segment's offsets anyway) with `count` (the async mode; the
## sync path counts first, so its host read overlaps the small sort); segment
## ids of the first nsmall bins (sorted by `smallsort`) are counted but not
## scattered.
## ctl layout (uint): [0, nb) counts, nb: error flags (1: offsets decrease or
## leave [0, n]; 2: offsets[0] != 0 or offsets[nseg] != n; 4: a segment
## longer than 2^32 - 1) -- the nb + 1 words the host reads -- then
## [nb + 1, 2nb + 1) starts in seg_ids (bins nsmall.. only), [2nb + 1, 3nb + 1)
## cursors (from 0), 3nb + 1: SPEC (bare float keys that need `floatfix`).
<%def name="bin_helpers(bounds)">
<% nb = len(bounds) + 1; pow2 = all(bounds[i] == 1 << i for i in range(len(bounds))) %>
#define NB ${nb}
inline uint bin_of(ulong len) {
%if pow2:
    // bounds 1, 2, 4, ...: bin ceil(log2(len)) (0 for len <= 1), the last for the rest
    return len <= 1ul ? 0u : min(64u - (uint)clz(len - 1ul), ${nb - 1}u);
%else:
    uint b = ${nb - 1};
%for i in reversed(range(len(bounds))):
    if (len <= ${bounds[i]}ul) b = ${i};
%endfor
    return b;
%endif
}

// Segment s's bin, or NB (counted nowhere) with an error flag raised for
// invalid offsets; *start and *len are its extent.
inline uint seg_bin(__global const ulong *off, uint nseg, ulong n, uint s, __global uint *ctl,
                    ulong *start, ulong *len) {
    ulong a = off[s], b = off[s + 1];
    uint err = 0;
    if (b < a || b > n) err |= 1u;
    if ((s == 0 && a != 0) || (s == nseg - 1 && b != n)) err |= 2u;
    if (!(err & 1u) && b - a > 0xFFFFFFFFul) err |= 4u;     // a length only of ordered offsets
    if (err) { atomic_or(ctl + NB, err); return NB; }
    *start = a;
    *len = b - a;
    return bin_of(b - a);
}
</%def>

## Histogram of the bins `b` of a work-group's segments into ctl[0, NB): per
## sub-group one ballot per distinct bin among its lanes (the first remaining
## lane's bin, broadcast; its lanes counted by popcount), per work-group local
## atomics on `lc` (zeroed before a barrier), then one global atomic per bin
## and work-group. Emulated sub-groups would pay two barriers per ballot: one
## local atomic each there.
<%def name="count_bins(b, nb)">
%if sg_backend == 'local':
    if (${b} < NB) atomic_inc(lc + ${b});
%else:
    {
        uint todo = sg_ballot(sg_mem, ${b} < NB);
        while (todo) {                      // uniform in the sub-group
            const uint first = 31u - clz(todo & (0u - todo));
            const uint fb = sg_shuffle(sg_mem, ${b}, first);
            const uint m = sg_ballot(sg_mem, ${b} == fb);
            if (sg_lane() == first) atomic_add(lc + fb, popcount(m));
            todo &= ~m;
        }
    }
%endif
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < NB && lc[lid]) atomic_add(ctl + lid, lc[lid]);
</%def>

<%def name="binning(wg_size, bounds, nsmall)">
${common.prelude(real='float', wg_size=wg_size)}
<%
    nb = len(bounds) + 1
    nsg = wg_size // (sg_size if sg_size else 1)
%>
${bin_helpers(bounds)}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void bin_hist(__global const ulong *off, uint nseg, ulong n, __global uint *ctl)
{
    SG_DECL;
    __local uint lc[NB];
    uint lid = get_local_id(0), s = get_global_id(0);
    if (lid < NB) lc[lid] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    ulong a, len;
    uint b = s < nseg ? seg_bin(off, nseg, n, s, ctl, &a, &len) : NB;
${count_bins('b', nb)}
}

// Scatter the ids of the segments of bins nsmall.. into seg_ids, bin after
// bin: every work-group scans the NB counts itself (work-group 0 stores the
// starts for the sort kernels) and returns at once when those bins are all
// empty, so the host enqueues it before knowing the counts. Rank in the
// sub-group by ballot, sub-group offset by a local atomic, work-group base
// by one global atomic per bin on the cursors (zero-filled); segments of one
// sub-group stay in input order.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void bin_scatter(__global const ulong *off, uint nseg, ulong n, __global uint *ctl,
                 __global uint *seg_ids)
{
    SG_DECL;
    __local uint lc[NB], lbase[NB], lstart[NB], sgoff[${nsg} * NB], more;
    uint lid = get_local_id(0), s = get_global_id(0);
    if (lid == 0) {
        uint acc = 0;
        for (uint i = ${nsmall}u; i < NB; ++i) {
            lstart[i] = acc;
            if (get_group_id(0) == 0) ctl[NB + 1 + i] = acc;
            acc += ctl[i];
        }
        more = acc;
    }
    if (lid < NB) lc[lid] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!more) return;              // the same for the whole work-group
    ulong a, len;
    uint b = s < nseg ? seg_bin(off, nseg, n, s, ctl, &a, &len) : NB;
    uint lane = sg_lane(), sgi = sg_id(), rank = 0;
    uint below = lane ? (0xFFFFFFFFu >> (32 - lane)) : 0u;
%for i in range(nsmall, nb):
    {
        uint m = sg_ballot(sg_mem, b == ${i});
        if (b == ${i}) rank = popcount(m & below);
        if (lane == 0 && m) sgoff[sgi * NB + ${i}] = atomic_add(lc + ${i}, popcount(m));
    }
%endfor
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < NB && lc[lid]) lbase[lid] = lstart[lid] + atomic_add(ctl + 2 * NB + 1 + lid, lc[lid]);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (b >= ${nsmall}u && b < NB) seg_ids[lbase[b] + sgoff[sgi * NB + b] + rank] = s;
}
</%def>

## ---------------------------------------------------------------- reg-sort
## One segment of length n <= k * m at `start`, sorted by m work-items (`tl`
## 0..m-1, aligned within a sub-group) with k elements each. Loads are striped
## (coalesced; the input order is irrelevant to a sort but the index goes with
## each element); writes are write='direct' (work-item tl writes elements
## tl*k .. tl*k+k-1), or striped (work-item tl writes elements tl, tl + m,
## ...: each store instruction of a sub-group covers consecutive elements)
## after a transpose through local memory (write='striped', in `xs`) or in
## registers by shuffles (write='transpose').
<%def name="reg_segment(b, write)">
<% k, m = b.k, b.m; striped = write == 'striped' %>
%for r in range(k):
    ELEM v${r};
    { uint i = ${r * m}u + tl; v${r} = i < n ? LOAD_ELEM(start + i, i) : sentinel_elem(i); }
%endfor
${network(b)}
%if write == 'transpose' and m > 1:
    // striped write after the in-register transpose
${transpose(b)}
%endif
%if write != 'direct' and m > 1:
%if striped:
    // striped write: transpose the segment's k x m block through local memory
    // so that consecutive work-items write consecutive elements (coalesced).
    barrier(CLK_LOCAL_MEM_FENCE);
    {
        const uint seg = (lid - tl) * ${k}u;
%for r in range(k):
        xs[LPAD(lid * ${k}u + ${r}u)] = v${r};
%endfor
        barrier(CLK_LOCAL_MEM_FENCE);
%for r in range(k):
        v${r} = xs[LPAD(seg + ${r * m}u + tl)];
%endfor
    }
%endif
%for r in range(k):
    { uint e = ${r * m}u + tl; if (e < n) { uint i = elem_idx(v${r});
        okeys[start + e] = OUT_KEY(v${r}, start + i);
        move_val(vals, ovals, vbytes, start + e, start + i);
    } }
%endfor
%else:
%for r in range(k):
    { uint e = tl * ${k}u + ${r}u; if (e < n) { uint i = elem_idx(v${r});
        okeys[start + e] = OUT_KEY(v${r}, start + i);
        move_val(vals, ovals, vbytes, start + e, start + i);
    } }
%endfor
%endif
</%def>

## The reg-sort kernel of one bin: m work-items per segment of the bin
## (binding `bind`: k elements each).
<%def name="regsort(wg_size, bind, write, stride=False)">
<% k, m = bind.k, bind.m %>
${common.prelude(real='float', wg_size=wg_size)}
${elements()}
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void regsort(__global const KEYU *keys, VAL_ARGS, uint mode,
             __global const ulong *off, __global const uint *seg_ids,
             __global uint *ctl, uint bin, __global KEYU *okeys)
{
    SG_DECL;
    SPEC_DECL;
    ${scratch_decl(k, write == 'striped')}
    const uint lid = get_local_id(0), tl = lid % ${m}u;
    const uint count = ctl[bin], first = ctl[${nbins} + 1 + bin];
%if stride:
    // async mode (launched from an upper bound): grid-stride over the bin's
    // segments, WG_SIZE / m per work-group and round (the trip count is
    // uniform in the work-group: barriers inside); work-groups past the
    // count do no round at all
    for (uint base = get_group_id(0) * (WG_SIZE / ${m}u); base < count;
         base += get_num_groups(0) * (WG_SIZE / ${m}u)) {
        const uint slot = base + lid / ${m}u;
%else:
    {   // launched from the read count: WG_SIZE / m segments per work-group
        const uint slot = get_group_id(0) * (WG_SIZE / ${m}u) + lid / ${m}u;
%endif
        const bool valid = slot < count;
        const uint s = valid ? seg_ids[first + slot] : 0;
        const ulong start = valid ? off[s] : 0;
        const uint n = valid ? (uint)(off[s + 1] - start) : 0;
${reg_segment(bind, write)}
    }
    SPEC_FLUSH(ctl, ${nbins});
}
</%def>

## ------------------------------------------------------------ small sort
## The short segments (length <= classes[-1][0]) without bin counts: a
## work-group takes WG_SIZE consecutive segments (one per work-item), with
## `count` counts every segment's bin into ctl (the histogram of binning, in
## async mode; the sync path counts with bin_hist first), groups its short
## segments by class in local memory (a local
## count, scan and scatter), then sorts each class's segments with that
## class's binding (k, m), WG_SIZE / m segments per round. The host launches
## it over nseg without reading anything first; longer segments are left to
## the bins, invalid ones (offsets that decrease or leave [0, n]) to the
## error the host raises from the flags.
## classes: the bindings (networks.Binding, P = k * m == bounds[i]) of reg
## bins 0, 1, ... handled here.
<%def name="smallsort(wg_size, classes, write, bounds, count=True)">
<%
    nc = len(classes)
    nb = len(bounds) + 1
    kmax = max(c.k for c in classes)
    striped = write == 'striped' or xchg == 'scratch'
%>
${common.prelude(real='float', wg_size=wg_size)}
${elements()}
${bin_helpers(bounds)}
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void smallsort(__global const KEYU *keys, VAL_ARGS, uint mode,
               __global const ulong *off, uint nseg, ulong ntotal, __global uint *ctl,
               __global KEYU *okeys)
{
    SG_DECL;
    SPEC_DECL;
%if striped:
    __local ELEM xs[LPAD(${kmax}u * WG_SIZE)];
%endif
    __local uint lc[NB], cnt[${nc}], cbase[${nc}], llen[WG_SIZE];
    __local ulong lstart[WG_SIZE];
    const uint lid = get_local_id(0);
    const uint s = get_group_id(0) * WG_SIZE + lid;
    if (lid < NB) lc[lid] = 0;
    if (lid < ${nc}u) cnt[lid] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    ulong a = 0, len = 0;
    const uint sb = s < nseg ? seg_bin(off, nseg, ntotal, s, ctl, &a, &len) : NB;
%if count:
${count_bins("sb", nb)}
%endif
    const uint c = sb < ${nc}u ? sb : ${nc}u;     // class c is bin c
    uint pos = 0;
    if (c < ${nc}u) pos = atomic_inc(cnt + c);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        uint acc = 0;
        for (uint i = 0; i < ${nc}u; ++i) { cbase[i] = acc; acc += cnt[i]; }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (c < ${nc}u) { lstart[cbase[c] + pos] = a; llen[cbase[c] + pos] = (uint)len; }
    barrier(CLK_LOCAL_MEM_FENCE);
%for ci, cls in enumerate(classes):
<% P, k, m = cls.P, cls.k, cls.m %>
    {   // class ${ci}: length <= ${P}, ${m} work-items x ${k} elements per segment
        const uint count = cnt[${ci}u], first = cbase[${ci}u];
        const uint tl = lid % ${m}u;
        for (uint slot = lid / ${m}u; slot - lid / ${m}u < count; slot += WG_SIZE / ${m}u) {
            const bool valid = slot < count;
            const ulong start = valid ? lstart[first + slot] : 0;
            const uint n = valid ? llen[first + slot] : 0;
${reg_segment(cls, write)}
        }
    }
%endfor
    SPEC_FLUSH(ctl, NB);
}
</%def>

## ------------------------------------------------------------- floatfix
## Bare float keys (see `bare` above): when a sort kernel raised SPEC (a -0.0
## or a NaN of another payload than the canonical one among the keys: NaNs
## computed on x86 (0xFFC00000) or NVIDIA GPUs (0x7FFFFFFF) are such), the
## segments holding such keys get their zero run (after the keys that sort
## before zero) and NaN run (their end, in both orders) rewritten with the
## input's zero and NaN bits in input order, which is where a stable sort puts
## them. Nothing when SPEC is clear. Segments of up to `short_max` keys: a
## work-item each (`floatfix_short`, over all segments: it reads its segment
## once to find out, twice where it rewrites); longer ones (the bins from
## `first_long` on, whose ids binning scattered contiguously into seg_ids): a
## work-group each (`floatfix_long`, grid-stride over their count).
<%def name="floatfix(wg_size, nbins, first_long, short_max)">
${common.prelude(real='float', wg_size=wg_size)}
${elements()}
#define NB_ ${nbins}

// the keys sorting before zero, the NaNs and whether any key is special, of
// keys[a + e] for e = e0, e0 + step, ... < len
inline void fix_counts(__global const KEYU *keys, uint mode, KEYU zmap, ulong a, ulong len, ulong e0, ulong step,
                       uint *before, uint *nans, uint *spec) {
    uint x = 0, y = 0, z = 0;
    for (ulong e = e0; e < len; e += step) {
        const KEYU u = keys[a + e];
        z |= special_key(u, mode);
        if (key_nan(u)) ++y;
        else if (map_key(u, mode) < zmap) ++x;
    }
    *before = x;
    *nans = y;
    *spec = z;
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void floatfix_short(__global const KEYU *keys, uint mode, __global const ulong *off, uint nseg, ulong ntotal,
                    __global const uint *ctl, __global KEYU *okeys)
{
    const uint s = get_global_id(0);
    if (s >= nseg || !ctl[SPEC_WORD(NB_)]) return;
    const ulong a = off[s], b = off[s + 1];
    if (b < a || b > ntotal || b - a > ${short_max}ul) return;     // invalid (the call raises), or long
    const KEYU zmap = map_key(0, mode);
    uint before, nans, spec;
    fix_counts(keys, mode, zmap, a, b - a, 0, 1, &before, &nans, &spec);
    if (!spec) return;
    ulong zp = a + before, np = b - nans;
    for (ulong e = a; e < b; ++e) {
        const KEYU u = keys[e];
        if (key_nan(u)) okeys[np++] = u;
        else if (map_key(u, mode) == zmap) okeys[zp++] = u;
    }
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void floatfix_long(__global const KEYU *keys, uint mode, __global const ulong *off, __global const uint *seg_ids,
                   ulong ntotal, __global const uint *ctl, __global KEYU *okeys)
{
    __local uint cnt[3], sz[WG_SIZE], sn[WG_SIZE];
    if (!ctl[SPEC_WORD(NB_)]) return;
    const uint lid = get_local_id(0);
    const uint first = ctl[NB_ + 1 + ${first_long}];
    uint count = 0;
    for (uint b = ${first_long}; b < NB_; ++b) count += ctl[b];
    const KEYU zmap = map_key(0, mode);
    for (uint gi = get_group_id(0); gi < count; gi += get_num_groups(0)) {
        const uint s = seg_ids[first + gi];
        const ulong a = off[s], b = off[s + 1];
        if (b < a || b > ntotal) continue;          // invalid offsets (the call raises): uniform
        const ulong len = b - a;
        if (lid < 3u) cnt[lid] = 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        uint before, nans, spec;
        fix_counts(keys, mode, zmap, a, len, lid, WG_SIZE, &before, &nans, &spec);
        if (before) atomic_add(cnt, before);
        if (nans) atomic_add(cnt + 1, nans);
        if (spec) atomic_or(cnt + 2, 1u);
        barrier(CLK_LOCAL_MEM_FENCE);
        const ulong zbase = a + cnt[0], nbase = b - cnt[1];
        const uint special = cnt[2];
        barrier(CLK_LOCAL_MEM_FENCE);               // cnt is read before the next segment resets it
        if (!special) continue;                     // uniform
        ulong zrun = 0, nrun = 0;                   // zeros and NaNs of earlier chunks
        for (ulong e0 = 0; e0 < len; e0 += WG_SIZE) {
            const ulong e = e0 + lid;
            const KEYU u = e < len ? keys[a + e] : 0;
            const uint isn = (e < len && key_nan(u)) ? 1u : 0u;
            const uint isz = (e < len && !isn && map_key(u, mode) == zmap) ? 1u : 0u;
            sz[lid] = isz;
            sn[lid] = isn;
            barrier(CLK_LOCAL_MEM_FENCE);
            for (uint d = 1; d < WG_SIZE; d <<= 1) {     // inclusive scans (Hillis-Steele)
                const uint tz = lid >= d ? sz[lid - d] : 0u, tn = lid >= d ? sn[lid - d] : 0u;
                barrier(CLK_LOCAL_MEM_FENCE);
                sz[lid] += tz;
                sn[lid] += tn;
                barrier(CLK_LOCAL_MEM_FENCE);
            }
            if (isz) okeys[zbase + zrun + sz[lid] - 1u] = u;
            if (isn) okeys[nbase + nrun + sn[lid] - 1u] = u;
            zrun += sz[WG_SIZE - 1];
            nrun += sn[WG_SIZE - 1];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
}
</%def>
