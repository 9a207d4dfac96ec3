## Rectangle spatial join (host/rectjoin): the pairs (query box i, data box j)
## of two sets of axis-aligned boxes that intersect, closed intervals:
## q.lo_k <= b.hi_k && b.lo_k <= q.hi_k for every k (touching boxes meet).
## Comparisons only: the decision is exact in the input type.
##
## Boxes live on the device as structure of arrays: column c of n boxes at
## [c * n, (c + 1) * n), columns lo_0..lo_{d-1}, hi_0..hi_{d-1} (rj_layout
## makes it from the user's (n, 2d) rows and checks them).
##
## Two joins, each a work-item per query box (a writer of the pair protocol of
## pages.cl.mako, its records in a deterministic order):
##   brute  the thesis's brute force: every data box, tiles of WG_SIZE data
##          boxes staged in local memory and shared by the work-group
##   grid   a uniform grid: every data box is listed in each cell it overlaps
##          (or in the overflow list, cell NC, when it overlaps more than
##          `cap` cells); a query visits the cells it overlaps and reports a
##          pair only in the cell holding the reference point
##          max(q.lo, b.lo) (componentwise), so once; the overflow list is
##          tested by every query in tiles through local memory; a query
##          overlapping more than `qcap` cells records nothing here (the host
##          lists them with rj_big_queries and joins them by brute force).
## Cell coordinates come from ONE function, rj_cell (the same IEEE
## operations for corners and reference points; monotone in v), so the
## reference point's cell lies inside both boxes' cell ranges.
##
## Outputs (`output`):
##   count      the total into total[0] (64-bit); `variant` 'atomic': one
##              global atomic per hit (the thesis's non-optimized), 'reduce':
##              per-work-item counts, a sub-group reduction (warp shuffles),
##              the sub-groups' sums added by one work-item, one atomic per
##              work-group (its optimized); with the `local` sub-group back
##              end (no sub-groups) the work-items' counts are summed directly
##   paircount  hits per writer into cnt[i] (the per-query counts)
##   pairwrite  writer i's records at out_ij[offs[i - w0]] on
##   pairs      the page allocator (pool, ctl, npages, page, fills, done, redo)
## Writers: nw of them, ids w0 + k, or wl[k] when wl_on; a writer is a query
## box (grid; brute force with one part), or brute force's (query i, part p)
## for writer p * nqp + i: the data boxes [p * chunk, (p + 1) * chunk) (a few
## large queries spread over the device).
<%namespace name="common" file="common.cl.mako"/>
<%namespace name="pages" file="pages.cl.mako"/>
<%!
def overlap(dims, blo, bhi):
    """The intersection test of the query (qlo_k, qhi_k) with a box (lo, hi
    expressions of k), parenthesized."""
    return "(" + " && ".join("qlo%d <= %s && %s <= qhi%d" % (k, bhi(k), blo(k), k) for k in range(dims)) + ")"

def linear(dims, c):
    """The linear id of cell coordinates c(0).. (c(0) fastest)."""
    e = "(uint)%s" % c(dims - 1)
    for k in range(dims - 2, -1, -1):
        e = "(%s * (uint)gn%d + (uint)%s)" % (e, k, c(k))
    return e
%>

<%def name="check(real, dims, output, variant)">
<%
    if real not in ("float", "double"):
        raise ValueError("real must be 'float' or 'double', got %r" % (real,))
    if dims not in (1, 2, 3, 4):
        raise ValueError("dims must be 1..4, got %r" % (dims,))
    if output not in ("count", "paircount", "pairwrite", "pairs"):
        raise ValueError("unknown output %r" % (output,))
    if variant not in ("atomic", "reduce"):
        raise ValueError("variant must be 'atomic' or 'reduce', got %r" % (variant,))
%>
</%def>

## The output's kernel arguments (after the writers' arguments).
<%def name="out_args(output)">
%if output == 'count':
    volatile __global ulong *total)
%elif output == 'paircount':
    __global uint *cnt)
%elif output == 'pairwrite':
    __global const ulong *offs, __global PREC *out_ij)
%else:
    __global PREC *pool, volatile __global uint *ctl, const uint npages, const uint page,
    __global uint *fills, __global uint *done, __global uint *redo)
%endif
</%def>

## Declarations at the top of a kernel: valid_ (the work-item is a writer),
## wr_ (its writer id: counts, offsets, the page protocol), live_ (it has a
## query box) and i (the query box, the records' first index) known.
<%def name="out_begin(output, variant)">
%if output == 'pairs':
    PAGE_WRITER(valid_ && wl_on ? done[wr_] : 0u);
%else:
    uint h_ = 0;
%endif
%if output == 'pairwrite':
    const ulong wbase = valid_ ? offs[wr_ - w0] : 0UL;
%endif
</%def>

## One hit (i, j).
<%def name="hit(output, variant)">
%if output == 'count' and variant == 'atomic':
atomic_add_u64_g(total, 1UL);
%elif output == 'count' or output == 'paircount':
++h_;
%elif output == 'pairwrite':
{ vstore2((PREC)(i, j), 0, (__global uint *)(out_ij + wbase + h_)); ++h_; }
%else:
PAGE_EMIT((PREC)(i, j));
%endif
</%def>

## Local memory of the count's reduction (at the kernel's outermost scope).
<%def name="out_decl(output, variant)">
%if output == 'count' and variant == 'reduce':
<%
    # the `local` back end's emulated sub-group reduction costs 20 work-group barriers
    # (seconds of PoCL compile time): there each work-item leaves its count instead
    if sg_backend == 'nv':
        nparts = "(WG_SIZE / 32)"
    else:
        nparts = "WG_SIZE"
%>
#define RJ_NPARTS ${nparts}
%if sg_backend != 'local':
    SG_DECL;
%endif
    __local ulong parts_[RJ_NPARTS];
%endif
</%def>

## The kernel's end: every work-item of the group reaches it (uniform control
## flow for the sub-group reduction).
<%def name="out_end(output, variant)">
%if output == 'count' and variant == 'reduce':
    {
%if sg_backend == 'local':
        parts_[get_local_id(0)] = (ulong)h_;
%else:
        const ulong s_ = sg_reduce_add_ul(sg_mem, (ulong)h_);
        if (sg_lane() == 0) parts_[sg_id()] = s_;
%endif
        barrier(CLK_LOCAL_MEM_FENCE);
        if (get_local_id(0) == 0) {
%if sg_backend == 'khr':
            const uint nsg_ = get_num_sub_groups();
%elif sg_backend == 'local':
            const uint nsg_ = WG_SIZE;
%else:
            const uint nsg_ = RJ_NPARTS;
%endif
            ulong sum_ = 0;
            for (uint k = 0; k < nsg_; ++k) sum_ += parts_[k];
            if (sum_) atomic_add_u64_g(total, sum_);
        }
    }
%elif output == 'paircount':
    if (valid_) cnt[wr_] = h_;
%elif output == 'pairs':
    if (valid_) page_end(ctl, fills, done, redo, wr_, pg_, fill_, h_, stopped_);
%endif
</%def>

<%def name="head(real, wg_size, output)">
${common.prelude(real=real, wg_size=wg_size)}
%if output == 'pairs':
${pages.page_defs()}
%else:
typedef uint2 PREC;
%endif
</%def>


<%def name="load_query(dims)">
%for k in range(dims):
    const REAL qlo${k} = live_ ? q[(size_t)${k} * nq + i] : (REAL)0;
    const REAL qhi${k} = live_ ? q[(size_t)${dims + k} * nq + i] : (REAL)0;
%endfor
</%def>

## ----------------------------------------------------------------- layout
## The user's (n, 2d) rows into the SoA columns; flags[0] |= 1 for a value
## that is not finite, |= 2 for lo > hi.
<%def name="layout(real, dims, wg_size)">
${check(real, dims, 'count', 'reduce')}
${common.prelude(real=real, wg_size=wg_size)}
__kernel void rj_layout(__global const REAL *src, const uint n, __global REAL *dst, volatile __global uint *flags)
{
    const uint j = get_global_id(0);
    if (j >= n) return;
    uint bad = 0;
%for k in range(dims):
    {
        const REAL lo = src[(size_t)j * ${2 * dims} + ${k}], hi = src[(size_t)j * ${2 * dims} + ${dims + k}];
        dst[(size_t)${k} * n + j] = lo;
        dst[(size_t)${dims + k} * n + j] = hi;
        if (!isfinite(lo) || !isfinite(hi)) bad |= 1u;
        else if (lo > hi) bad |= 2u;
    }
%endfor
    if (bad) atomic_or(flags, bad);
}

// The SoA columns of the m boxes ids[0..m) of src (n boxes) into dst.
__kernel void rj_gather(__global const REAL *src, const uint n, __global const uint *ids, const uint m,
                        __global REAL *dst)
{
    const uint t = get_global_id(0);
    if (t >= m) return;
    const uint j = ids[t];
%for c in range(2 * dims):
    dst[(size_t)${c} * m + t] = src[(size_t)${c} * n + j];
%endfor
}
</%def>

## ------------------------------------------------------------ brute force
<%def name="brute(real, dims, wg_size, output, variant, vec)">
${check(real, dims, output, variant)}
${head(real, wg_size, output)}
<%
    live = " && !stopped_" if output == "pairs" else ""
    # the tile as vectors (vec: one local load of 2 or 4 columns) or scalars: (width, [columns])
    if vec:
        vecs = [(min(4, 2 * dims - c0), list(range(c0, min(c0 + 4, 2 * dims)))) for c0 in range(0, 2 * dims, 4)]
    else:
        vecs = [(1, [c]) for c in range(2 * dims)]
    where = {}
    for v, (w, cs) in enumerate(vecs):
        for s, c in enumerate(cs):
            where[c] = "v%d.s%d" % (v, s) if w > 1 else "v%d" % v
%>
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void rj_brute(__global const REAL *q, const uint nq, __global const REAL *b, const uint nb,
              const uint nqp, const uint chunk,
              const uint nw, const uint w0, __global const uint *wl, const uint wl_on,
${out_args(output)}
{
${out_decl(output, variant)}
%for v, (w, cs) in enumerate(vecs):
    __local ${"REAL%d" % w if w > 1 else "REAL"} tv${v}[WG_SIZE];
%endfor
    __local uint glo_, ghi_;
    // writer wr_ = part * nqp + i: query i against the data boxes [part * chunk, + chunk)
    const uint gw_ = get_global_id(0), lid_ = get_local_id(0);
    const int valid_ = gw_ < nw;
    const uint wr_ = valid_ ? (wl_on ? wl[gw_] : w0 + gw_) : 0u;
    const uint part_ = wr_ / nqp, i = wr_ - part_ * nqp;
    const int live_ = valid_ && i < nq;
    const uint jlo_ = min(nb, part_ * chunk), jhi_ = min(nb - jlo_, chunk) + jlo_;
${load_query(dims)}
${out_begin(output, variant)}
    // the tiles cover the union of the group's ranges (one range but in redo rounds)
    if (lid_ == 0) { glo_ = 0xffffffffu; ghi_ = 0u; }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (live_ && jlo_ < jhi_) { atomic_min(&glo_, jlo_); atomic_max(&ghi_, jhi_); }
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint g0_ = glo_, g1_ = ghi_;
    for (uint jb = g0_; jb < g1_; jb += WG_SIZE) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (jb + lid_ < g1_) {
            // scalar stores into the vector tile (a vector literal stored whole reads as
            // uninitialised to Oclgrind; the loads below stay one vector each)
%for v, (w, cs) in enumerate(vecs):
%for s, c in enumerate(cs):
            ((__local REAL *)tv${v})[${w} * lid_ + ${s}] = b[(size_t)${c} * nb + jb + lid_];
%endfor
%endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (live_) {
            // (signed: no usub.sat, which Oclgrind lacks; nb < 2^31)
            const uint t0 = (uint)max((int)jlo_ - (int)jb, 0);
            const uint t1 = (uint)min((int)WG_SIZE, max((int)jhi_ - (int)jb, 0));
            for (uint t = t0; t < t1${live}; ++t) {
%for v, (w, cs) in enumerate(vecs):
                const ${"REAL%d" % w if w > 1 else "REAL"} v${v} = tv${v}[t];
%endfor
                if ${overlap(dims, lambda k: where[k], lambda k: where[dims + k])} {
                    const uint j = jb + t;
                    ${hit(output, variant)}
                }
            }
        }
    }
${out_end(output, variant)}
}
</%def>

## ------------------------------------------------------------------- grid
## Cell coordinate along one axis: floor((v - o) * inv) clamped to [0, n - 1]
## in REAL before the conversion (no overflow); monotone in v.
<%def name="cell_fn()">
inline int rj_cell(const REAL v, const REAL o, const REAL inv, const int n)
{
    REAL f = floor((v - o) * inv);
    f = fmin(fmax(f, (REAL)0), (REAL)(n - 1));
    return (int)f;
}
</%def>

<%def name="geom_args(dims)">${", ".join("const REAL go%d, const REAL gs%d, const int gn%d" % (k, k, k)
                                          for k in range(dims))}</%def>


## Building the grid, the dense cell table [cs, ce) into the box list vals
## (NC + 1 cells: the last one the overflow list of boxes over more than `cap`
## cells), two ways:
##   sort     per data box the number of list entries (rj_cell_count), the
##            entries (cell id, box) at their scanned offsets (rj_cell_fill),
##            the sort's padding, the sort of pairs (host/primitives), the
##            cell bounds of the sorted keys (rj_cell_bounds)
##   scatter  a counting sort (rj_cell_hist, the scan, rj_cell_scatter)
## `stmt` for every cell (c0..) of the box's range [l, u] (c0 innermost).
<%def name="box_cells(dims, stmt)">
<% indent = "    " %>
%for k in range(dims - 1, -1, -1):
${indent * (dims - k)}for (int c${k} = l${k}; c${k} <= u${k}; ++c${k})
%endfor
${indent * (dims + 1)}${stmt}
</%def>

<%def name="grid_build(real, dims, wg_size)">
${check(real, dims, 'count', 'reduce')}
${common.prelude(real=real, wg_size=wg_size)}
${cell_fn()}
<%
    rng = "\n".join("    const int l%d = rj_cell(b[(size_t)%d * nb + j], go%d, gs%d, gn%d), "
                    "u%d = rj_cell(b[(size_t)%d * nb + j], go%d, gs%d, gn%d);"
                    % (k, k, k, k, k, k, dims + k, k, k, k) for k in range(dims))
    ncells = " * ".join("(ulong)(u%d - l%d + 1)" % (k, k) for k in range(dims))
%>
__kernel void rj_cell_count(__global const REAL *b, const uint nb, ${geom_args(dims)}, const uint cap,
                            __global uint *cnt)
{
    const uint j = get_global_id(0);
    if (j >= nb) return;
${rng}
    const ulong m = ${ncells};
    cnt[j] = m > cap ? 1u : (uint)m;
}

__kernel void rj_cell_fill(__global const REAL *b, const uint nb, ${geom_args(dims)}, const uint cap, const uint nc,
                           __global const uint *offs, __global ulong *keys, __global uint *vals)
{
    const uint j = get_global_id(0);
    if (j >= nb) return;
${rng}
    const ulong m = ${ncells};
    uint at = offs[j];
    if (m > cap) {
        keys[at] = nc;
        vals[at] = j;
        return;
    }
${box_cells(dims, "{ keys[at] = %s; vals[at] = j; ++at; }" % linear(dims, lambda k: "c%d" % k))}
}

// The scatter build (a counting sort): entries per cell, their exclusive scan
// (cs), then each box placed at an atomic cursor of its cells (ce ends at the
// cells' ends). The order inside a cell is the atomics' order, fixed for the
// life of the grid, so a writer's records keep their order between rounds.
__kernel void rj_cell_hist(__global const REAL *b, const uint nb, ${geom_args(dims)}, const uint cap, const uint nc,
                           volatile __global uint *cnt)
{
    const uint j = get_global_id(0);
    if (j >= nb) return;
${rng}
    const ulong m = ${ncells};
    if (m > cap) {
        atomic_inc(cnt + nc);
        return;
    }
${box_cells(dims, "atomic_inc(cnt + %s);" % linear(dims, lambda k: "c%d" % k))}
}

__kernel void rj_cell_scatter(__global const REAL *b, const uint nb, ${geom_args(dims)}, const uint cap, const uint nc,
                              volatile __global uint *cur, __global uint *vals)
{
    const uint j = get_global_id(0);
    if (j >= nb) return;
${rng}
    const ulong m = ${ncells};
    if (m > cap) {
        vals[atomic_inc(cur + nc)] = j;
        return;
    }
${box_cells(dims, "vals[atomic_inc(cur + %s)] = j;" % linear(dims, lambda k: "c%d" % k))}
}

__kernel void rj_cell_pad(const uint total, const uint n2, __global ulong *keys, __global uint *vals)
{
    const uint t = total + get_global_id(0);
    if (t >= n2) return;
    keys[t] = ~0UL;
    vals[t] = ~0u;
}

// The query boxes over more than qcap cells (ids in no order; n[0] of them).
__kernel void rj_big_queries(__global const REAL *q, const uint nq, ${geom_args(dims)}, const uint qcap,
                             volatile __global uint *n, __global uint *ids)
{
    const uint j = get_global_id(0);
    if (j >= nq) return;
<% qrng = rng.replace("b[", "q[").replace("* nb", "* nq") %>
${qrng}
    if (${ncells} > qcap) ids[atomic_inc(n)] = j;
}

// The entries' boxes in list order, rows of 2d values (sbox[t * 2d + c] =
// column c of box vals[t]): the join reads a cell's boxes contiguously.
__kernel void rj_entry_boxes(__global const REAL *b, const uint nb, __global const uint *vals, const uint total,
                             __global REAL *sbox)
{
    const uint t = get_global_id(0);
    if (t >= total) return;
    const uint j = vals[t];
%for c in range(2 * dims):
    sbox[(size_t)t * ${2 * dims} + ${c}] = b[(size_t)${c} * nb + j];
%endfor
}

__kernel void rj_cell_bounds(__global const ulong *keys, const uint total, __global uint *cs, __global uint *ce)
{
    const uint t = get_global_id(0);
    if (t >= total) return;
    const ulong k = keys[t];
    if (t == 0 || keys[t - 1] != k) cs[k] = t;
    if (t + 1 == total || keys[t + 1] != k) ce[k] = t + 1;
}
</%def>

## The grid join: a work-item per query box: the overflow list in tiles
## through local memory (the same list for the whole work-group, as brute
## force), then the cells its box overlaps (reference-cell rule). A query box
## over more than QCAP cells records nothing here: the host joins those by
## brute force (rj_big_queries lists them).
<%def name="grid_join(real, dims, wg_size, output, variant, qcap)">
${check(real, dims, output, variant)}
${head(real, wg_size, output)}
${cell_fn()}
<%
    live = " && !stopped_" if output == "pairs" else ""
    # a cell entry's box: 2d values at sbox + t * 2d as vectors of 4 and 2 (vloadn; not
    # vload8: PoCL 3.0 loads double8 wrongly, 4-D float64 joins missed pairs)
    chunks, c0 = [], 0
    while c0 < 2 * dims:
        w = 4 if c0 + 4 <= 2 * dims else 2
        chunks.append((c0, w))
        c0 += w
    comp = {}
    for v, (c0, w) in enumerate(chunks):
        for k in range(w):
            comp[c0 + k] = "e%d.s%d" % (v, k)
    test = overlap(dims, lambda k: comp[k], lambda k: comp[dims + k])
    qcells = " * ".join("(ulong)(u%d - l%d + 1)" % (k, k) for k in range(dims))
    refs = " && ".join("rj_cell(fmax(qlo%d, %s), go%d, gs%d, gn%d) == c%d" % (k, comp[k], k, k, k, k)
                       for k in range(dims))
    indent = "    "
%>
#define QCAP ${qcap}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void rj_grid(__global const REAL *q, const uint nq, __global const REAL *b, const uint nb, ${geom_args(dims)},
             const uint nc, __global const uint *cs, __global const uint *ce, __global const uint *vals,
             __global const REAL *sbox, const uint nw, const uint w0, __global const uint *wl, const uint wl_on,
${out_args(output)}
{
${out_decl(output, variant)}
%for c in range(2 * dims):
    __local REAL tl${c}[WG_SIZE];
%endfor
    __local uint tj[WG_SIZE];
    const uint gw_ = get_global_id(0), lid_ = get_local_id(0);
    const int valid_ = gw_ < nw, live_ = valid_;
    const uint wr_ = valid_ ? (wl_on ? wl[gw_] : w0 + gw_) : 0u, i = wr_;
${load_query(dims)}
${out_begin(output, variant)}
%for k in range(dims):
    const int l${k} = rj_cell(qlo${k}, go${k}, gs${k}, gn${k}), u${k} = rj_cell(qhi${k}, go${k}, gs${k}, gn${k});
%endfor
    const int act_ = live_ && ${qcells} <= QCAP;
    // the overflow list (boxes over more than `cap` cells): tested, no rule
    const uint os = cs[nc], oe = ce[nc];
    for (uint tb = os; tb < oe; tb += WG_SIZE) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (tb + lid_ < oe) {
            const uint jj = vals[tb + lid_];
            tj[lid_] = jj;
%for c in range(2 * dims):
            tl${c}[lid_] = b[(size_t)${c} * nb + jj];
%endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (act_) {
            const uint tn = min((uint)WG_SIZE, oe - tb);
            for (uint t = 0; t < tn${live}; ++t) {
                if ${overlap(dims, lambda k: "tl%d[t]" % k, lambda k: "tl%d[t]" % (dims + k))} {
                    const uint j = tj[t];
                    ${hit(output, variant)}
                }
            }
        }
    }
    if (act_) {
%for k in range(dims - 1, -1, -1):
${indent * (dims - k + 1)}for (int c${k} = l${k}; c${k} <= u${k}${live}; ++c${k})
%endfor
${indent * (dims + 2)}{
${indent * (dims + 2)}    const uint cid = ${linear(dims, lambda k: "c%d" % k)};
${indent * (dims + 2)}    const uint e = ce[cid];
${indent * (dims + 2)}    for (uint t = cs[cid]; t < e${live}; ++t) {
%for v, (c0, w) in enumerate(chunks):
${indent * (dims + 2)}        const ${real}${w} e${v} = vload${w}(0, sbox + (size_t)t * ${2 * dims} + ${c0});
%endfor
${indent * (dims + 2)}        if (${test[1:-1]} && ${refs}) {
${indent * (dims + 2)}            const uint j = vals[t];
${indent * (dims + 2)}            ${hit(output, variant)}
${indent * (dims + 2)}        }
${indent * (dims + 2)}    }
${indent * (dims + 2)}}
    }
${out_end(output, variant)}
}
</%def>
