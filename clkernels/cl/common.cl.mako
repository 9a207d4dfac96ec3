## Portable primitives every family's kernels use.
##
## A family template starts each kernel def with
##     <%namespace name="common" file="common.cl.mako"/>
##     ${common.prelude(real=real, wg_size=wg_size)}
## and every kernel that calls a sub-group primitive declares SG_DECL; at its
## top (the local-memory scratch of the `local` back end; one word otherwise).
##
## Render-time facts (from host/core/device.py, overridable per build):
##   sg_backend   'khr' | 'nv' | 'local'
##   sg_ballot    cl_khr_subgroup_ballot present (khr only)
##   sg_extension cl_khr_subgroups present (else the OpenCL C 3.0 feature: no pragma)
##   int64_atomics, int64_extended_atomics, fp64
##
## Sub-group contract (all back ends): 1-D work-groups; wg_size a multiple of
## SG_SIZE; every work-item of the work-group calls a primitive together
## (uniform control flow: the `local` back end uses work-group barriers).
## Values are 32-bit (uint/int/float) unless the name says 64 (ulong/double).
## sg_ballot returns the bits of lanes 0..31 (all lanes where SG_SIZE <= 32,
## always so on `nv` and `local`; `khr` devices may have wider sub-groups).

<%def name="prelude(real='float', wg_size=256)">
<%
    if real not in ('float', 'double'):
        raise ValueError("real must be 'float' or 'double', got %r" % (real,))
    if sg_backend not in ('khr', 'nv', 'local'):
        raise ValueError("unknown sub-group back end %r" % (sg_backend,))
    if sg_backend == 'nv':
        sg = 32
    elif sg_backend == 'local':
        sg = min(32, wg_size)
    else:
        sg = None
    if sg is not None and wg_size % sg:
        raise ValueError("wg_size %d is not a multiple of the sub-group size %d" % (wg_size, sg))
%>
// ---- clkernels common prelude: real=${real} wg_size=${wg_size} sg_backend=${sg_backend}
%if fp64:
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
%endif
%if int64_atomics:
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
%endif
%if int64_extended_atomics:
#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable
%endif
%if sg_backend == 'khr':
%if sg_extension:
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
%endif
#pragma OPENCL EXTENSION cl_khr_subgroup_shuffle : enable
%if sg_ballot:
#pragma OPENCL EXTENSION cl_khr_subgroup_ballot : enable
%endif
%endif

// rare paths (the exact decisions) stay out of line: inlined at every unrolled call
// site they multiply the code and NVIDIA's compile time (clang-based compilers and
// NVIDIA's honour the attribute)
#define NOINLINE __attribute__((noinline))

typedef ${real} REAL;
typedef ${real}2 REAL2;
typedef ${real}4 REAL4;
#define WG_SIZE ${wg_size}

%if ptx:
// The float square root without the subnormal scaling NVIDIA's compiler wraps
// around sqrt.approx.f32 (a compare and two multiplies): subnormal inputs give 0
// (the exact bands allow for it: host/outputs/exact.py); Device.fast_sqrt.
inline float clk_sqrt_ftz(float x) { float r; asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
%endif

// Vector loads from SoA arrays; i counts vectors, p must be 2/4-element aligned
// (device buffers are; offsets the host passes keep it).
inline REAL2 load_real2(__global const REAL *p, size_t i) { return ((__global const REAL2 *)p)[i]; }
inline REAL4 load_real4(__global const REAL *p, size_t i) { return ((__global const REAL4 *)p)[i]; }

// ---------------------------------------------------------------- sub-groups
%if sg_backend == 'local':
#define SG_SIZE ${sg}
#define SG_DECL __local uint sg_mem[WG_SIZE]
inline uint sg_lane(void) { return (uint)get_local_id(0) & (SG_SIZE - 1); }
inline uint sg_id(void) { return (uint)get_local_id(0) / SG_SIZE; }
inline uint sg_size(void) { return SG_SIZE; }
inline uint sg_shuffle(__local uint *sg_mem, uint v, uint lane) {
    uint lid = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    sg_mem[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    return sg_mem[(lid & ~(uint)(SG_SIZE - 1)) | (lane & (SG_SIZE - 1))];
}
inline uint sg_shuffle_xor(__local uint *sg_mem, uint v, uint mask) {
    return sg_shuffle(sg_mem, v, sg_lane() ^ mask);
}
inline uint sg_ballot(__local uint *sg_mem, int pred) {
    uint lid = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    sg_mem[lid] = pred ? 1u : 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint base = lid & ~(uint)(SG_SIZE - 1), bits = 0;
    for (uint k = 0; k < SG_SIZE; ++k) bits |= sg_mem[base + k] << k;
    return bits;
}
%elif sg_backend == 'nv':
#define SG_SIZE 32
#define SG_DECL __local uint sg_mem[1]
inline uint sg_lane(void) { uint r; asm volatile("mov.u32 %0, %%laneid;" : "=r"(r)); return r; }
inline uint sg_id(void) { return (uint)get_local_id(0) / 32u; }
inline uint sg_size(void) { return 32u; }
inline uint sg_shuffle(__local uint *sg_mem, uint v, uint lane) {
    uint r;
    asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(lane));
    return r;
}
inline uint sg_shuffle_xor(__local uint *sg_mem, uint v, uint mask) {
    uint r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(mask));
    return r;
}
inline uint sg_ballot(__local uint *sg_mem, int pred) {
    uint r;
    asm volatile("{ .reg .pred p; setp.ne.s32 p, %1, 0; vote.sync.ballot.b32 %0, p, 0xffffffff; }"
                 : "=r"(r) : "r"(pred));
    return r;
}
%else:
// cl_khr_subgroups: the sub-group size is the device's, known at run time.
#define SG_SIZE get_max_sub_group_size()
#define SG_DECL __local uint sg_mem[1]
inline uint sg_lane(void) { return get_sub_group_local_id(); }
inline uint sg_id(void) { return get_sub_group_id(); }
inline uint sg_size(void) { return get_sub_group_size(); }
inline uint sg_shuffle(__local uint *sg_mem, uint v, uint lane) { return sub_group_shuffle(v, lane); }
inline uint sg_shuffle_xor(__local uint *sg_mem, uint v, uint mask) { return sub_group_shuffle_xor(v, mask); }
inline uint sg_ballot(__local uint *sg_mem, int pred) {
%if sg_ballot:
    return sub_group_ballot(pred).x;
%else:
    uint lane = get_sub_group_local_id();
    return sub_group_reduce_add(pred && lane < 32u ? (1u << lane) : 0u);
%endif
}
%endif
#define SG_HAS_BALLOT 1

// Typed forms built on the 32-bit shuffles (identical on every back end).
inline int sg_shuffle_i(__local uint *sg_mem, int v, uint lane) { return as_int(sg_shuffle(sg_mem, as_uint(v), lane)); }
inline float sg_shuffle_f(__local uint *sg_mem, float v, uint lane) { return as_float(sg_shuffle(sg_mem, as_uint(v), lane)); }
inline int sg_shuffle_xor_i(__local uint *sg_mem, int v, uint m) { return as_int(sg_shuffle_xor(sg_mem, as_uint(v), m)); }
inline float sg_shuffle_xor_f(__local uint *sg_mem, float v, uint m) { return as_float(sg_shuffle_xor(sg_mem, as_uint(v), m)); }
inline ulong sg_shuffle_ul(__local uint *sg_mem, ulong v, uint lane) {
    uint lo = sg_shuffle(sg_mem, (uint)v, lane);
    uint hi = sg_shuffle(sg_mem, (uint)(v >> 32), lane);
    return ((ulong)hi << 32) | lo;
}
inline ulong sg_shuffle_xor_ul(__local uint *sg_mem, ulong v, uint m) {
    uint lo = sg_shuffle_xor(sg_mem, (uint)v, m);
    uint hi = sg_shuffle_xor(sg_mem, (uint)(v >> 32), m);
    return ((ulong)hi << 32) | lo;
}
inline uint sg_broadcast(__local uint *sg_mem, uint v, uint lane) { return sg_shuffle(sg_mem, v, lane); }
inline float sg_broadcast_f(__local uint *sg_mem, float v, uint lane) { return sg_shuffle_f(sg_mem, v, lane); }
%if fp64:
inline double sg_shuffle_d(__local uint *sg_mem, double v, uint lane) { return as_double(sg_shuffle_ul(sg_mem, as_ulong(v), lane)); }
inline double sg_shuffle_xor_d(__local uint *sg_mem, double v, uint m) { return as_double(sg_shuffle_xor_ul(sg_mem, as_ulong(v), m)); }
%endif

// Butterfly reductions: every lane gets the sub-group's total. The khr back
// end has its own sizes at run time, so the loop bound is sg_size().
<%
    red_types = [('', 'uint', 'sg_shuffle_xor'), ('_i', 'int', 'sg_shuffle_xor_i'),
                 ('_f', 'float', 'sg_shuffle_xor_f'), ('_ul', 'ulong', 'sg_shuffle_xor_ul')]
    if fp64:
        red_types.append(('_d', 'double', 'sg_shuffle_xor_d'))
%>
%for sfx, t, shf in red_types:
inline ${t} sg_reduce_add${sfx}(__local uint *sg_mem, ${t} v) {
%if sg_backend == 'local' or sg_backend == 'nv':
    #pragma unroll
    for (uint m = SG_SIZE / 2; m > 0; m >>= 1) v += ${shf}(sg_mem, v, m);
%else:
    for (uint m = sg_size() / 2; m > 0; m >>= 1) v += ${shf}(sg_mem, v, m);
%endif
    return v;
}
%endfor
inline uint sg_reduce_max(__local uint *sg_mem, uint v) {
    for (uint m = sg_size() / 2; m > 0; m >>= 1) v = max(v, sg_shuffle_xor(sg_mem, v, m));
    return v;
}
// Inclusive prefix sum in the sub-group: lane k gets the sum of lanes 0..k.
inline uint sg_scan_add(__local uint *sg_mem, uint v) {
    const uint lane = sg_lane();
    for (uint d = 1; d < sg_size(); d <<= 1) {
        const uint t = sg_shuffle(sg_mem, v, lane >= d ? lane - d : lane);
        if (lane >= d) v += t;
    }
    return v;
}

// ------------------------------------------------------------------- atomics
// 32-bit: core OpenCL 1.1 atomics on local and global memory.
inline uint atomic_add_u32_g(volatile __global uint *p, uint v) { return atomic_add(p, v); }
inline uint atomic_add_u32_l(volatile __local uint *p, uint v) { return atomic_add(p, v); }
inline uint atomic_inc_u32_g(volatile __global uint *p) { return atomic_inc(p); }
inline uint atomic_inc_u32_l(volatile __local uint *p) { return atomic_inc(p); }
inline uint atomic_max_u32_g(volatile __global uint *p, uint v) { return atomic_max(p, v); }
inline uint atomic_max_u32_l(volatile __local uint *p, uint v) { return atomic_max(p, v); }

// 64-bit add (no return value: the two-word fallback has no atomic old value;
// the final total is exact either way).
%for sp, spc in (('g', '__global'), ('l', '__local')):
inline void atomic_add_u64_${sp}(volatile ${spc} ulong *p, ulong v) {
%if int64_atomics:
    atom_add(p, v);
%else:
    volatile ${spc} uint *w = (volatile ${spc} uint *)p;   // little-endian: w[0] low
    uint lo = (uint)v, hi = (uint)(v >> 32);
    uint old = atomic_add(w, lo);
    hi += (uint)(old + lo < old);                           // carry out of the low word
    if (hi) atomic_add(w + 1, hi);
%endif
}
%if int64_extended_atomics:
inline ulong atomic_max_u64_${sp}(volatile ${spc} ulong *p, ulong v) { return atom_max(p, v); }
%endif
%endfor

// Float accumulation through compare-and-swap.
%for sp, spc in (('g', '__global'), ('l', '__local')):
inline void atomic_add_f32_${sp}(volatile ${spc} float *p, float v) {
    volatile ${spc} uint *q = (volatile ${spc} uint *)p;
    uint old = *q, assumed;
    do {
        assumed = old;
        old = atomic_cmpxchg(q, assumed, as_uint(as_float(assumed) + v));
    } while (old != assumed);
}
%endfor
// ---- end of prelude
</%def>

## A trivial kernel used to read the device's preferred work-group multiple.
<%def name="probe()">
${prelude(real='float', wg_size=32)}
__kernel void clk_probe(__global uint *out) { out[get_global_id(0)] = (uint)get_local_id(0); }
</%def>

## Measures native_sqrt against the correctly rounded square root (in double):
## every mantissa of the binades [1, 2) and [2, 4) (both exponent parities;
## hardware square roots scale by the exponent), the largest error in units
## of the last place (ulp) times 16, as an integer, into err[0] (atomic max).
<%def name="sqrt_probe(sqrt_fn='native_sqrt')">
${prelude(real='double', wg_size=64)}
__kernel void clk_sqrt_probe(volatile __global uint *err)
{
    const uint i = get_global_id(0);                    // 0 .. 2^24 - 1
    const float x = as_float(0x3F800000u + i);          // [1, 4): exponents 0 and 1
    const float y = ${sqrt_fn}(x);
    const double exact = sqrt((double)x);
    const float r = (float)exact;                        // nearest float
    const double ulp = (double)(nextafter(r, INFINITY) - r);
    const double e = fabs((double)y - exact) / ulp;
    atomic_max(err, (uint)(e * 16.0 + 0.999));
}
</%def>

## Set nwords 32-bit words to value (host/core/transfer.fill_words): a kernel,
## not clEnqueueFillBuffer. Oclgrind (21.10) reads a driver fill as uninitialised
## and, once a buffer has had one, no later kernel store marks it initialised.
<%def name="word_fill()">
${prelude(real='float', wg_size=64)}
__kernel void clk_fill(__global uint *p, const ulong nwords, const uint value)
{
    for (ulong i = get_global_id(0); i < nwords; i += get_global_size(0)) p[i] = value;
}
</%def>


## rint(d / L) in double -- the image count of numpy's minimum image d - L * rint(d / L) --
## without the division where it is plain (a double division is a ~40-instruction
## subroutine on GPUs). q = d * iL (iL = 1 / L rounded) is within 2^-51.4 |q| of the
## correctly rounded d / L (2^-50.4 |q| where 1 / L is subnormal), so both round to
## the same integer unless a half-integer lies within that distance of q: only there
## within 2^-48 |q| (and for NaN, inf or huge q, where the test fails or the threshold
## exceeds 1/2) is the division taken.
<%def name="image_count()">
inline double clk_image_count(const double d, const double L, const double iL)
{
    const double q = d * iL;
    const double k = rint(q);
    if (!(fabs(fabs(q - k) - 0.5) > fabs(q) * 0x1p-48 + 0x1p-1020)) return rint(d / L);
    return k;
}
</%def>
