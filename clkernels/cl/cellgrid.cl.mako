## The cell-list grid (host/cellgrid): cell keys and the gather of kernel
## coordinates in cell order (built with the sort, scan and compaction
## primitives), and pair counts and distance histograms over the grid.
##
## A = the grid whose cells (or points) the work is split over; B = the grid
## searched (B is A for self pairs). Kernel coordinates are SoA in cell order
## (x[k*n + i]; host/primitives/points.cl.mako's kernel_coord); perm maps a
## sorted position to the input index (the exact path reads the original
## coordinates there). Cells are sorted unique 64-bit ids with start/count.
## Neighbour cells: the 3^D stencil around a cell, wrapped when periodic (a
## dimension with 1 or 2 cells gets only its distinct neighbours, so no pair is
## seen twice), each looked up by binary search in B's sorted cell ids.
## Self pairs: neighbour cells with a larger id, plus j > i inside the own cell.
##
## Parameters: real, orig, dim, periodic, wg_size, variant (which kernel: 'point' |
##   'row' | 'cell'), and at run time cross (A != B); output 'count' (d^2 <= t)
##   | 'hist' (nbins bins at run time, squared edges sq[0..nbins]; bin b holds
##   sq[b] <= d^2 < sq[b+1], the last bin also d^2 == sq[nbins]; guess: how a
##   pair's bin is found, 'search' (binary search of sq), 'uniform' / 'log'
##   (a guess from sqrt(d^2) / log2(d^2) with g_lo and g_scale, corrected by
##   comparisons with sq: the same bin); table (None, or the codes
##   (bins.TABLE_OUT, bins.TABLE_EDGE): the bin from a table indexed by the
##   high bits of d^2 where bins.bin_table found its span clean, one
##   comparison where the span holds one edge, the guess elsewhere)); exact (pairs
##   within the band of a threshold decided in double, outputs.cl.mako: counts
##   and histograms list them for a band pass, or with band_loop decide them in
##   their loop);
##   hist_local (0: global atomics; else the number of copies of a
##   per-work-group histogram in local memory -- the edges, their bands and the
##   counters come as __local arguments sized by the host); local64 (64-bit local counters: a work-group may tally
##   >= 2^32 pairs); pair outputs (point and row variants, one writer per
##   point of A: the pairs with d^2 <= t as (input i, input j), i < j for self
##   pairs): 'pairs' through the page allocator (pages.cl.mako; a writer that
##   stops is run again from the redo list, wl), 'paircount' (records per
##   writer, cnt[i]) and 'pairwrite' (writer w's records at offs[w - w0] on,
##   for the writers [w0, w0 + nw): count, scan, write), 'degree' (self pairs:
##   the neighbours of every input point, deg[input index], by atomics) and
##   'csrwrite' (self pairs: both directions into CSR rows, at cur[row]++ from
##   the rows' starts; with self_too each point's own entry first).
<%namespace name="common" file="common.cl.mako"/>
<%namespace name="pages" file="pages.cl.mako"/>
<%! PAIR_OUTS = ("pairs", "paircount", "pairwrite", "degree", "csrwrite") %>
<%namespace name="points" file="points.cl.mako"/>
<%namespace name="outputs" file="outputs.cl.mako"/>

<%def name="helpers(dim, periodic, exact)">
#define D ${dim}
#define NSTENCIL ${3 ** dim}
// a band pair of a count or histogram kernel, listed for outputs.cl.mako's band_list;
// bl_n[1] notes a count past 2^32 (the host then decides the band pairs in the loop)
#define BAND_PUT(oi, oj) do { const uint k_ = atomic_inc(bl_n); \
    if (k_ < bl_cap) { bl_i[k_] = (oi); bl_j[k_] = (oj); } \
    else if (k_ == 0xffffffffu) bl_n[1] = 1u; } while (0)
%if periodic:
// minimum-image difference of wrapped kernel coordinates a, b in [0, L)
inline REAL mind(const REAL a, const REAL b, const REAL L, const REAL iL)
{
%if exact:
    // the shift goes to a or b alone, where it is exact: only the last subtraction rounds
    const REAL n = rint((a - b) * iL);
    return fma(-fmax(n, (REAL)0), L, a) - fma(fmin(n, (REAL)0), L, b);
%else:
    const REAL dk = a - b;
    return dk - L * rint(dk * iL);
%endif
}
%endif

// the next offset of the 3^n stencil (digits 0..2, the first fastest): an
// odometer, so the loops need no division (whose div/rem pairs LLVM freezes,
// which Oclgrind cannot follow)
inline void stencil_next(int *dig, const int n)
{
    for (int k = 0; k < n; ++k) {
        if (++dig[k] < 3) return;
        dig[k] = 0;
    }
}

// lower_bound of key in ids[lo..n); the index or -1 when absent.
inline int find_cell(__global const ulong *ids, uint lo, uint n, ulong key)
{
    uint hi = n;
    while (lo < hi) {
        uint mid = (lo + hi) >> 1;
        if (ids[mid] < key) lo = mid + 1; else hi = mid;
    }
    return (lo < n && ids[lo] == key) ? (int)lo : -1;
}

// lower_bound: the first index with ids[index] >= key (n when none).
inline int find_first(__global const ulong *ids, uint n, ulong key)
{
    uint lo = 0, hi = n;
    while (lo < hi) {
        uint mid = (lo + hi) >> 1;
        if (ids[mid] < key) lo = mid + 1; else hi = mid;
    }
    return (int)lo;
}
</%def>

## Declares the geometry in private memory: m[D], stride[D] (and L, invL).
<%def name="load_geometry(dim, periodic)">
    ulong m[D], stride[D];
%if periodic:
    REAL L[D], invL[D];
%endif
%for k in range(dim):
    m[${k}] = igeom[${k}]; stride[${k}] = igeom[${dim + k}];
%if periodic:
    L[${k}] = kbox[${k}]; invL[${k}] = kbox[${dim + k}];
%endif
%endfor
</%def>

## Cell coordinates c[D] (long) of cell id `cid`.
<%def name="decode(dim, cid)">
    long c[D];
    {   // digits from the highest stride down: divisions only (no div/rem pairs), in
        // 32 bits where both operands fit (a 64-bit division is a long routine); stride[0] = 1
        ulong r_ = ${cid};
%for k in reversed(range(1, dim)):
        const ulong q${k}_ = ((r_ | stride[${k}]) >> 32) ? r_ / stride[${k}] : (ulong)((uint)r_ / (uint)stride[${k}]);
        c[${k}] = (long)q${k}_;
        r_ -= q${k}_ * stride[${k}];
%endfor
        c[0] = (long)r_;
    }
</%def>

## Opens the stencil loop: inside, `nid` is a valid neighbour id (and with
## `images`, periodic: img[D], the wrap of the neighbour cell, -1, 0 or +1:
## the image n = rint((a - b) / L) of mind for a point a of the cell and b of
## the neighbour within a cell's side of each other). Close with }.
<%def name="stencil_open(dim, periodic, images=False)">
    int dig[D] = {${", ".join(["0"] * dim)}};
%if images:
    REAL img[D];
%endif
    for (uint o = 0; o < NSTENCIL; ++o, stencil_next(dig, D)) {
        ulong nid = 0;
        int ok = 1;
%for k in range(dim):
        {
            const long dk = (long)dig[${k}] - 1;
            long nc = c[${k}] + dk;
%if periodic:
            if (m[${k}] == 1UL && dk != 0) ok = 0;          // one cell: itself only
            if (m[${k}] == 2UL && dk == -1) ok = 0;         // two cells: -1 is +1
%if images:
            img[${k}] = nc < 0 ? (REAL)-1 : (nc >= (long)m[${k}] ? (REAL)1 : (REAL)0);
%endif
            nc = nc < 0 ? nc + (long)m[${k}] : (nc >= (long)m[${k}] ? nc - (long)m[${k}] : nc);
%else:
            if (nc < 0 || nc >= (long)m[${k}]) ok = 0;
%endif
            nid += (ulong)nc * stride[${k}];
        }
%endfor
        if (!ok) continue;
</%def>

## d2 = squared (minimum-image) distance between private pv[D] (p) and B's point j.
<%def name="dist2(dim, periodic, q, pv='p')">
        REAL d2 = 0;
%for k in range(dim):
        {
%if periodic:
            const REAL dx = mind(${pv}[${k}], ${q(k)}, L[${k}], invL[${k}]);
%else:
            const REAL dx = ${pv}[${k}] - ${q(k)};
%endif
            d2 = fma(dx, dx, d2);
        }
%endfor
</%def>

## Adds a pair to bin `slot` (< nbins) of the work-group's histogram (its
## copy hc_ of the local one: hcopy_, out_begin) or of the global one.
<%def name="hist_add(slot)">
%if not hist_local:
                    atomic_add_u64_g(out + ${slot}, 1UL);
%elif local64:
                    atomic_add_u64_l(hcopy_ + ${slot} * HCOPIES, 1UL);
%else:
                    atomic_inc_u32_l(hcopy_ + ${slot} * HCOPIES);
%endif
</%def>

## lo = the largest lo < nbins with sq[lo] <= d2 (0 below sq[0]): a binary
## search of the edges, or a guess (uniform edges: from the root; geometric:
## from log2 of the square) corrected by the comparisons with the edges.
<%def name="bin_guess(guess)">
%if guess == 'search':
                    {
                        uint l_ = 0, h_ = nbins;
                        while (h_ - l_ > 1) {
                            const uint mid = (l_ + h_) >> 1;
                            if (sq[mid] <= d2) l_ = mid; else h_ = mid;
                        }
                        lo = l_;
                    }
%else:
                    {
                        int k_ = clamp(convert_int_sat((${'native_log2' if guess == 'log' else 'native_sqrt'}((float)d2) - g_lo)
                                                       * g_scale), 0, (int)nbins - 1);
                        while (k_ > 0 && d2 < sq[k_]) --k_;
                        while (k_ < (int)nbins - 1 && d2 >= sq[k_ + 1]) ++k_;
                        lo = (uint)k_;
                    }
%endif
</%def>

## The pair with lo (bin_guess) for its d2 within [lo_cut, hi_cut]: listed for the
## double pass (exact) when within the band of the edge below or above it, else
## added to bin lo when in the range.
<%def name="bin_final(i, j)">
%if exact:
                    // within the band of the edge below or above it: listed for the double pass
                    // (a value outside both bands is on its side of every edge, within range or not)
                    if (fabs(d2 - sq[lo]) <= sb[lo] || fabs(sq[lo + 1] - d2) <= sb[lo + 1]) {
%if band_loop:
                        const uint slot = exact_bin(X0, pa[${i}], Y0, pb[${j}], xp, nbins, 0);
                        if (slot < nbins) {
${hist_add('slot')}
                        }
%else:
                        BAND_PUT(pa[${i}], pb[${j}]);
%endif
                    } else
%endif
                    if (d2 >= sq[0] && d2 <= sq[nbins]) {
${hist_add('lo')}
                    }
</%def>

## The pair (i in A, j in B; sorted positions) with squared distance d2.
<%def name="tally(output, hist_local, local64, i, j, guess='search', stage=0)">
%if output in PAIR_OUTS:
<% gate = "in_ && " if output == 'pairs' and stage else "" %>\
        {
            const REAL v = d2 - thr;
%if exact:
            const int hit = ${gate}(fabs(v) <= band ? (int)exact_within(X0, pa[${i}], Y0, pb[${j}], xp) : v <= (REAL)0);
%else:
            const int hit = ${gate}(v <= (REAL)0);
%endif
%if output == 'pairs' and stage:
            // grouped staging: every work-item of the group, hit or not (the record's
            // indices are read for a hit only)
            PAGE_EMIT_IF(hit, (cross ? (PREC)(pa[${i}], pb[${j}])
                                     : (PREC)(min(pa[${i}], pb[${j}]), max(pa[${i}], pb[${j}]))));
%else:
            if (hit) {
%if output == 'paircount':
                ++h_;
%elif output == 'degree':
                ++h_;
                atomic_inc(deg + pb[${j}]);
%elif output == 'csrwrite':
                const uint oi_ = pa[${i}], oj_ = pb[${j}];
                idx[atomic_inc(cur + oi_)] = oj_;
                idx[atomic_inc(cur + oj_)] = oi_;
%else:
                const uint oi_ = pa[${i}], oj_ = pb[${j}];
                const PREC rec_ = cross ? (PREC)(oi_, oj_) : (PREC)(min(oi_, oj_), max(oi_, oj_));
%if output == 'pairwrite':
                out_ij[wbase + h_] = rec_;
                ++h_;
%else:
                PAGE_EMIT(rec_);
%endif
%endif
            }
%endif
        }
%elif output == 'count':
        {
            const REAL v = d2 - thr;
%if exact and band_loop:
            cnt += fabs(v) <= band ? exact_within(X0, pa[${i}], Y0, pb[${j}], xp) : (ulong)(v <= (REAL)0);
%elif exact:
            const int inb_ = fabs(v) <= band;
            if (inb_) BAND_PUT(pa[${i}], pb[${j}]);
            cnt += (!inb_ && v <= (REAL)0) ? 1UL : 0UL;
%else:
            cnt += v <= (REAL)0 ? 1UL : 0UL;
%endif
        }
%else:
        {
            // most candidates of a stencil lie beyond the range: one test against the
            // range widened by its edges' bands (lo_cut, hi_cut: out_begin) sends them away;
            // the bin and its atomic inside that one branch (a branch each cost a warp
            // four more instructions a candidate on the H100: examples/PERFORMANCE.md)
            if (d2 >= lo_cut && d2 <= hi_cut) {
%if table:
                // the bin table (bins.bin_table): a span's bin (added at once: the common
                // case's few instructions), no bin, the bin below the one edge in the span
                // (TABLE_EDGE + it), or the guess
                const uint te_ = tab[min(max((uint)(${'as_uint' if real == 'float' else 'as_ulong'}(d2) >> tab_shift), tab_base) - tab_base,
                                         tab_n - 1)];
                if (te_ < nbins) {
${hist_add('te_')}
                } else if (te_ != TABLE_OUT) {
                    uint lo;                        // the largest lo < nbins with sq[lo] <= d2 (0 below sq[0])
                    if (te_ < TABLE_OUT) {
                        const uint tk_ = te_ - TABLE_EDGE;
                        lo = min(tk_ + (d2 >= sq[tk_ + 1] ? 1u : 0u), nbins - 1);
                    } else {
${bin_guess(guess)}
                    }
${bin_final(i, j)}
                }
%else:
                uint lo;                            // the largest lo < nbins with sq[lo] <= d2 (0 below sq[0])
${bin_guess(guess)}
${bin_final(i, j)}
%endif
            }
        }
%endif
</%def>

## The loop over a writer's candidates j in [j0, j1). Staged 'pairs' writers
## (the grouped staging of pages.cl.mako) take them in chunks of
## PAGE_STAGE_CHUNK, their group in step, with room for the next chunk's records
## made after each (PAGE_GROUP_ROOM), so the loop that tests candidates has no
## exit but its bound and no global atomic: with the page_put inside it (or
## `!stopped_` in its condition) the H100 ran the row kernel at 2-4x the time of
## the count pass (examples/PERFORMANCE.md).
<%def name="cands_open(j0, j1, output, stage, live)">
%if output == 'pairs' and stage:
            {
                const uint gl_ = wv_ && ${j1} > ${j0} ? ${j1} - ${j0} : 0u;
                for (uint gb_ = 0;; gb_ += PAGE_STAGE_CHUNK) {
                    if (!GRP_ANY(gb_ < gl_ && !stopped_)) break;
                    const uint jb_ = ${j0} + gb_, je_ = stopped_ ? 0u : ${j0} + min(gb_ + PAGE_STAGE_CHUNK, gl_);
${pages.group_loop("jb_", "je_")}
%else:
            for (uint j = ${j0}; j < ${j1}${live}; ++j) {
%endif
</%def>

<%def name="cands_close(output, stage)">
%if output == 'pairs' and stage:
                    }
                    PAGE_GROUP_ROOM(GSTAGE - PAGE_STAGE_CHUNK * GRP_SIZE);
                }
%endif
            }
</%def>

## Kernel arguments shared by both variants.
<%def name="args(output)">
    __global const REAL *xa, uint na, __global const uint *a_point_cell,
    __global const ulong *a_ids, __global const uint *a_start, __global const uint *a_count, uint a_ncells,
    __global const REAL *xb, uint nb,
    __global const ulong *b_ids, __global const uint *b_start, __global const uint *b_count, uint b_ncells,
    __global const REAL *kbox, __global const ulong *igeom, uint cross,${' REAL wtie,' if window else ''}
%if exact:
    __global const ORIG *X0, __global const uint *pa, __global const ORIG *Y0, __global const uint *pb,
    __global const double *xp,
%if output not in PAIR_OUTS and not band_loop:
    volatile __global uint *bl_n, __global uint *bl_i, __global uint *bl_j, const uint bl_cap,
%endif
%elif output in PAIR_OUTS:
    __global const uint *pa, __global const uint *pb,
%endif
%if output in PAIR_OUTS:
    REAL thr, REAL band, uint nw, uint w0, __global const uint *wl, uint wl_on,
%if output == 'pairs':
    __global PREC *pool, volatile __global uint *ctl, uint npages, uint page, __global uint *fills,
    __global uint *done, __global uint *redo
%elif output == 'paircount':
    __global uint *cnt
%elif output == 'degree':
    volatile __global uint *deg
%elif output == 'csrwrite':
    volatile __global uint *cur, __global uint *idx, uint self_too
%else:
    __global const ulong *offs, __global PREC *out_ij
%endif
%elif output == 'count':
    REAL thr, REAL band,
%else:
    uint nbins, __global const REAL *g_sq, __global const REAL *g_sb, float g_lo, float g_scale,
%if table:
    __global const uint *g_tab, uint tab_shift, uint tab_base, uint tab_n,
%endif
%if hist_local:
    __local REAL *sq, __local REAL *sb, ${'__local uint *tabw,' if table else ''} __local ${'ulong' if local64 else 'uint'} *lh,
%endif
%endif
%if output not in PAIR_OUTS:
    __global ulong *out
%endif
</%def>

## The point of A a work-item handles, `i` (sorted position), and for pair
## outputs its writer state; the block closes with writer_close.
<%def name="writer_open(output, stage=0, row_parts=False)">
%if output == 'pairs' and stage:
    // staged writers: every work-item runs the block (the flushes are collective);
    // those past nw are no writer and test no candidate
    const uint gw_ = get_global_id(0);
    const int wv_ = gw_ < nw;
    {
        const uint i = wv_ ? (wl_on ? wl[gw_] : w0 + gw_) : 0u;
        PAGE_WRITER(wv_ && wl_on ? done[i] : 0u);
%elif output in PAIR_OUTS:
%if row_parts:
    // a writer's rows over NSTENCIL / 3 work-items, one row each (a sample of
    // writers: many short work-items, not a few long ones)
    // (remainders by products, not %: Oclgrind 21.10 stops on the freeze LLVM puts
    // between a division and its remainder)
    const uint gid_ = (uint)get_global_id(0), gw_ = gid_ / (NSTENCIL / 3), part_ = gid_ - gw_ * (NSTENCIL / 3);
%else:
    const uint gw_ = get_global_id(0);
%endif
    if (gw_ < nw) {
        const uint i = wl_on ? wl[gw_] : w0 + gw_;
%if output == 'pairs':
        PAGE_WRITER(wl_on ? done[i] : 0u);
%elif output in ('paircount', 'degree'):
        uint h_ = 0;
%elif output == 'csrwrite':
        if (self_too) idx[atomic_inc(cur + pa[i])] = pa[i];
%else:
        uint h_ = 0;
        const ulong wbase = offs[i - w0];
%endif
%else:
    uint i = get_global_id(0);
    if (i < na) {
%endif
</%def>

<%def name="writer_close(output, stage=0, row_parts=False)">
%if output == 'pairs' and stage:
        PAGE_GROUP_ROOM(0u);
        if (wv_) page_end(ctl, fills, done, redo, i, PAGE_NONE, 0u, h_, stopped_);
%elif output == 'pairs':
        page_end(ctl, fills, done, redo, i, pg_, fill_, h_, stopped_);
%elif output == 'paircount' and row_parts:
        if (h_) atomic_add(cnt + i, h_);
%elif output == 'paircount':
        cnt[i] = h_;
%elif output == 'degree':
        if (h_) atomic_add(deg + pa[i], h_);
%endif
    }
</%def>

## Set-up of the output state at kernel start (uniform).
<%def name="out_begin(output, hist_local, local64, stage=0)">
%if output == 'pairs' and stage:
    PAGE_GROUP_LOCALS;
%elif output in PAIR_OUTS:
%elif output == 'count':
    __local ulong lred[WG_SIZE];
    ulong cnt = 0;
%elif hist_local:
    // HCOPIES copies of the histogram, bin-major: work-item l counts into copy l % HCOPIES
    // (the lanes of a sub-group that bin the same partner hit one bin: one copy each)
    #define HCOPIES ${int(hist_local)}u
    const uint hc_ = get_local_id(0) % HCOPIES;
    __local ${'ulong' if local64 else 'uint'} *const hcopy_ = lh + hc_;
    for (uint b = get_local_id(0); b < nbins * HCOPIES; b += WG_SIZE) lh[b] = 0;
    for (uint b = get_local_id(0); b <= nbins; b += WG_SIZE) { sq[b] = g_sq[b]; sb[b] = g_sb[b]; }
%if table:
    for (uint b = get_local_id(0); b < (tab_n + 3) / 4; b += WG_SIZE) tabw[b] = g_tab[b];
    __local const uchar *tab = (__local const uchar *)tabw;
%endif
    barrier(CLK_LOCAL_MEM_FENCE);
%else:
    __global const REAL *sq = g_sq;
    __global const REAL *sb = g_sb;
%if table:
    __global const uchar *tab = (__global const uchar *)g_tab;
%endif
%endif
%if output == 'hist':
    // the range widened by the bands of its first and last edges, rounded outward
    const REAL lo_cut = nextafter(sq[0] - fmax(sb[0], (REAL)0), (REAL)-INFINITY);   // sb[0] < 0: no band
    const REAL hi_cut = nextafter(sq[nbins] + sb[nbins], (REAL)INFINITY);
%endif
</%def>

## Flush at kernel end (uniform): the group's count or local histogram.
<%def name="out_end(output, hist_local, local64)">
%if output == 'count':
    uint t = get_local_id(0);
    lred[t] = cnt;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG_SIZE / 2; s > 0; s >>= 1) {
        if (t < s) lred[t] += lred[t + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0 && lred[0]) atomic_add_u64_g(out, lred[0]);
%elif hist_local:
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint b = get_local_id(0); b < nbins; b += WG_SIZE) {
        ulong s_ = 0;
        for (uint c_ = 0; c_ < HCOPIES; ++c_) s_ += lh[b * HCOPIES + c_];
        if (s_) atomic_add_u64_g(out + b, s_);
    }
%endif
</%def>


## ---------------------------------------------------------------- building
## keys[i] = the cell key of point i (from its wrapped coordinates, in WIDE),
## vals[i] = i for i < n; padding up to n2 (a power of two) gets the largest key
## and index so it sorts last. A cell coordinate is
## clamp(floor((wrap(x) - lo) / width), 0, ncell - 1); the key sum(c * stride).
## geom (WIDE): lo[D], width[D], L[D]; igeom (ulong): ncell[D], stride[D].
<%def name="build(orig, real, dim, periodic, xorder=False)">
${common.prelude(real=real, wg_size=64)}
#define D ${dim}
typedef ${orig} ORIG;
<% wide = "double" if fp64 else "float" %>
typedef ${wide} WIDE;

__kernel void grid_keys(__global const ORIG *x, const uint n, const uint n2,
                        __global const WIDE *geom, __global const ulong *igeom,
                        __global ulong *keys, __global uint *vals)
{
    const uint i = get_global_id(0);
    if (i >= n2) return;
    if (i >= n) { keys[i] = 0xffffffffffffffffUL; vals[i] = 0xffffffffu; return; }
    ulong key = 0${', xq = 0' if xorder else ''};
%for k in range(dim):
    {
        WIDE v = (WIDE)x[(size_t)i * D + ${k}];
%if periodic:
        const WIDE L = geom[${2 * dim + k}];
        v = v - L * floor(v / L);
        if (v >= L) v -= L;                     // as points.cl.mako's kernel_coord: the cell
        if (v < (WIDE)0) v = (WIDE)0;           // of the coordinate the kernels hold
%endif
        const WIDE t = (v - geom[${k}]) / geom[${dim + k}];
        const WIDE c = floor(t);
        const ulong m = igeom[${k}];
        const ulong ci = c <= (WIDE)0 ? 0UL : (c >= (WIDE)m ? m - 1UL : (ulong)c);
        key += ci * igeom[${dim + k}];
%if xorder and k == 0:
        // the point's place within its cell along dimension 0, 32-bit fixed point: monotone
        // in v for one cell (the clamps keep the ends at the ends), so a cell's points sort
        // by their first coordinate (ties by index)
        const WIDE f = clamp(t - (WIDE)ci, (WIDE)0, (WIDE)1);
        xq = (ulong)min((WIDE)4294967040.0, floor(f * (WIDE)4294967296.0));   // below 2^32 in float too
%endif
    }
%endfor
%if xorder:
    keys[i] = (key << 32) | xq;
%else:
    keys[i] = key;
%endif
    vals[i] = i;
}

%if xorder:
// after the sort: the cell ids of (cell << 32 | place) keys
__kernel void grid_key_cells(__global ulong *keys, const uint n)
{
    const uint i = get_global_id(0);
    if (i < n) keys[i] >>= 32;
}
%endif

// Kernel coordinates in sorted order: coords[k * n + i] = kernel_coord(x[perm[i], k]).
__kernel void grid_gather(__global const ORIG *x, const uint n, __global const uint *perm,
%for k in range(dim):
                          const WIDE sh_${k},${" const WIDE L_%d," % k if periodic else ""}
%endfor
                          const WIDE scale, __global REAL *coords)
{
    const uint i = get_global_id(0);
    if (i >= n) return;
    const size_t src = (size_t)perm[i] * D;
%for k in range(dim):
    {
${points.kernel_coord("x[src + %d]" % k, k, periodic)}
        coords[(size_t)${k} * n + i] = kc;
    }
%endfor
}
</%def>

## Windows (x-sorted grids, counts and histograms): wr_, the distance beyond which
## no pair counts (the histogram's upper cut, or the count's threshold plus band).
<%def name="window_reach(output)">
%if window:
<% cut = 'hi_cut' if output == 'hist' else '(thr + fmax(band, (REAL)0))' %>
    const REAL wr_ = sqrt(${cut});
%endif
</%def>

## Narrows [first, end) of the sorted first coordinates x[] to the values in
## [lo, hi]: two binary searches (values out of order by less than the slack
## the bounds carry are still found).
<%def name="window_search(x, first, end, lo, hi)">
                    const REAL wlo_ = ${lo}, whi_ = ${hi};
                    uint wl_ = ${first}, wh_ = ${end};
                    while (wl_ < wh_) { const uint m_ = (wl_ + wh_) >> 1; if (${x}[m_] < wlo_) wl_ = m_ + 1; else wh_ = m_; }
                    ${first} = wl_;
                    wh_ = ${end};
                    while (wl_ < wh_) { const uint m_ = (wl_ + wh_) >> 1; if (${x}[m_] <= whi_) wl_ = m_ + 1; else wh_ = m_; }
                    ${end} = wl_;
</%def>

## ------------------------------------------------------------------ kernels
<%def name="pairs(real, orig, dim, periodic, wg_size, variant, output, hist_local, local64, exact, band_loop, stage=0,
                   guess='search', by_cell=False, table=None, window=False, row_parts=False)">
<% assert not window or (output in ('count', 'hist') and (variant == 'cell' and (by_cell or not periodic)
                                                          or variant == 'row' and not periodic)), "window" %>\
<% assert not stage or (output == 'pairs' and variant == 'row'), "stage" %>\
<% assert not row_parts or (output == 'paircount' and variant == 'row'), "row_parts" %>\
${common.prelude(real=real, wg_size=wg_size)}
%if exact and (output in PAIR_OUTS or band_loop):
${outputs.exact_defs(orig, dim, periodic, 'nearest')}
%elif exact:
typedef ${orig} ORIG;
%endif
${helpers(dim, periodic, exact)}
%if table:
#define TABLE_OUT ${table[0]}u
#define TABLE_EDGE ${table[1]}u
%endif
%if output == 'pairs':
${pages.page_defs(stage, grouped=True)}
%elif output in PAIR_OUTS:
typedef uint2 PREC;
%endif
<% q_point = lambda k: "xb[(size_t)%d * nb + j]" % k %>
<% live = " && !stopped_" if output == "pairs" else "" %>
<% q_tile = lambda k: "tile[%d][tt]" % k %>

%if variant == 'point':
// One work-item per point of A (in cell order): the point against every
// point of its neighbour cells in B.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void grid_pairs_point(${args(output)})
{
${out_begin(output, hist_local, local64, stage)}
${load_geometry(dim, periodic)}
${writer_open(output, stage, row_parts)}
        REAL p[D];
%for k in range(dim):
        p[${k}] = xa[(size_t)${k} * na + i];
%endfor
        uint ca = a_point_cell[i];
        ulong aid = a_ids[ca];
${decode(dim, 'aid')}
${stencil_open(dim, periodic)}
            int own = !cross && nid == aid;
            if (!cross && nid < aid) continue;
            int cb = own ? (int)ca : find_cell(b_ids, cross ? 0 : ca + 1, b_ncells, nid);
            if (cb < 0) continue;
            uint j0 = own ? i + 1 : b_start[cb];
            uint j1 = b_start[cb] + b_count[cb];
${cands_open("j0", "j1", output, stage, live)}
${dist2(dim, periodic, q_point)}
${tally(output, hist_local, local64, "i", "j", guess, stage)}
${cands_close(output, stage)}
        }
${writer_close(output, stage, row_parts)}
${out_end(output, hist_local, local64)}
}

%endif
%if variant == 'row':
// One work-item per point of A, neighbour cells taken a row at a time: for
// each of the 3^(D-1) offsets in dimensions 1.., the row's cells c0-1..c0+1 of
// dimension 0 (stride 1) have consecutive ids, so their points are one
// contiguous range (two where a periodic row wraps): one binary search per
// range instead of one per cell. Self pairs: every neighbour point at a later
// sorted position (sorted by cell id, that is the larger cells plus j > i
// inside the own cell).
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void grid_pairs_row(${args(output)})
{
${out_begin(output, hist_local, local64, stage)}
${load_geometry(dim, periodic)}
${window_reach(output)}
${writer_open(output, stage, row_parts)}
        REAL p[D];
%for k in range(dim):
        p[${k}] = xa[(size_t)${k} * na + i];
%endfor
        ulong aid = a_ids[a_point_cell[i]];
${decode(dim, 'aid')}
        long m0 = (long)m[0], c0 = c[0];
        long lo0, hi0, lo1 = 1, hi1 = 0;        // dimension-0 ranges [lo, hi]
%if periodic:
        if (m0 <= 3) { lo0 = 0; hi0 = m0 - 1; }
        else if (c0 == 0) { lo0 = 0; hi0 = 1; lo1 = m0 - 1; hi1 = m0 - 1; }
        else if (c0 == m0 - 1) { lo0 = 0; hi0 = 0; lo1 = m0 - 2; hi1 = m0 - 1; }
        else { lo0 = c0 - 1; hi0 = c0 + 1; }
%else:
        lo0 = max(c0 - 1, (long)0); hi0 = min(c0 + 1, m0 - 1);
%endif
        int dig[D] = {${", ".join(["0"] * dim)}};
%if row_parts:
        for (uint k_ = 1, r_ = part_; k_ < D; ++k_) {     // row part_ only (its base-3 digits)
            const uint q_ = r_ / 3;
            dig[k_] = (int)(r_ - 3 * q_);
            r_ = q_;
        }
        for (uint o = part_; o < part_ + 1; ++o) {
%else:
        for (uint o = 0; o < NSTENCIL / 3; ++o, stencil_next(dig + 1, D - 1)) {
%endif
            ulong rid = 0;
            int ok = 1;
%for k in range(1, dim):
            {
                const long dk = (long)dig[${k}] - 1;
                long nc = c[${k}] + dk;
%if periodic:
                if (m[${k}] == 1UL && dk != 0) ok = 0;
                if (m[${k}] == 2UL && dk == -1) ok = 0;
                nc = nc < 0 ? nc + (long)m[${k}] : (nc >= (long)m[${k}] ? nc - (long)m[${k}] : nc);
%else:
                if (nc < 0 || nc >= (long)m[${k}]) ok = 0;
%endif
                rid += (ulong)nc * stride[${k}];
            }
%endfor
%if stage:
            // (staged: every work-item takes every row and segment, an empty range where
            // another one skips it: the group's chunks are collective)
%else:
            if (!ok) continue;
%endif
            for (int seg = 0; seg < 2; ++seg) {
                long lo = seg ? lo1 : lo0, hi = seg ? hi1 : hi0;
%if stage:
                uint j0 = 0, j1 = 0;
                if (ok && lo <= hi) {
                    const ulong idhi = rid + (ulong)hi;
                    const int s = find_first(b_ids, b_ncells, rid + (ulong)lo);
                    uint e = (uint)s;
                    while (e < b_ncells && b_ids[e] <= idhi) ++e;
                    if (e != (uint)s) { j0 = b_start[s]; j1 = b_start[e - 1] + b_count[e - 1]; }
                }
%else:
                if (lo > hi) continue;
                ulong idhi = rid + (ulong)hi;
                int s = find_first(b_ids, b_ncells, rid + (ulong)lo);
                uint e = (uint)s;
                while (e < b_ncells && b_ids[e] <= idhi) ++e;
                if (e == (uint)s) continue;
                uint j0 = b_start[s], j1 = b_start[e - 1] + b_count[e - 1];
%endif
                if (!cross) j0 = max(j0, i + 1);
%if window:
                {   // open grids whose cells sort their points by the first coordinate: a row's
                    // cells, in id order along dimension 0, are one sorted range; the points
                    // within the cut of p[0] (widened as the 'cell' kernel's windows)
                    const REAL slack_ = (fabs(p[0]) + wr_) * (REAL)0x1p-18 + wtie;
${window_search("xb", "j0", "j1", "p[0] - wr_ - slack_", "p[0] + wr_ + slack_")}
                }
%endif
${cands_open("j0", "j1", output, stage, live)}
${dist2(dim, periodic, q_point)}
${tally(output, hist_local, local64, "i", "j", guess, stage)}
${cands_close(output, stage)}
            }
        }
${writer_close(output, stage, row_parts)}
${out_end(output, hist_local, local64)}
}

%endif
%if variant == 'cell':
// Work-groups of WG_SIZE points of one cell of A (get_group_id(0): the cell;
// get_group_id(1) of get_num_groups(1): the cell's chunks of WG_SIZE points
// from that one on, every get_num_groups(1)-th; get_group_id(2) of
// get_num_groups(2): every parts-th offset of the stencil), one point per
// work-item, against tiles of each neighbour cell's points staged in local
// memory. A full cell is spread over as many work-groups as it has chunks
// (a work-group per cell waited for the fullest cells: 6x slower than 'row'
// on a clustered catalog); a work-group past its cell's chunks ends at once.
// Every branch around a barrier depends only on the cell, chunk and part
// (uniform). by_cell (periodic grids of 3 or more cells in every dimension):
// each neighbour cell's image comes from its wrap (img): its points are
// shifted as they are staged and the anchors once per cell, with mind's own
// operations (fma(min(n, 0), L, b), fma(-max(n, 0), L, a)), so every
// difference is the one mind computes for the pairs within a cell's side
// (n = rint((a - b) / L) there), without a rint per pair; else mind per pair.
// window (grids whose cells sort their points by the first coordinate,
// Grid.xorder; counts and histograms): of each neighbour cell only the points
// whose first coordinate lies within the cut of the chunk's span are staged
// (two binary searches a neighbour, uniform); the own cell whole.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void grid_pairs_cell(${args(output)})
{
    __local REAL tile[D][WG_SIZE];
    const uint lid = get_local_id(0);
    const uint ca = get_group_id(0);
    const uint a0 = a_start[ca], an = a_count[ca];
    if (get_group_id(1) * WG_SIZE >= an) return;        // uniform: no chunk of this cell left
${out_begin(output, hist_local, local64)}
${load_geometry(dim, periodic)}
    ulong aid = a_ids[ca];
${decode(dim, 'aid')}
${window_reach(output)}
    for (uint abase = get_group_id(1) * WG_SIZE; abase < an; abase += get_num_groups(1) * WG_SIZE) {
        int va = abase + lid < an;
        REAL p[D];
%for k in range(dim):
        p[${k}] = va ? xa[(size_t)${k} * na + a0 + abase + lid] : (REAL)0;
%endfor
%if window:
        // the chunk's span of first coordinates (a cell's points sort by it: its first and last)
        const REAL ax0_ = xa[a0 + abase], ax1_ = xa[a0 + min(abase + (uint)WG_SIZE, an) - 1];
%endif
${stencil_open(dim, periodic, images=by_cell)}
            if (o % get_num_groups(2) != get_group_id(2)) continue;
            int own = !cross && nid == aid;
            if (!cross && nid < aid) continue;
            int cb = own ? (int)ca : find_cell(b_ids, cross ? 0 : ca + 1, b_ncells, nid);
            if (cb < 0) continue;
%if by_cell:
            REAL ps[D];             // the anchor shifted by the cell's image
%for k in range(dim):
            ps[${k}] = fma(-fmax(img[${k}], (REAL)0), L[${k}], p[${k}]);
%endfor
%endif
            uint bfirst = own ? abase : 0;    // own cell: only j > i
            uint b0 = b_start[cb], bn = b_count[cb];
%if window:
            if (!own) {
                // the neighbour's points within wr_ of the chunk along dimension 0 (as the
                // anchors see them: b + img L): a search each way, widened by far more than
                // the roundings of these bounds and of the pair's own difference, and by
                // wtie: points whose places in a cell tie in the sort key keep their index
                // order, so the chunk's first and last anchors and the neighbour's order are
                // off by up to a tie's spread (the host's bound, execute.pairs); a point left
                // out is beyond the cut in the kernel's arithmetic
%if by_cell:
                const REAL sh_ = img[0] * L[0];
%else:
                const REAL sh_ = (REAL)0;
%endif
                const REAL slack_ = (fabs(ax0_) + fabs(ax1_) + fabs(sh_) + wr_) * (REAL)0x1p-18 + wtie;
${window_search("(xb + b0)", "bfirst", "bn", "ax0_ - sh_ - wr_ - slack_", "ax1_ - sh_ + wr_ + slack_")}
            }
%endif
            for (uint bbase = bfirst; bbase < bn; bbase += WG_SIZE) {
                barrier(CLK_LOCAL_MEM_FENCE);
                if (bbase + lid < bn) {
%for k in range(dim):
%if by_cell:
                    tile[${k}][lid] = fma(fmin(img[${k}], (REAL)0), L[${k}], xb[(size_t)${k} * nb + b0 + bbase + lid]);
%else:
                    tile[${k}][lid] = xb[(size_t)${k} * nb + b0 + bbase + lid];
%endif
%endfor
                }
                barrier(CLK_LOCAL_MEM_FENCE);
                uint tn = min((uint)WG_SIZE, bn - bbase);
                uint tfirst = own && bbase == abase ? lid + 1 : 0;
                if (va) {
%if ptx:
                    // unrolled: the loop's own instructions (tile address, bound, branch)
                    // were a fifth of a candidate's on the H100 (examples/PERFORMANCE.md);
                    // NVIDIA's compiler only (PoCL's clang cannot unroll it and says so)
                    #pragma unroll 4
%endif
                    for (uint tt = tfirst; tt < tn; ++tt) {
%if by_cell:
${dist2(dim, False, q_tile, 'ps')}
%else:
${dist2(dim, periodic, q_tile)}
%endif
${tally(output, hist_local, local64, "a0 + abase + lid", "b0 + bbase + tt", guess)}
                    }
                }
            }
        }
    }
${out_end(output, hist_local, local64)}
}
%endif
</%def>
