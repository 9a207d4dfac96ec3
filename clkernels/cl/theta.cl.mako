## Nested-loop theta joins (host/theta): every pair (row i of table A, row j
## of table B) for which a user's OpenCL C predicate over the two rows holds;
## the 2-BS paper's NLJ case study (section 6.2): tiles of B staged in local
## memory, output through the direct output buffer (Algorithm 5, here the
## page allocator of pages.cl.mako).
##
## Columns come as separate __global arrays, each with its own OpenCL type
## (structure of arrays). A work-item handles one row i of A against one part
## of B and is one writer of the pair-output protocol: writer w is row
## i = w % na_pad (rows past na: no writer) against B's rows [s * plen, (s + 1)
## * plen), s = w / na_pad (one part, plen >= nb, unless A is too short to
## fill the device: host/theta/plan.py). Its records (i, j) come in
## increasing j, so a writer that stopped on a full pool resumes from the redo
## list by skipping the records it placed (done[w]). A work-group's tiles span
## its writers' parts (one part, but where the writers come from a list: the
## redo list, the estimate's sample).
##
## Parameters:
##   acols, bcols  the columns the predicate reads: ((name, ctype), ...), ctype
##                 one of int, long, uint, float, double
##   predicate     one C expression (checked by the host: no statements, no
##                 address spaces) over ta_<name> / tb_<name>, the values of
##                 the rows' columns; it is compiled inside a function of those
##                 values alone, so it sees nothing of the kernel's state
##   wg_size       work-items per group = rows of B per tile
##   output        'pairs' (page allocator: pool, ctl, npages, page, fills, done,
##                 redo), 'paircount' (records per writer into cnt[w]) or
##                 'pairwrite' (writer w's records at out_ij[offs[w - w0]] on)
##   stage         'pairs': records a writer stages in local memory (0: the
##                 paper's writers, a page_put in the test loop); the work-group
##                 commits them to one run of pages at tile boundaries where some
##                 stage is half full, and at the end (pages.cl.mako)
##   grouped       'pairs' with stage: the writers of a sub-group share one
##                 buffer of stage * 32 records that goes to the pool's next
##                 records when nearly full (pages.cl.mako's grouped staging:
##                 a dense pool, no spill whatever the density; for joins whose
##                 sample finds many pairs a writer)
## Writers: nw of them, ids w0 + k, or wl[k] when wl_on (the redo list or a
## sample); na_pad and plen lay them out over A's rows and B's parts.
<%namespace name="common" file="common.cl.mako"/>
<%namespace name="pages" file="pages.cl.mako"/>

<%def name="join(acols, bcols, predicate, wg_size, output, stage=0, grouped=False)">
<%
    if output not in ("pairs", "paircount", "pairwrite"):
        raise ValueError("output must be 'pairs', 'paircount' or 'pairwrite', got %r" % (output,))
    for _n, _t in list(acols) + list(bcols):
        if _t not in ("int", "long", "uint", "float", "double"):
            raise ValueError("unsupported column type %r" % (_t,))
    pred_args = ["const %s ta_%s" % (t, n) for n, t in acols] + ["const %s tb_%s" % (t, n) for n, t in bcols]
    call_args = ["ra_%s" % n for n, t in acols] + ["tl_%s[t]" % n for n, t in bcols]
    staged = output == "pairs" and stage > 0
    grouped = staged and grouped
    live = " && !stopped_" if output == "pairs" and not staged else ""
%>
${common.prelude(real='float', wg_size=wg_size)}
%if output == 'pairs':
${pages.page_defs(stage if staged else 0, grouped=grouped)}
%else:
typedef uint2 PREC;
%endif

// The user's predicate over one row of A and one row of B.
inline int theta_pred(${", ".join(pred_args) or "void"})
{
    return (${predicate}) ? 1 : 0;
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void theta_join(
%for n, t in acols:
    __global const ${t} *a_${n},
%endfor
    const uint na,
%for n, t in bcols:
    __global const ${t} *b_${n},
%endfor
    const uint nb, const uint na_pad, const uint plen,
    const uint nw, const uint w0, __global const uint *wl, const uint wl_on,
%if output == 'pairs':
    __global PREC *pool, volatile __global uint *ctl, const uint npages, const uint page,
    __global uint *fills, __global uint *done, __global uint *redo)
%elif output == 'paircount':
    __global uint *cnt)
%else:
    __global const ulong *offs, __global PREC *out_ij)
%endif
{
%for n, t in bcols:
    __local ${t} tl_${n}[WG_SIZE];
%endfor
%if grouped:
    PAGE_GROUP_LOCALS;
%elif staged:
    PAGE_STAGE_LOCALS;
%endif
    __local uint span_[2];
    // every work-item runs the tile loop to its end (the barriers); one past
    // the writers, or stopped, only emits nothing
    const uint gw_ = get_global_id(0), lid_ = get_local_id(0);
    const uint w = gw_ < nw ? (wl_on ? wl[gw_] : w0 + gw_) : 0u;
    const uint part_ = w / na_pad, i = w - part_ * na_pad;
    const int live_ = gw_ < nw && i < na;
    // the writer's rows of B [jlo_, jhi_), and the tiles' span: their union over the work-group
    const uint jlo_ = live_ ? part_ * plen : nb, jhi_ = live_ ? min(nb, jlo_ + plen) : 0u;
    if (lid_ == 0) { span_[0] = nb; span_[1] = 0u; }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (live_ && jlo_ < jhi_) { atomic_min(span_, jlo_); atomic_max(span_ + 1, jhi_); }
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint jfirst_ = span_[0], jend_ = span_[1];
%for n, t in acols:
    const ${t} ra_${n} = live_ ? a_${n}[i] : (${t})0;
%endfor
%if output == 'pairs':
    PAGE_WRITER(live_ && wl_on ? done[w] : 0u);
%else:
    uint h_ = 0;
%endif
%if output == 'pairwrite':
    const ulong wbase = live_ ? offs[w - w0] : 0UL;
%endif
    for (uint jb = jfirst_; jb < jend_; jb += WG_SIZE) {
%if staged and not grouped:
        if (jb != jfirst_) {            // every work-item: the trip count is the same for all
${pages.stage_commit_if("((jb - jfirst_) / WG_SIZE)")}
        }
%endif
        barrier(CLK_LOCAL_MEM_FENCE);
        if (jb + lid_ < jend_) {
%for n, t in bcols:
            tl_${n}[lid_] = b_${n}[jb + lid_];
%endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        // the writer's rows of this tile [t0_, t1_) (the whole tile but at its part's ends)
        const uint t0_ = jlo_ > jb ? min(jlo_ - jb, (uint)WG_SIZE) : 0u;
        const uint t1_ = jhi_ > jb ? min(jhi_ - jb, (uint)WG_SIZE) : 0u;
%if grouped:
        {   // every work-item, in step (collective): chunks of the tile's rows
            const uint tn = min((uint)WG_SIZE, jend_ - jb);
            for (uint tc_ = 0; tc_ < tn; tc_ += PAGE_STAGE_CHUNK) {
                const uint te_ = min(tn, tc_ + PAGE_STAGE_CHUNK);
${pages.group_loop("tc_", "te_")}
                    const uint t = j;
                    const int hit_ = in_ && live_ && t >= t0_ && t < t1_ && theta_pred(${", ".join(call_args)});
                    PAGE_EMIT_IF(hit_, ((PREC)(i, jb + t)));
                }
                PAGE_GROUP_ROOM(GSTAGE - PAGE_STAGE_CHUNK * GRP_SIZE);
            }
        }
%else:
        if (live_) {
            const uint tn = t1_;
%if staged:
            // the fast path: the count pass's test loop plus a local store a hit while the
            // stage has room; a writer still skipping the records of an earlier round, or
            // whose stage overflowed in this tile, takes the tile again in chunks of
            // PAGE_STAGE_CHUNK rows, room made before each (a spill to its own pages)
            int slow_ = stopped_ || h_ < skip_h_;
            if (!slow_) {
                uint c_ = sc_;
                for (uint t = t0_; t < tn; ++t)
                    if (theta_pred(${", ".join(call_args)})) PAGE_STAGE_FAST((PREC)(i, jb + t), c_);
                if (c_ <= STAGE) sc_ = c_; else slow_ = 1;
            }
            for (uint tc = t0_; slow_ && tc < tn && !stopped_; ) {
                if (sc_ > STAGE - PAGE_STAGE_CHUNK) PAGE_STAGE_SPILL();
                const uint te = min(tn, tc + PAGE_STAGE_CHUNK);
                for (uint t = tc; t < te; ++t)
                    if (theta_pred(${", ".join(call_args)})) PAGE_EMIT((PREC)(i, jb + t));
                tc = te;
            }
%else:
            for (uint t = t0_; t < tn${live}; ++t) {
                if (theta_pred(${", ".join(call_args)})) {
%if output == 'paircount':
                    ++h_;
%elif output == 'pairwrite':
                    // (vstore2: an assignment of the vector compiles, under Oclgrind, to a
                    // store of undef and two scalar stores, which it reports)
                    vstore2((PREC)(i, jb + t), 0, (__global uint *)(out_ij + wbase + h_));
                    ++h_;
%else:
                    PAGE_EMIT((PREC)(i, jb + t));
%endif
                }
            }
%endif
        }
%endif
    }
%if grouped:
    PAGE_GROUP_ROOM(0u);
    if (live_) page_end(ctl, fills, done, redo, w, PAGE_NONE, 0u, h_, stopped_);
%else:
%if staged:
${pages.stage_commit()}
%endif
    if (live_) {
%if output == 'pairs':
        page_end(ctl, fills, done, redo, w, pg_, fill_, h_, stopped_);
%elif output == 'paircount':
        cnt[w] = h_;
%endif
    }
%endif
}
</%def>
