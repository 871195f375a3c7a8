/* One OpenMP region in which only thread 0 works (a serial section inside a parallel region, as
 * a badly balanced program has); the other threads wait at the region's end, spinning where
 * OMP_WAIT_POLICY=active, so /proc counts them busy. Usage: lopsided SECONDS.
 * Used by tests/test_trace_run.py (the shim's per-thread times give the serial share). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 0.5, x = 1.0;
#pragma omp parallel
    {
        if (omp_get_thread_num() == 0) {
            double t0 = omp_get_wtime();
            while (omp_get_wtime() - t0 < seconds)
                for (int i = 0; i < 100000; i++)
                    x = x * 0.9999999 + 1e-7;
        }
    }
    printf("%g\n", x);
    return 0;
}
