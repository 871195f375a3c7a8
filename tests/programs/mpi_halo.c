/* A small MPI program with a known structure, for tracing MPI programs (tests/test_trace_mpi.py,
 * scripts/pmpi_overhead.py): a 1-D Jacobi stencil. Each step is two marked phases:
 *   exchange: for each of FIELDS (8) fields, the halo (HALO bytes) to both ring neighbours and from
 *             them (MPI_Isend/MPI_Irecv x 2, MPI_Waitall), then a light touch of the received halo;
 *   compute:  SWEEPS sweeps over the rank's N doubles, then an MPI_Allreduce of one double (the residual).
 * It times each of its own MPI calls with MPI_Wtime (call by call, as the PMPI library does: a rank
 * preempted between two calls is outside MPI for both, which a single timer around the burst of calls
 * would count inside) and prints, per rank, per phase and in all, the seconds inside MPI and the
 * seconds in the phase, so a tracer's figures can be checked against the program's:
 *   halo R phase exchange|compute|all mpi_s S phase_s S
 * to standard output, or appended to the file OUT (one write per rank).
 * Usage: mpi_halo [STEPS [HALO_BYTES [N [SWEEPS [OUT]]]]] (defaults 200, 65536, 100000, 4). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "nodereg_phase.h"

#define FIELDS 8
/* CALL's time added to ACC. */
#define TIMED(acc, call) do { double t_ = MPI_Wtime(); call; (acc) += MPI_Wtime() - t_; } while (0)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    double t_start = MPI_Wtime();
    int rank, size;
    int steps = argc > 1 ? atoi(argv[1]) : 200, halo = argc > 2 ? atoi(argv[2]) : 65536;
    int n = argc > 3 ? atoi(argv[3]) : 100000, sweeps = argc > 4 ? atoi(argv[4]) : 4;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int left = (rank - 1 + size) % size, right = (rank + 1) % size;
    char *sl = calloc(halo, 1), *sr = calloc(halo, 1), *rl = calloc(halo, 1), *rr = calloc(halo, 1);
    double *u = calloc(n + 2, sizeof *u), *v = calloc(n + 2, sizeof *v);
    for (int i = 0; i < n + 2; i++)
        u[i] = (double)(i % 17) / 17.0 + rank;
    double mpi_s[2] = {0, 0}, phase_s[2] = {0, 0}, t0;
    for (int s = 0; s < steps; s++) {
        NODEREG_PHASE_BEGIN("exchange");
        t0 = MPI_Wtime();
        for (int f = 0; f < FIELDS; f++) {
            MPI_Request req[4];
            TIMED(mpi_s[0], MPI_Irecv(rl, halo, MPI_CHAR, left, 0, MPI_COMM_WORLD, &req[0]));
            TIMED(mpi_s[0], MPI_Irecv(rr, halo, MPI_CHAR, right, 1, MPI_COMM_WORLD, &req[1]));
            TIMED(mpi_s[0], MPI_Isend(sr, halo, MPI_CHAR, right, 0, MPI_COMM_WORLD, &req[2]));
            TIMED(mpi_s[0], MPI_Isend(sl, halo, MPI_CHAR, left, 1, MPI_COMM_WORLD, &req[3]));
            TIMED(mpi_s[0], MPI_Waitall(4, req, MPI_STATUSES_IGNORE));
            u[0] += rl[0] * 1e-3;
            u[n + 1] += rr[halo - 1] * 1e-3;
        }
        phase_s[0] += MPI_Wtime() - t0;
        NODEREG_PHASE_END("exchange");

        NODEREG_PHASE_BEGIN("compute");
        t0 = MPI_Wtime();
        double local = 0, global;
        for (int k = 0; k < sweeps; k++) {
            for (int i = 1; i <= n; i++)
                v[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
            double *w = u; u = v; v = w;
        }
        for (int i = 1; i <= n; i++)
            local += u[i];
        TIMED(mpi_s[1], MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        sl[0] = (char)global;
        phase_s[1] += MPI_Wtime() - t0;
        NODEREG_PHASE_END("compute");
    }
    double all = MPI_Wtime() - t_start;
    char text[512];
    int len = snprintf(text, sizeof text,
                       "halo %d phase exchange mpi_s %.9f phase_s %.9f\nhalo %d phase compute mpi_s %.9f phase_s %.9f\n"
                       "halo %d phase all mpi_s %.9f phase_s %.9f\n", rank, mpi_s[0], phase_s[0], rank, mpi_s[1],
                       phase_s[1], rank, mpi_s[0] + mpi_s[1], all);
    FILE *out = argc > 5 ? fopen(argv[5], "a") : stdout;
    if (out) {
        fwrite(text, 1, (size_t)len, out);
        fflush(out);
        if (out != stdout)
            fclose(out);
    }
    free(sl); free(sr); free(rl); free(rr); free(u); free(v);
    MPI_Finalize();
    return 0;
}
