/* A small MPI program with known communication, for the PMPI shim's test: ITERS steps, each a
 * little computation, then a 1 KiB MPI_Sendrecv around the ring (to the right, from the left);
 * every 10th step an MPI_Allreduce of 8 doubles. Usage: mpi_ring [ITERS] (default 200). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 200;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char out[1024] = {0}, in[1024];
    double local[8] = {0}, global[8];
    volatile double x = 1.0;
    for (int i = 0; i < iters; i++) {
        for (int k = 0; k < 20000; k++)
            x = x * 1.0000001 + 1e-9;
        MPI_Sendrecv(out, 1024, MPI_CHAR, (rank + 1) % size, 0, in, 1024, MPI_CHAR, (rank - 1 + size) % size, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (i % 10 == 0) {
            local[0] = x;
            MPI_Allreduce(local, global, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        printf("ring done: %d ranks, %d steps\n", size, iters);
    MPI_Finalize();
    return 0;
}
