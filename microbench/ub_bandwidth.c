/* Bandwidth kernels with STREAM semantics: copy c=a, scale c=q*a, add c=a+b, triad c=a+q*b,
 * load-only (sum of a) and store-only (c=q). Bytes are counted as STREAM counts them (8 per
 * element read or written; write-allocate traffic is not counted).
 *
 * The three arrays are shared and split evenly over the threads (each thread first-touches and
 * then works on its own part). Loops use the widest vectors the target has, through GCC vector
 * extensions, so no compiler pattern-matching turns them into library calls. With nt=1 the
 * stores are non-temporal (x86 streaming stores; a plain store elsewhere), which is how a
 * memory-resident working set reaches the memory's bandwidth: Python sets it for working sets
 * beyond the last-level cache.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "ub.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

enum { K_COPY, K_SCALE, K_ADD, K_TRIAD, K_STORE };

static struct ub_buf buf_a, buf_b, buf_c;
static const double Q = 3.0;

static inline ub_vd vload(const double *p) { return *(const ub_vd *)p; }

static inline void vput(double *p, ub_vd v, const int nt)
{
#if defined(__AVX512F__)
    if (nt) {
        _mm512_stream_pd(p, (__m512d)v);
        return;
    }
#elif defined(__AVX__)
    if (nt) {
        _mm256_stream_pd(p, (__m256d)v);
        return;
    }
#elif defined(__SSE2__)
    if (nt) {
        _mm_stream_pd(p, (__m128d)v);
        return;
    }
#endif
    *(ub_vd *)p = v;
}

static inline void store_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

static inline __attribute__((always_inline)) ub_vd vexpr(const int kind, const double *a, const double *b, long i,
                                                          ub_vd q)
{
    switch (kind) {
    case K_COPY:
        return vload(a + i);
    case K_SCALE:
        return q * vload(a + i);
    case K_ADD:
        return vload(a + i) + vload(b + i);
    case K_TRIAD:
        return vload(a + i) + q * vload(b + i);
    default:
        return q;
    }
}

static inline __attribute__((always_inline)) double sexpr(const int kind, const double *a, const double *b, long i)
{
    switch (kind) {
    case K_COPY:
        return a[i];
    case K_SCALE:
        return Q * a[i];
    case K_ADD:
        return a[i] + b[i];
    case K_TRIAD:
        return a[i] + Q * b[i];
    default:
        return Q;
    }
}

/* One thread's passes over its part [lo, hi) of the output array. */
static inline __attribute__((always_inline)) void write_loop(const int kind, const int nt, const double *a,
                                                              const double *b, double *c, long lo, long hi,
                                                              long passes)
{
    ub_vd q;
    for (int k = 0; k < UB_VLEN; k++)
        q[k] = Q;
    for (long p = 0; p < passes; p++) {
        long i = lo;
        for (; i + 4 * UB_VLEN <= hi; i += 4 * UB_VLEN) {
            vput(c + i, vexpr(kind, a, b, i, q), nt);
            vput(c + i + UB_VLEN, vexpr(kind, a, b, i + UB_VLEN, q), nt);
            vput(c + i + 2 * UB_VLEN, vexpr(kind, a, b, i + 2 * UB_VLEN, q), nt);
            vput(c + i + 3 * UB_VLEN, vexpr(kind, a, b, i + 3 * UB_VLEN, q), nt);
        }
        for (; i < hi; i++)
            c[i] = sexpr(kind, a, b, i);
    }
    if (nt)
        store_fence();
}

static const char *check(const struct ub_config *c)
{
    if (c->n < 64L * c->threads)
        return "bandwidth kernels need at least 64 elements per thread";
    return NULL;
}

static void fill_const(struct ub_buf *b, const struct ub_config *c, int tid, double v)
{
    char *p = ub_buf_shared(b, (size_t)c->n * sizeof(double), c->threads, 1);
    if (p && b->fresh) {
        long lo, hi;
        ub_partition((long)(b->bytes / sizeof(double)), c->threads, tid, 64, &lo, &hi);
        for (long i = lo; i < hi; i++)
            ((double *)p)[i] = v;
    }
    ub_buf_shared_done(b);
}

static void prepare(const struct ub_config *c, int tid)
{
    fill_const(&buf_a, c, tid, 1.0);
    fill_const(&buf_b, c, tid, 2.0);
    fill_const(&buf_c, c, tid, 0.0);
}

#define UB_WRITER(NAME, KIND)                                                                          \
    static void run_##NAME(const struct ub_config *c, int tid, long passes, struct ub_thread_result *r) \
    {                                                                                                  \
        long lo, hi;                                                                                   \
        const double *a = (const double *)buf_a.p, *b = (const double *)buf_b.p;                       \
        double *out = (double *)buf_c.p;                                                               \
        ub_partition(c->n, c->threads, tid, 64, &lo, &hi);                                             \
        if (c->nt)                                                                                     \
            write_loop(KIND, 1, a, b, out, lo, hi, passes);                                            \
        else                                                                                           \
            write_loop(KIND, 0, a, b, out, lo, hi, passes);                                            \
        r->iterations = passes * (hi - lo);                                                            \
        r->checksum = 0;                                                                               \
    }
UB_WRITER(copy, K_COPY)
UB_WRITER(scale, K_SCALE)
UB_WRITER(add, K_ADD)
UB_WRITER(triad, K_TRIAD)
UB_WRITER(store, K_STORE)

static void run_load(const struct ub_config *c, int tid, long passes, struct ub_thread_result *r)
{
    long lo, hi;
    const double *a = (const double *)buf_a.p;
    ub_partition(c->n, c->threads, tid, 64, &lo, &hi);
    ub_vd s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
    double tail = 0;
    for (long p = 0; p < passes; p++) {
        long i = lo;
        for (; i + 8 * UB_VLEN <= hi; i += 8 * UB_VLEN) {
            s0 += vload(a + i);
            s1 += vload(a + i + UB_VLEN);
            s2 += vload(a + i + 2 * UB_VLEN);
            s3 += vload(a + i + 3 * UB_VLEN);
            s4 += vload(a + i + 4 * UB_VLEN);
            s5 += vload(a + i + 5 * UB_VLEN);
            s6 += vload(a + i + 6 * UB_VLEN);
            s7 += vload(a + i + 7 * UB_VLEN);
        }
        for (; i < hi; i++)
            tail += a[i];
    }
    ub_vd s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
    double sum = tail;
    for (int k = 0; k < UB_VLEN; k++)
        sum += s[k];
    r->checksum = sum;
    r->iterations = passes * (hi - lo);
}

/* Sum of the output array: every element must hold the kernel's value. */
static double verify_output(const struct ub_config *c)
{
    double sum = 0;
    const double *out = (const double *)buf_c.p;
    for (long i = 0; i < c->n; i++)
        sum += out[i];
    return sum;
}

static double bytes_copy(const struct ub_config *c) { return 16.0 * (double)c->n; }
static double bytes_add(const struct ub_config *c) { return 24.0 * (double)c->n; }
static double bytes_one(const struct ub_config *c) { return 8.0 * (double)c->n; }
static double flops_none(const struct ub_config *c) { (void)c; return 0; }
static double flops_one(const struct ub_config *c) { return (double)c->n; }
static double flops_two(const struct ub_config *c) { return 2.0 * (double)c->n; }

#define UB_BW_KERNEL(NAME, BYTES, FLOPS, VERIFY)                                                       \
    const struct ub_kernel ub_##NAME##_kernel = {                                                      \
        .name = #NAME,                                                                                 \
        .check = check,                                                                                \
        .prepare = prepare,                                                                            \
        .run = run_##NAME,                                                                             \
        .bytes_per_pass = BYTES,                                                                       \
        .flops_per_pass = FLOPS,                                                                       \
        .verify = VERIFY,                                                                              \
    };
UB_BW_KERNEL(copy, bytes_copy, flops_none, verify_output)
UB_BW_KERNEL(scale, bytes_copy, flops_one, verify_output)
UB_BW_KERNEL(add, bytes_add, flops_one, verify_output)
UB_BW_KERNEL(triad, bytes_add, flops_two, verify_output)
UB_BW_KERNEL(store, bytes_one, flops_none, verify_output)
UB_BW_KERNEL(load, bytes_one, flops_one, NULL)
