/* Serial program for the two-node demo: a dependent floating-point recurrence (one core, any node). */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 800;
    double x = 0.5, y = 0.25;
    for (long i = 0; i < iters * 1000000L; i++) {
        x = x * 0.9999999 + y * 1e-7;
        y = y * 0.9999998 + x * 2e-7;
    }
    printf("%g\n", x + y);
    return 0;
}
