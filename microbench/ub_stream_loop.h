/* The thesis kernel loop, written once and instantiated per element type by ub_stream.c:
 *   #define UB_T double / #define UB_SUF f64 / #include "ub_stream_loop.h"
 *
 * Corredor (2011), Table 3.6: a read-reduce over one or two streams unrolled by four, the
 * accumulator chained as in `v += a[i]; v += a[i+1]; ...`. One iteration reads one element of
 * every stream. A pass makes `iters` iterations; the shorter of two streams wraps around its own
 * region. Sequential streams start pass p at element p mod (stride/elem), so successive passes
 * walk neighbouring columns of the region (a column walk, as in a matrix product) and a sweep of
 * passes touches all of it. Random streams jump 1..2*stride/elem-1 elements (mean: the stride).
 *
 * A pass runs in segments during which no sequential stream wraps, so the inner loop is the
 * thesis's plain strided loop (one add per index, no test): the time per iteration is that of
 * the memory access and the accumulator chain, not of index bookkeeping. Every argument but the
 * pointers and counts is a compile-time constant at each call site, so the compiler emits one
 * specialised loop per combination.
 */
#define UB_CAT_(a, b) a##b
#define UB_CAT(a, b) UB_CAT_(a, b)

/* Advance stream cursor I: sequential streams never wrap inside a segment. */
#define UB_ADV(I, RNG, G, PAT)                                                 \
    do {                                                                       \
        if ((PAT) == UB_SEQ) {                                                 \
            I += (G).se;                                                       \
        } else {                                                               \
            RNG = ub_xorshift(RNG);                                            \
            I += 1 + (long)(((RNG >> 32) * (G).range) >> 32);                  \
            if (I >= (G).n)                                                    \
                I -= (G).n;                                                    \
        }                                                                      \
    } while (0)

#define UB_STEP(ACC)                                                           \
    do {                                                                       \
        UB_T x_ = A[ia];                                                       \
        UB_ADV(ia, ra, ga, pa);                                                \
        if (ns == 1) {                                                         \
            if (op == UB_OP_PROD)                                              \
                ACC *= x_;                                                     \
            else                                                               \
                ACC += x_;                                                     \
        } else {                                                               \
            UB_T y_ = B[ib];                                                   \
            UB_ADV(ib, rb, gb, pb);                                            \
            if (op == UB_OP_MUL)                                               \
                ACC += x_ * y_;                                                \
            else                                                               \
                ACC += x_ + y_;                                                \
        }                                                                      \
    } while (0)

static inline __attribute__((always_inline)) double
UB_CAT(stream_loop_, UB_SUF)(const enum ub_op op, const int ns, const enum ub_pattern pa,
                             const enum ub_pattern pb, const UB_T *restrict A, const UB_T *restrict B,
                             const struct ub_geom ga, const struct ub_geom gb, const long passes,
                             const uint64_t seed_a, const uint64_t seed_b)
{
    double total = 0.0;
    long ia = 0, ib = 0, la = 0, lb = 0;
    uint64_t ra = seed_a, rb = seed_b;
    const long iters = (ns == 2 && gb.m > ga.m) ? gb.m : ga.m;
    for (long p = 0; p < passes; p++) {
        if (pa == UB_SEQ) {
            ia = p % ga.se;
            la = ia + ga.m * ga.se;
        }
        if (ns == 2 && pb == UB_SEQ) {
            ib = p % gb.se;
            lb = ib + gb.m * gb.se;
        }
        UB_T v0 = op == UB_OP_PROD ? 1 : 0, v1 = 0, v2 = 0, v3 = 0;
        for (long j = 0; j < iters;) {
            long seg = iters - j;
            if (pa == UB_SEQ && (la - ia) / ga.se < seg)
                seg = (la - ia) / ga.se;
            if (ns == 2 && pb == UB_SEQ && (lb - ib) / gb.se < seg)
                seg = (lb - ib) / gb.se;
            long k = 0;
            for (; k + 4 <= seg; k += 4) {
                if (op == UB_OP_SUM4) { /* four independent accumulators */
                    UB_STEP(v0);
                    UB_STEP(v1);
                    UB_STEP(v2);
                    UB_STEP(v3);
                } else {
                    UB_STEP(v0);
                    UB_STEP(v0);
                    UB_STEP(v0);
                    UB_STEP(v0);
                }
            }
            for (; k < seg; k++)
                UB_STEP(v0);
            j += seg;
            if (pa == UB_SEQ && ia >= la)
                ia -= ga.m * ga.se;
            if (ns == 2 && pb == UB_SEQ && ib >= lb)
                ib -= gb.m * gb.se;
        }
        total += (double)v0 + (double)v1 + (double)v2 + (double)v3;
    }
    return total;
}

#undef UB_STEP
#undef UB_ADV
