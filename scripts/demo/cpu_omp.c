/* Compute-bound OpenMP program for the two-node demo: independent FMA chains on cache-resident data. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 400;
    enum { N = 2048 };                        /* 16 KiB per thread: stays in L1 */
    double total = 0.0;
#pragma omp parallel reduction(+ : total)
    {
        double x[N];
        for (int i = 0; i < N; i++) x[i] = 1.0 + i * 1e-9;
#pragma omp for schedule(static)
        for (long it = 0; it < iters * 1000; it++)
            for (int i = 0; i < N; i += 8)
                for (int k = 0; k < 8; k++) x[i + k] = x[i + k] * 0.999999 + 1e-7;
        for (int i = 0; i < N; i++) total += x[i];
    }
    printf("%g\n", total);
    return 0;
}
