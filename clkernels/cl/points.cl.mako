## Point-set primitives (host/primitives/points.py): the fused bounds
## reduction every family starts with, and the layout of kernel coordinates.
##
## Points arrive as the user's (n, D) row-major array (AoS) in its own dtype
## (ORIG: float or double).
<%namespace name="common" file="common.cl.mako"/>

## ---------------------------------------------------------------- bounds
## One pass: per dimension the minimum and maximum, and whether any value is
## NaN or inf. Group g writes its row of 2D+1 values: out[g * (2D+1) + k] the
## minimum, [.. + D + k] the maximum, [.. + 2D] 1 if it saw NaN/inf, else 0;
## the host reduces the (few) rows after one small read.
<%def name="bounds(orig, dim, wg_size)">
${common.prelude(real=orig, wg_size=wg_size)}
#define D ${dim}
typedef ${orig} ORIG;

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void bounds(__global const ORIG *x, const ulong n, __global ORIG *out)
{
    __local ORIG lmin[WG_SIZE];
    __local ORIG lmax[WG_SIZE];
    __local uint lbad[WG_SIZE];
    const uint t = get_local_id(0);
    ORIG mn[D], mx[D];
    uint nonfinite = 0;
%for k in range(dim):
    mn[${k}] = INFINITY; mx[${k}] = -INFINITY;
%endfor
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
%for k in range(dim):
        {
            const ORIG v = x[i * D + ${k}];
            nonfinite |= !isfinite(v);
            mn[${k}] = fmin(mn[${k}], v);
            mx[${k}] = fmax(mx[${k}], v);
        }
%endfor
    }
    lbad[t] = nonfinite;
%for k in range(dim):
    lmin[t] = mn[${k}]; lmax[t] = mx[${k}];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG_SIZE / 2; s > 0; s >>= 1) {
        if (t < s) {
            lmin[t] = fmin(lmin[t], lmin[t + s]);
            lmax[t] = fmax(lmax[t], lmax[t + s]);
%if k == 0:
            lbad[t] |= lbad[t + s];
%endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) {
        __global ORIG *row = out + get_group_id(0) * (2 * D + 1);
        row[${k}] = lmin[0];
        row[D + ${k}] = lmax[0];
%if k == 0:
        row[2 * D] = lbad[0] ? (ORIG)1 : (ORIG)0;
%endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);
%endfor
}
</%def>

## ------------------------------------------------------- kernel coordinates
## REAL kc = (wrap(value) - sh_k) * scale, in WIDE (double where the device has
## it); wrap(v) = v - L floor(v / L) in [0, L) with a periodic box L_k. Callers
## declare WIDE, sh_k, L_k (periodic) and scale.
<%def name="kernel_coord(value, k, periodic)">
            WIDE v_ = (WIDE)(${value});
%if periodic:
            v_ = v_ - L_${k} * floor(v_ / L_${k});
            if (v_ >= L_${k}) v_ -= L_${k};         // floor's rounding may leave v == L
            if (v_ < (WIDE)0) v_ = (WIDE)0;
%endif
            const REAL kc = (REAL)((v_ - sh_${k}) * scale);
</%def>

## ---------------------------------------------------------------- layout
## Kernel coordinates, one padded array per dimension (SoA, as the 2-BS paper
## prescribes): o_k[i] = (wrap(x[offset + i, k]) - shift_k) * scale for
## i < n, 0 for n <= i < stride. With a periodic box, wrap(v) = v - L floor(v / L)
## puts v in [0, L) (computed in double where the device has it). scale is a
## power of two; shift 0 keeps the given values exactly.
<%def name="layout(orig, real, dim, periodic, wg_size)">
${common.prelude(real=real, wg_size=wg_size)}
#define D ${dim}
typedef ${orig} ORIG;
<% wide = "double" if fp64 else "float" %>
typedef ${wide} WIDE;

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void layout(__global const ORIG *x, const ulong n, const ulong stride, const ulong offset,
%for k in range(dim):
            const WIDE sh_${k},${" const WIDE L_%d," % k if periodic else ""}
%endfor
            const WIDE scale${"".join(", __global REAL *o%d" % k for k in range(dim))})
{
    const ulong i = get_global_id(0);
    if (i >= stride) return;
    const ulong src = offset + i;
%for k in range(dim):
    {
        REAL out = (REAL)0;
        if (i < n) {
${kernel_coord("x[src * D + %d]" % k, k, periodic)}
            out = kc;
        }
        o${k}[i] = out;
    }
%endfor
}
</%def>
