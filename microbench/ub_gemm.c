/* gemm: a register- and cache-blocked FP64 matrix product, the reference for compute-bound matrix
 * code whose data lies anywhere from the caches to memory (what blocked BLAS and LAPACK routines,
 * numpy's matmul among them, spend their time in).
 *
 * One pass is one rank-K update C[N x N] += A[N x K] * B[K x N] with K = UB_GEMM_K = 64: 2*N*N*K
 * flops for 16*N*N bytes of C read and written, 8 flops per byte of C traffic, so the update stays
 * compute-bound when C is in memory: a core running two AVX-512 FMAs a cycle (32 flops) needs 4
 * bytes a cycle of C, less than one core draws from memory on current servers (this VM's core: 5.4
 * GB/s of C at 43 GFLOP/s, where its triad streams 21 GB/s). N is the driver's `n` (a multiple of
 * UB_GEMM_ALIGN).
 *
 * Register blocking: a micro-kernel (tile) keeps a UB_GEMM_MR x UB_GEMM_NV tile of C in vector
 * registers (UB_VLEN doubles each: the widest vectors the target has, through GCC vector
 * extensions, which GCC contracts to FMAs) for the K steps of the update; each step loads
 * UB_GEMM_NV vectors of B and broadcasts UB_GEMM_MR elements of A, MR * NV FMAs: 16 FMAs per 8
 * loads with AVX-512 or AArch64 (32 vector registers: a 4 x 4 tile), 8 per 6 otherwise (16
 * registers: 4 x 2). Cache blocking: B is stored packed, as a blocked BLAS packs it, in panels of
 * UB_GEMM_NB columns (K x NB contiguous, 128 KiB: one panel stays in any L2 while a thread walks
 * its rows of C under it); the MR rows of A a tile reads (2 KiB) stay in L1 across a panel.
 * Packing once, at preparation, leaves the copy out of the timed passes (a BLAS call pays it once
 * per call, a small share of a large product), and makes a panel contiguous: with B's natural
 * row stride of N doubles, a power-of-two N would map a panel's 64 rows onto a few L2 sets.
 *
 * Threads split C's rows (and A's, the same rows): each thread first-touches its own rows of both
 * at preparation and updates only them, as the bandwidth kernels split their arrays; B is shared,
 * read-only and read by every thread (each thread fills some of its panels). C is reset to zero at
 * every preparation.
 *
 * Values are exact: A[i][k] = (i + 2k mod 5) / 4 and B[k][j] = (3k + j mod 7) - 2, so every product
 * is a multiple of 1/4 of magnitude at most 4 and a pass adds at most 256 to an element of C: after
 * p passes since preparation C = p * (A * B) exactly, with no overflow nor rounding for far more
 * than 2^40 passes. verify() returns the sum of C[i][j] * (1 + (i + 2j mod 8)), which the tests
 * recompute from that closed form (a tile written to the wrong place changes it).
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "ub.h"

#define UB_GEMM_K 64      /* the update's rank */
#define UB_GEMM_MR 4      /* rows of a register tile */
#if defined(__AVX512F__) || defined(__aarch64__)
#define UB_GEMM_NV 4      /* vectors per tile row: 16 accumulators of 32 registers */
#else
#define UB_GEMM_NV 2      /* 8 accumulators of 16 registers */
#endif
#define UB_GEMM_NR (UB_GEMM_NV * UB_VLEN) /* columns of a register tile */
#define UB_GEMM_NB 256    /* columns of a packed panel of B */
#define UB_GEMM_ALIGN 64  /* N's granularity: a multiple of every UB_GEMM_NR */

/* Hold a vector of B in its register for the MR FMAs that use it: otherwise GCC folds its load into
 * each of them (x86 FMAs take a memory operand), MR loads of it a step instead of one, which
 * makes the tile load-bound where a core issues two FMAs per load, and not a register tile. */
#if defined(__x86_64__) && defined(__SSE2__)
#define UB_GEMM_HOLD(v) __asm__("" : "+v"(v))
#elif defined(__aarch64__)
#define UB_GEMM_HOLD(v) __asm__("" : "+w"(v))
#else
#define UB_GEMM_HOLD(v) ((void)0)
#endif

static struct ub_buf buf_a, buf_b, buf_c;

static inline double a_value(long i, long k) { return 0.25 * (double)((i + 2 * k) % 5); }

static inline double b_value(long k, long j) { return (double)((3 * k + j) % 7) - 2.0; }

static long panel_width(long n, long jb) { return n - jb < UB_GEMM_NB ? n - jb : UB_GEMM_NB; }

static const char *check(const struct ub_config *c)
{
    if (c->n < UB_GEMM_ALIGN || c->n % UB_GEMM_ALIGN)
        return "gemm needs n (the matrix side) a positive multiple of 64";
    return NULL;
}

/* Thread tid's shared buffer `b` of `bytes`: its part is [lo, hi) of `items`, filled by `fill`
 * when the buffer is new (always when `reset`). */
static char *share(struct ub_buf *b, size_t bytes, const struct ub_config *c, int tid, int reset,
                   void (*fill)(double *, long, long, long), long items, long align)
{
    char *p = ub_buf_shared(b, bytes, c->threads, 1);
    if (p && (b->fresh || reset)) {
        long lo, hi;
        ub_partition(items, c->threads, tid, align, &lo, &hi);
        fill((double *)p, c->n, lo, hi);
    }
    ub_buf_shared_done(b);
    return p;
}

static void fill_a(double *a, long n, long lo, long hi)
{
    (void)n;
    for (long i = lo; i < hi; i++)
        for (long k = 0; k < UB_GEMM_K; k++)
            a[i * UB_GEMM_K + k] = a_value(i, k);
}

/* Panels [lo, hi) of B, packed: panel jb/NB holds columns jb.. of width w, row k at jb*K + k*w. */
static void fill_b(double *b, long n, long lo, long hi)
{
    for (long jb = lo * UB_GEMM_NB; jb < hi * UB_GEMM_NB; jb += UB_GEMM_NB) {
        long w = panel_width(n, jb);
        for (long k = 0; k < UB_GEMM_K; k++)
            for (long j = 0; j < w; j++)
                b[jb * UB_GEMM_K + k * w + j] = b_value(k, jb + j);
    }
}

static void zero_c(double *c, long n, long lo, long hi)
{
    for (long i = lo * n; i < hi * n; i++)
        c[i] = 0;
}

static void prepare(const struct ub_config *c, int tid)
{
    const long n = c->n, panels = (n + UB_GEMM_NB - 1) / UB_GEMM_NB;
    const size_t side = (size_t)n * sizeof(double);
    share(&buf_a, side * UB_GEMM_K, c, tid, 0, fill_a, n, UB_GEMM_MR);
    share(&buf_b, side * UB_GEMM_K, c, tid, 0, fill_b, panels, 1);
    share(&buf_c, side * (size_t)n, c, tid, 1, zero_c, n, UB_GEMM_MR);
}

/* The register tile: c[0..MR) x [0..NR) (row stride ldc) += a[0..MR) x [0..K) (row stride K) *
 * b[0..K) x [0..NR) (row stride ldb). */
static inline __attribute__((always_inline)) void tile(const double *restrict a, const double *restrict b, long ldb,
                                                        double *restrict c, long ldc)
{
    ub_vd acc[UB_GEMM_MR][UB_GEMM_NV];
#pragma GCC unroll 4
    for (int r = 0; r < UB_GEMM_MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < UB_GEMM_NV; v++)
            acc[r][v] = *(const ub_vd *)(c + r * ldc + v * UB_VLEN);
    for (int k = 0; k < UB_GEMM_K; k++) {
        ub_vd bk[UB_GEMM_NV];
#pragma GCC unroll 4
        for (int v = 0; v < UB_GEMM_NV; v++) {
            bk[v] = *(const ub_vd *)(b + k * ldb + v * UB_VLEN);
            UB_GEMM_HOLD(bk[v]);
        }
#pragma GCC unroll 4
        for (int r = 0; r < UB_GEMM_MR; r++)
#pragma GCC unroll 4
            for (int v = 0; v < UB_GEMM_NV; v++)
                acc[r][v] += a[r * UB_GEMM_K + k] * bk[v];
    }
#pragma GCC unroll 4
    for (int r = 0; r < UB_GEMM_MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < UB_GEMM_NV; v++)
            *(ub_vd *)(c + r * ldc + v * UB_VLEN) = acc[r][v];
}

/* Ask for the C tile at c (row stride ldc), to be read and written: the tiles of a panel are rows of
 * NR columns N doubles apart, which the hardware prefetchers did not follow from one row block to
 * the next; asked for a tile ahead, C from memory ran 20% faster on one core of this VM (36 to 43
 * GFLOP/s), 40% on two (65 to 90), with no change in the caches. */
static inline void prefetch_tile(const double *c, long ldc)
{
    for (int r = 0; r < UB_GEMM_MR; r++)
        for (int j = 0; j < UB_GEMM_NR; j += 64 / (int)sizeof(double))
            __builtin_prefetch(c + r * ldc + j, 1, 3);
}

/* One pass over rows [lo, hi) of C: panel by panel of B, so that a panel is read from L2 by every
 * row tile under it; within a panel, tile by tile along MR rows, which reuse their rows of A, each
 * tile asking for the one below it. */
static void update(const double *a, const double *b, double *c, long n, long lo, long hi)
{
    for (long jb = 0; jb < n; jb += UB_GEMM_NB) {
        const long w = panel_width(n, jb);
        const double *panel = b + jb * UB_GEMM_K;
        for (long i = lo; i < hi; i += UB_GEMM_MR)
            for (long j = 0; j < w; j += UB_GEMM_NR) {
                if (i + UB_GEMM_MR < hi)
                    prefetch_tile(c + (i + UB_GEMM_MR) * n + jb + j, n);
                tile(a + i * UB_GEMM_K, panel + j, w, c + i * n + jb + j, n);
            }
    }
}

static void run(const struct ub_config *c, int tid, long passes, struct ub_thread_result *r)
{
    long lo, hi;
    ub_partition(c->n, c->threads, tid, UB_GEMM_MR, &lo, &hi);
    if (buf_a.p && buf_b.p && buf_c.p)     /* else preparing failed (ub_fail) */
        for (long p = 0; p < passes; p++)
            update((const double *)buf_a.p, (const double *)buf_b.p, (double *)buf_c.p, c->n, lo, hi);
    r->iterations = passes * (hi - lo) * c->n * UB_GEMM_K;   /* the thread's multiply-adds */
    r->checksum = 0;
}

/* The weighted sum of C (see the header comment). */
static double verify(const struct ub_config *c)
{
    const long n = c->n;
    const double *cc = (const double *)buf_c.p;
    double sum = 0;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++)
            sum += cc[i * n + j] * (double)(1 + (i + 2 * j) % 8);
    return sum;
}

/* C read and written, A and B read once (a thread re-reads its rows of A once per panel, from the
 * caches: not counted, as STREAM counts no write-allocate traffic). */
static double bytes_per_pass(const struct ub_config *c) { return 16.0 * (double)c->n * (double)(c->n + UB_GEMM_K); }

static double flops_per_pass(const struct ub_config *c) { return 2.0 * (double)c->n * (double)c->n * UB_GEMM_K; }

const struct ub_kernel ub_gemm_kernel = {
    .name = "gemm",
    .check = check,
    .prepare = prepare,
    .run = run,
    .bytes_per_pass = bytes_per_pass,
    .flops_per_pass = flops_per_pass,
    .verify = verify,
};
