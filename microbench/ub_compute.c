/* Compute kernels: FP64 peak with vector FMA, scalar FP64 FMA, integer multiply-add, an integer
 * hash with a data-dependent branch per byte (int_branch), and one dependent FP64 chain per thread
 * (fp_chain, the latency-bound one: see run_chain).
 *
 * The first three run independent dependency chains (enough to cover the FMA latency on the
 * units the core has) of acc = acc * x + y, with x slightly below one so values stay near one:
 * no overflow, no denormals, and a closed form the test suite checks. The vector kernel uses FMA
 * intrinsics where the compiler says the target has them (AVX-512F, AVX2+FMA, AArch64 NEON)
 * and GCC vector extensions otherwise (the compiler fuses a*b+c where it can). The scalar and
 * integer kernels keep every chain in its own register (an empty asm per chain) so the compiler
 * cannot vectorise them: they measure the scalar pipes they are named for.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ub.h"

#if defined(__AVX512F__) || (defined(__AVX__) && defined(__FMA__))
#include <immintrin.h>
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#define UB_FMA_INNER 64 /* chain steps per pass */
#define UB_FMA_X 0.9999999
#define UB_FMA_Y 1e-7

#if defined(__AVX512F__)
typedef __m512d ub_fv;
#define UB_FV_LANES 8
#define UB_FV_ACC 16
#define UB_FV_SET1(v) _mm512_set1_pd(v)
#define UB_FV_FMA(a, x, y) _mm512_fmadd_pd(a, x, y)
#elif defined(__AVX__) && defined(__FMA__)
typedef __m256d ub_fv;
#define UB_FV_LANES 4
#define UB_FV_ACC 12
#define UB_FV_SET1(v) _mm256_set1_pd(v)
#define UB_FV_FMA(a, x, y) _mm256_fmadd_pd(a, x, y)
#elif defined(__aarch64__) && defined(__ARM_NEON)
typedef float64x2_t ub_fv;
#define UB_FV_LANES 2
#define UB_FV_ACC 16
#define UB_FV_SET1(v) vdupq_n_f64(v)
#define UB_FV_FMA(a, x, y) vfmaq_f64(y, a, x)
#else
typedef ub_vd ub_fv;
#define UB_FV_LANES UB_VLEN
#define UB_FV_ACC 8
static inline ub_fv ub_fv_set1(double v)
{
    ub_fv r;
    for (int k = 0; k < UB_VLEN; k++)
        r[k] = v;
    return r;
}
#define UB_FV_SET1(v) ub_fv_set1(v)
#define UB_FV_FMA(a, x, y) ((a) * (x) + (y))
#endif

/* Keep a scalar in its own register so the compiler cannot pack chains into vectors. */
#if defined(__x86_64__) && defined(__SSE2__)
#define UB_KEEP_F(v) __asm__ volatile("" : "+x"(v))
#elif defined(__aarch64__)
#define UB_KEEP_F(v) __asm__ volatile("" : "+w"(v))
#else
#define UB_KEEP_F(v) ((void)0)
#endif
#if defined(__GNUC__)
#define UB_KEEP_I(v) __asm__ volatile("" : "+r"(v))
#else
#define UB_KEEP_I(v) ((void)0)
#endif

#if defined(FP_FAST_FMA)
#define UB_SFMA(a, x, y) fma(a, x, y)
#else
#define UB_SFMA(a, x, y) ((a) * (x) + (y))
#endif

static const char *check_none(const struct ub_config *c)
{
    (void)c;
    return NULL;
}

static void prepare_none(const struct ub_config *c, int tid)
{
    (void)c;
    (void)tid;
}

/* Initial value of accumulator k (in lanes order): 0.5 + k/1024. */
static double acc0(int k) { return 0.5 + k / 1024.0; }

static void run_peak(const struct ub_config *c, int tid, long passes, struct ub_thread_result *r)
{
    (void)c;
    (void)tid;
    ub_fv acc[UB_FV_ACC];
    double init[UB_FV_LANES];
    for (int k = 0; k < UB_FV_ACC; k++) {
        for (int l = 0; l < UB_FV_LANES; l++)
            init[l] = acc0(k * UB_FV_LANES + l);
        memcpy(&acc[k], init, sizeof init);
    }
    const ub_fv x = UB_FV_SET1(UB_FMA_X), y = UB_FV_SET1(UB_FMA_Y);
    for (long p = 0; p < passes; p++)
        for (int j = 0; j < UB_FMA_INNER; j++) {
#pragma GCC unroll 16
            for (int k = 0; k < UB_FV_ACC; k++)
                acc[k] = UB_FV_FMA(acc[k], x, y);
        }
    double sum = 0;
    for (int k = 0; k < UB_FV_ACC; k++) {
        double lanes[UB_FV_LANES];
        memcpy(lanes, &acc[k], sizeof lanes);
        for (int l = 0; l < UB_FV_LANES; l++)
            sum += lanes[l];
    }
    r->checksum = sum;
    r->iterations = passes * UB_FMA_INNER;
}

static double flops_peak(const struct ub_config *c) { return 2.0 * UB_FMA_INNER * UB_FV_ACC * UB_FV_LANES * c->threads; }

#define UB_SCALAR_ACC 8

static void run_scalar(const struct ub_config *c, int tid, long passes, struct ub_thread_result *r)
{
    (void)c;
    (void)tid;
    double a0 = acc0(0), a1 = acc0(1), a2 = acc0(2), a3 = acc0(3), a4 = acc0(4), a5 = acc0(5), a6 = acc0(6),
           a7 = acc0(7);
    const double x = UB_FMA_X, y = UB_FMA_Y;
    for (long p = 0; p < passes; p++)
        for (int j = 0; j < UB_FMA_INNER; j++) {
            a0 = UB_SFMA(a0, x, y);
            a1 = UB_SFMA(a1, x, y);
            a2 = UB_SFMA(a2, x, y);
            a3 = UB_SFMA(a3, x, y);
            a4 = UB_SFMA(a4, x, y);
            a5 = UB_SFMA(a5, x, y);
            a6 = UB_SFMA(a6, x, y);
            a7 = UB_SFMA(a7, x, y);
            UB_KEEP_F(a0);
            UB_KEEP_F(a1);
            UB_KEEP_F(a2);
            UB_KEEP_F(a3);
            UB_KEEP_F(a4);
            UB_KEEP_F(a5);
            UB_KEEP_F(a6);
            UB_KEEP_F(a7);
        }
    r->checksum = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    r->iterations = passes * UB_FMA_INNER;
}

static double flops_scalar(const struct ub_config *c) { return 2.0 * UB_FMA_INNER * UB_SCALAR_ACC * c->threads; }

/* Integer: 64-bit LCG steps x = x * M + A (mod 2^64) on 8 chains; 2 operations per step. The
 * checksum is the chains' sum (mod 2^64) scaled to [0, 1). */
#define UB_LCG_M 6364136223846793005ull
#define UB_LCG_A 1442695040888963407ull

static void run_int(const struct ub_config *c, int tid, long passes, struct ub_thread_result *r)
{
    (void)c;
    (void)tid;
    uint64_t x0 = 1, x1 = 2, x2 = 3, x3 = 4, x4 = 5, x5 = 6, x6 = 7, x7 = 8;
    for (long p = 0; p < passes; p++)
        for (int j = 0; j < UB_FMA_INNER; j++) {
            x0 = x0 * UB_LCG_M + UB_LCG_A;
            x1 = x1 * UB_LCG_M + UB_LCG_A;
            x2 = x2 * UB_LCG_M + UB_LCG_A;
            x3 = x3 * UB_LCG_M + UB_LCG_A;
            x4 = x4 * UB_LCG_M + UB_LCG_A;
            x5 = x5 * UB_LCG_M + UB_LCG_A;
            x6 = x6 * UB_LCG_M + UB_LCG_A;
            x7 = x7 * UB_LCG_M + UB_LCG_A;
            UB_KEEP_I(x0);
            UB_KEEP_I(x1);
            UB_KEEP_I(x2);
            UB_KEEP_I(x3);
            UB_KEEP_I(x4);
            UB_KEEP_I(x5);
            UB_KEEP_I(x6);
            UB_KEEP_I(x7);
        }
    r->checksum = (double)(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7) / 18446744073709551616.0;
    r->iterations = passes * UB_FMA_INNER;
}

static double ops_int(const struct ub_config *c) { return 2.0 * UB_FMA_INNER * 8 * c->threads; }

/* Latency-bound FP64: ONE chain per thread, a = (a * x + y) / d, an FMA and a divide that each wait
 * for the one before, as random-number and transcendental code does (NPB EP's randlc, log, sqrt).
 * The other kernels keep enough chains in flight to fill the core's FP pipes, so a core's second
 * hardware thread adds little to them (1.09-1.25x on a 16-vCPU host); here one thread leaves the
 * pipes idle for most of each step's latency, and a second one on the same core doubles the core's
 * rate, as it doubled EP's (docs/validation.md, "NPB EP.A, traced on val-16c"). A single chain
 * cannot be vectorised or reordered, and without -ffast-math the compiler may not turn the divide
 * into a multiply (1/d is inexact). The recurrence is affine: a_n = f + r^n (a_0 - f) with
 * r = x / d and f = y / (d - x) = 1, so a climbs from 0.5 towards 1 (no overflow, no denormals) and
 * the test suite checks the closed form. 3 flops per step (the FMA's 2 and the divide). */
#define UB_CHAIN_Y 2e-7
#define UB_CHAIN_D 1.0000001

static void run_chain(const struct ub_config *c, int tid, long passes, struct ub_thread_result *r)
{
    (void)c;
    (void)tid;
    double a = acc0(0);
    for (long p = 0; p < passes; p++)
        for (int j = 0; j < UB_FMA_INNER; j++) {
            a = UB_SFMA(a, UB_FMA_X, UB_CHAIN_Y) / UB_CHAIN_D;
            UB_KEEP_F(a);
        }
    r->checksum = a;
    r->iterations = passes * UB_FMA_INNER;
}

static double flops_chain(const struct ub_config *c) { return 3.0 * UB_FMA_INNER * c->threads; }

/* Integer and branches, the kind of work parsers and compressors do: FNV-1a style hashing of a
 * 2 KiB table of pseudo-random bytes (L1-resident: one byte load per step), where each byte's low
 * bit picks one of two updates. The bit is random, so about half of those branches mispredict: the
 * front end, not the FP units or memory, bounds it. The compiler may turn the two-way update into a
 * conditional move; the empty asm on the taken path keeps it a branch. Table: xorshift64 bytes from
 * UB_BR_SEED; checksum: the hash scaled to [0, 1). */
#define UB_BR_BYTES 2048
#define UB_BR_SEED 88172645463325252ull
#define UB_FNV_PRIME 1099511628211ull
#define UB_FNV_BASIS 14695981039346656037ull

static void run_branch(const struct ub_config *c, int tid, long passes, struct ub_thread_result *r)
{
    (void)c;
    (void)tid;
    unsigned char table[UB_BR_BYTES];
    uint64_t x = UB_BR_SEED;
    for (int i = 0; i < UB_BR_BYTES; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        table[i] = (unsigned char)(x >> 32);
    }
    uint64_t h = UB_FNV_BASIS;
    for (long p = 0; p < passes; p++)
        for (int i = 0; i < UB_BR_BYTES; i++) {
            uint64_t b = table[i];
            if (b & 1) {
                h = (h ^ b) * UB_FNV_PRIME;
                UB_KEEP_I(h);
            } else {
                h = (h + (b << 3)) ^ (h >> 29);
            }
        }
    r->checksum = (double)h / 18446744073709551616.0;
    r->iterations = passes * UB_BR_BYTES;
}

static double ops_branch(const struct ub_config *c) { return (double)UB_BR_BYTES * c->threads; }

static double bytes_none(const struct ub_config *c)
{
    (void)c;
    return 0;
}

#define UB_COMPUTE_KERNEL(VAR, NAME, RUN, FLOPS)                                                       \
    const struct ub_kernel VAR = {                                                                     \
        .name = NAME,                                                                                  \
        .check = check_none,                                                                           \
        .prepare = prepare_none,                                                                       \
        .run = RUN,                                                                                    \
        .bytes_per_pass = bytes_none,                                                                  \
        .flops_per_pass = FLOPS,                                                                       \
        .verify = NULL,                                                                                \
    };
UB_COMPUTE_KERNEL(ub_peak_fma_kernel, "peak_fma", run_peak, flops_peak)
UB_COMPUTE_KERNEL(ub_scalar_fp64_kernel, "scalar_fp64", run_scalar, flops_scalar)
UB_COMPUTE_KERNEL(ub_int_kernel, "int_ops", run_int, ops_int)
UB_COMPUTE_KERNEL(ub_int_branch_kernel, "int_branch", run_branch, ops_branch)
UB_COMPUTE_KERNEL(ub_fp_chain_kernel, "fp_chain", run_chain, flops_chain)

/* What the vector FMA kernel compiled to, for provenance. */
const char *ub_fma_kind(void)
{
#if defined(__AVX512F__)
    return "avx512f";
#elif defined(__AVX__) && defined(__FMA__)
    return "avx2-fma";
#elif defined(__aarch64__) && defined(__ARM_NEON)
    return "neon";
#else
    return "generic";
#endif
}

int ub_fma_lanes(void) { return UB_FV_LANES; }
int ub_fma_chains(void) { return UB_FV_ACC; }
