/* A program with a known phase structure, for `nodereg trace` tests and measurements.
 *
 * usage: trace_testprog [-m] [-b MB] KIND:SECONDS ...
 *   compute:S  OpenMP FMA chains in registers for S seconds (compute-bound, no memory traffic)
 *   work:N     the same chains for a fixed N million iterations per thread (fixed work, for timing)
 *   stream:S   OpenMP read-modify-write passes over a B MB array for S seconds (memory-bound;
 *              default 256 MB; its pages are first touched in the first stream phase)
 *   sleep:S    sleeps S seconds (idle)
 *   -m         wraps every phase in NODEREG_PHASE_BEGIN/END markers named after its kind
 * Threads: OMP_NUM_THREADS. Prints a checksum so that no loop can be optimised away.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nodereg_phase.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double compute(double seconds)
{
    double end = now() + seconds, total = 0;
#pragma omp parallel reduction(+ : total)
    {
        double a = 1.0 + omp_get_thread_num(), b = 0.5, c = 0.25, d = 0.125, m = 0.999999, k = 1e-7;
        while (now() < end) {
            for (int i = 0; i < 1000000; i++) {
                a = a * m + k;
                b = b * m + k;
                c = c * m + k;
                d = d * m + k;
            }
        }
        total += a + b + c + d;
    }
    return total;
}

static double work(double millions)
{
    double total = 0;
    long n = (long)(millions * 1e6);
#pragma omp parallel reduction(+ : total)
    {
        double a = 1.0 + omp_get_thread_num(), b = 0.5, c = 0.25, d = 0.125, m = 0.999999, k = 1e-7;
        for (long i = 0; i < n; i++) {
            a = a * m + k;
            b = b * m + k;
            c = c * m + k;
            d = d * m + k;
        }
        total += a + b + c + d;
    }
    return total;
}

static double stream(double *x, size_t n, double seconds)
{
    double end = now() + seconds, total = 0;
    do {
#pragma omp parallel for reduction(+ : total) schedule(static)
        for (size_t i = 0; i < n; i++) {
            x[i] = x[i] * 0.5 + 1.0;
            total += x[i];
        }
    } while (now() < end);
    return total;
}

int main(int argc, char **argv)
{
    int markers = 0, first = 1;
    size_t mb = 256;
    while (first < argc && argv[first][0] == '-') {
        if (!strcmp(argv[first], "-m"))
            markers = 1;
        else if (!strcmp(argv[first], "-b") && first + 1 < argc)
            mb = (size_t)atol(argv[++first]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[first]);
            return 2;
        }
        first++;
    }
    size_t n = mb * 1024 * 1024 / sizeof(double);
    double *x = malloc(n * sizeof *x), sum = 0;
    if (!x)
        return 1;
    for (int i = first; i < argc; i++) {
        char kind[32];
        double seconds;
        if (sscanf(argv[i], "%31[a-z]:%lf", kind, &seconds) != 2) {
            fprintf(stderr, "bad phase %s (expected KIND:SECONDS)\n", argv[i]);
            return 2;
        }
        if (markers)
            NODEREG_PHASE_BEGIN(kind);
        if (!strcmp(kind, "compute"))
            sum += compute(seconds);
        else if (!strcmp(kind, "work"))
            sum += work(seconds);
        else if (!strcmp(kind, "stream"))
            sum += stream(x, n, seconds);
        else if (!strcmp(kind, "sleep")) {
            struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
            nanosleep(&ts, NULL);
        } else {
            fprintf(stderr, "unknown phase kind %s\n", kind);
            return 2;
        }
        if (markers)
            NODEREG_PHASE_END(kind);
    }
    printf("checksum %g\n", sum);
    return 0;
}
