/* nodereg MPI microbenchmarks: the node-local communication profile (docs/mpi.md).
 *
 * Usage (under mpirun; every argument is required):
 *   nodereg-ub-mpi CPUS KERNELS SIZES REPS TARGET_S
 *     CPUS      comma-separated CPU numbers: rank r pins itself to CPUS[r] (the launcher binds
 *               nothing, so placement is the same whatever MPI launched it); or `local` (a job
 *               across nodes, `nodereg fleet mpi`): the i-th rank of a node pins itself to the
 *               i-th CPU it was started with (the CPUs the batch system gave the job there)
 *     KERNELS   comma-separated: pingpong (ranks 0 and 1; the others wait), exchange, allreduce
 *     SIZES     comma-separated message sizes in bytes (allreduce: doubles, at least 8 bytes)
 *     REPS      timed repetitions per (kernel, size)
 *     TARGET_S  seconds one repetition should take (its operations are calibrated to it)
 *
 * The kernels follow the Intel MPI Benchmarks' definitions:
 *   pingpong  rank 0 sends a message to rank 1, which sends it back; one operation = a round trip
 *   exchange  every rank sends a message to its left and right neighbour (ring) and receives one
 *             from each, non-blocking, then waits for all four; one operation = one such step
 *   allreduce MPI_Allreduce of SIZES/8 doubles (sum); one operation = one call
 * Per (kernel, size): calibration (doubling the operations until the fastest of three
 * repetitions lasts at least TARGET_S / 4, then scaled to TARGET_S: every rank takes the same decision from the
 * slowest rank's time), then REPS timed repetitions, each after a barrier. A repetition's time is
 * that of its slowest rank (MPI_Allreduce MAX of each rank's MPI_Wtime difference).
 *
 * Output (rank 0, one JSON line each): first {"ranks":N,"cpus":[the CPU each rank runs on],
 * "hosts":[the host each rank runs on (MPI_Get_processor_name)]},
 * then per (kernel, size) {"kernel":K,"bytes":B,"iters":I,"times":[seconds per repetition]},
 * finally {"done":true}. Errors: one line {"error":"..."} on stderr and a non-zero exit.
 */
#define _GNU_SOURCE
#include <string.h>

#include "ub_mpi_common.h"

/* `local` CPUs: rank r's entry is the i-th CPU of its own starting affinity, i its rank among the ranks
 * of its node (MPI_COMM_TYPE_SHARED), wrapping round when a node has more ranks than CPUs; gathered so
 * that every rank holds the list, as from the command line. Returns the ranks (0: no CPU to pin to). */
static int local_cpus(long *out) {
    MPI_Comm node;
    int local = 0, cpu = -1, mine[1], seen = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    cpu_set_t set;
    CPU_ZERO(&set);
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    for (int c = 0; n > 0 && c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && seen++ == local % n) {
            cpu = c;
            break;
        }
    mine[0] = cpu;
    int all[MAX_LIST];
    if (nranks > MAX_LIST)
        return 0;
    MPI_Allgather(mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < nranks; r++) {
        if (all[r] < 0)
            return 0;
        out[r] = all[r];
    }
    return nranks;
}

static char *sbuf, *rbuf_l, *rbuf_r;

static void pingpong(long bytes, long iters) {
    for (long i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(sbuf, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(rbuf_l, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(rbuf_l, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
}

static void exchange(long bytes, long iters) {
    int left = (rank - 1 + nranks) % nranks, right = (rank + 1) % nranks;
    MPI_Request req[4];
    for (long i = 0; i < iters; i++) {
        MPI_Irecv(rbuf_l, (int)bytes, MPI_BYTE, left, 1, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(rbuf_r, (int)bytes, MPI_BYTE, right, 2, MPI_COMM_WORLD, &req[1]);
        MPI_Isend(sbuf, (int)bytes, MPI_BYTE, right, 1, MPI_COMM_WORLD, &req[2]);
        MPI_Isend(sbuf, (int)bytes, MPI_BYTE, left, 2, MPI_COMM_WORLD, &req[3]);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    }
}

static void allreduce(long bytes, long iters) {
    int count = (int)(bytes / 8);
    for (long i = 0; i < iters; i++)
        MPI_Allreduce(sbuf, rbuf_l, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

/* One repetition: `iters` operations after a barrier; the slowest rank's seconds. */
static double timed(void (*op)(long, long), long bytes, long iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    op(bytes, iters);
    double mine = MPI_Wtime() - t0, slowest;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

/* The fastest of three repetitions: one preempted rank (a shared host) must not stop the
 * calibration at too few operations. */
static double calibration_time(void (*op)(long, long), long bytes, long iters) {
    double best = timed(op, bytes, iters);
    for (int i = 0; i < 2; i++) {
        double t = timed(op, bytes, iters);
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 6)
        fail("usage: nodereg-ub-mpi CPUS KERNELS SIZES REPS TARGET_S");
    long cpus[MAX_LIST], sizes[MAX_LIST];
    int local = !strcmp(argv[1], "local");
    int ncpus = local ? local_cpus(cpus) : parse_list(argv[1], cpus), nsizes = parse_list(argv[3], sizes);
    long reps = atol(argv[4]);
    double target = atof(argv[5]);
    if (nsizes == 0 || reps < 1 || target <= 0)
        fail("malformed sizes, repetitions or target");
    pin_ranks(cpus, ncpus);

    long biggest = 8;
    for (int i = 0; i < nsizes; i++)
        biggest = sizes[i] > biggest ? sizes[i] : biggest;
    sbuf = malloc(biggest);
    rbuf_l = malloc(biggest);
    rbuf_r = malloc(biggest);
    if (!sbuf || !rbuf_l || !rbuf_r)
        fail("out of memory for the message buffers");
    for (long i = 0; i < biggest / 8; i++)   /* first touch by the rank that uses them */
        ((double *)sbuf)[i] = rank + 1.0, ((double *)rbuf_l)[i] = 0, ((double *)rbuf_r)[i] = 0;

    char *kernels = strdup(argv[2]), *save = NULL;
    for (char *name = strtok_r(kernels, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        void (*op)(long, long) = !strcmp(name, "pingpong")    ? pingpong
                                 : !strcmp(name, "exchange")  ? exchange
                                 : !strcmp(name, "allreduce") ? allreduce
                                                              : NULL;
        if (!op)
            fail("unknown kernel (known: pingpong, exchange, allreduce)");
        if (op == pingpong && nranks < 2)
            fail("pingpong needs at least 2 ranks");
        for (int s = 0; s < nsizes; s++) {
            long bytes = op == allreduce ? (sizes[s] < 8 ? 8 : sizes[s] / 8 * 8) : sizes[s];
            long iters = 1;
            double t = calibration_time(op, bytes, iters);   /* also the warm-up */
            while (t < target / 4 && iters < (1L << 30)) {
                iters *= 2;
                t = calibration_time(op, bytes, iters);
            }
            if (t < target && t > 0)
                iters = (long)(iters * (target / t)) + 1;
            if (rank == 0)
                printf("{\"kernel\":\"%s\",\"bytes\":%ld,\"iters\":%ld,\"times\":[", name, bytes, iters);
            for (long r = 0; r < reps; r++) {
                double rep = timed(op, bytes, iters);
                if (rank == 0)
                    printf("%s%.9g", r ? "," : "", rep);
            }
            if (rank == 0) {
                printf("]}\n");
                fflush(stdout);
            }
        }
    }
    if (rank == 0)
        printf("{\"done\":true}\n");
    free(kernels);
    MPI_Finalize();
    return 0;
}
