/* Four small programs of different kinds, for tests/test_kind_features.py, which checks that each
 * matches microbenchmark references of its own kind by the cachegrind instruction mix alone:
 *   kinds fma N      N x 64 steps of 8 independent scalar FP64 multiply-add chains (compute-bound)
 *   kinds stream N   triad a = b + s*c over three arrays of N doubles, 8 sweeps (memory-bound
 *                    when 24 N bytes exceed the last-level cache)
 *   kinds hash N     N bytes of a parser's work: hash random bytes, with a branch on each byte's
 *                    class (integer and branchy, as compression and parsing are)
 *   kinds matmul N   C = A x B for N x N doubles in 32 x 32 tiles (the working set of the whole
 *                    product is beyond the cache, the tiles' is not: compute-bound) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double fma_loop(long n)
{
    double a0 = 0.50, a1 = 0.51, a2 = 0.52, a3 = 0.53, a4 = 0.54, a5 = 0.55, a6 = 0.56, a7 = 0.57;
    for (long p = 0; p < n * 64; p++) {
        a0 = a0 * 0.9999999 + 1e-7;
        a1 = a1 * 0.9999999 + 1e-7;
        a2 = a2 * 0.9999999 + 1e-7;
        a3 = a3 * 0.9999999 + 1e-7;
        a4 = a4 * 0.9999999 + 1e-7;
        a5 = a5 * 0.9999999 + 1e-7;
        a6 = a6 * 0.9999999 + 1e-7;
        a7 = a7 * 0.9999999 + 1e-7;
    }
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

static double stream(long n)
{
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c)
        exit(1);
    for (long i = 0; i < n; i++) {
        a[i] = 0;
        b[i] = (double)i;
        c[i] = 1.0;
    }
    for (int r = 0; r < 8; r++)
        for (long i = 0; i < n; i++)
            a[i] = b[i] + 3.0 * c[i];
    return a[n - 1];
}

static double hash(long n)
{
    enum { BUF = 4096 };
    unsigned char buf[BUF];
    uint64_t x = 2463534242u, h = 14695981039346656037ull;
    for (int i = 0; i < BUF; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (unsigned char)(x >> 24);
    }
    long words = 0;
    for (long i = 0; i < n; i++) {
        unsigned b = buf[i % BUF];
        if (b < 64) {            /* a "digit" */
            h = (h ^ b) * 1099511628211ull;
        } else if (b < 128) {    /* a "letter" */
            h += b << 5;
        } else if (b < 200) {    /* a separator */
            words++;
            h ^= h >> 31;
        } else {
            h = h * 31 + b;
        }
    }
    return (double)(h >> 11) + (double)words;
}

static double matmul(long n)
{
    enum { T = 32 };
    double *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b), *c = calloc(n * n, sizeof *c);
    if (!a || !b || !c)
        exit(1);
    for (long i = 0; i < n * n; i++) {
        a[i] = (double)(i % 7);
        b[i] = (double)(i % 5);
    }
    for (long ii = 0; ii < n; ii += T)
        for (long kk = 0; kk < n; kk += T)
            for (long jj = 0; jj < n; jj += T)
                for (long i = ii; i < ii + T && i < n; i++)
                    for (long k = kk; k < kk + T && k < n; k++) {
                        double aik = a[i * n + k];
                        for (long j = jj; j < jj + T && j < n; j++)
                            c[i * n + j] += aik * b[k * n + j];
                    }
    return c[n * n - 1];
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: kinds fma|stream|hash|matmul N\n");
        return 2;
    }
    long n = atol(argv[2]);
    double r = !strcmp(argv[1], "fma") ? fma_loop(n) : !strcmp(argv[1], "stream") ? stream(n)
             : !strcmp(argv[1], "hash") ? hash(n) : !strcmp(argv[1], "matmul") ? matmul(n) : -1;
    printf("%g\n", r);
    return r == -1;
}
