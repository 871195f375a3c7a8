/* PMPI interposition library: per rank, the time spent in MPI calls, the calls and the bytes.
 *
 * Why: issue #31 item 2. An MPI program's phases split into computation and communication, and
 * only the second moves with a node's communication profile (docs/mpi.md). The MPI standard's
 * profiling interface lets a library define MPI_Send & co. and reach the real ones as PMPI_Send,
 * so the program is not changed: the library is preloaded into every rank (LD_PRELOAD, which the
 * launcher passes on) and wraps the point-to-point, wait and collective calls below.
 *
 * Per rank and MPI function it counts calls, nanoseconds inside the call (CLOCK_MONOTONIC) and the
 * bytes the rank sends (point-to-point: the message; collectives: the rank's send buffer). At
 * MPI_Finalize it appends its lines to the file named by NODEREG_PMPI_OUT (one write(2) each, so
 * every rank can share one file); without NODEREG_PMPI_OUT it records nothing.
 *
 * Line format (tab-separated; times in ns):
 *   F pid rank size function calls time_ns bytes
 *   T pid rank size init_end_ns finalize_start_ns mpi_ns        (one per rank, after its F lines)
 * mpi_ns is the sum of the F lines' time_ns: wall time between MPI_Init and MPI_Finalize minus
 * mpi_ns is the rank's computation.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    F_SEND, F_RECV, F_ISEND, F_IRECV, F_SENDRECV, F_WAIT, F_WAITALL, F_BARRIER, F_BCAST, F_REDUCE,
    F_ALLREDUCE, F_ALLTOALL, F_ALLGATHER, F_GATHER, F_SCATTER, F_COUNT
};
static const char *const names[F_COUNT] = {
    "MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv", "MPI_Wait", "MPI_Waitall",
    "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Alltoall", "MPI_Allgather",
    "MPI_Gather", "MPI_Scatter"};

static long long calls[F_COUNT], time_ns[F_COUNT], sent[F_COUNT];
static long long init_end_ns;

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long bytes_of(int count, MPI_Datatype type) {
    int size = 0;
    if (count <= 0 || PMPI_Type_size(type, &size) != MPI_SUCCESS)
        return 0;
    return (long long)count * size;
}

/* Time one PMPI call into slot F, adding BYTES to what the rank sent. */
#define TIMED(F, BYTES, CALL)                  \
    do {                                       \
        long long t0_ = now_ns();              \
        int rc_ = (CALL);                      \
        time_ns[F] += now_ns() - t0_;          \
        calls[F]++;                            \
        sent[F] += (BYTES);                    \
        return rc_;                            \
    } while (0)

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    init_end_ns = now_ns();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    init_end_ns = now_ns();
    return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    TIMED(F_SEND, bytes_of(count, type), PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Status *st) {
    TIMED(F_RECV, 0, PMPI_Recv(buf, count, type, src, tag, comm, st));
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    TIMED(F_ISEND, bytes_of(count, type), PMPI_Isend(buf, count, type, dest, tag, comm, req));
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Request *req) {
    TIMED(F_IRECV, 0, PMPI_Irecv(buf, count, type, src, tag, comm, req));
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
                 MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *st) {
    TIMED(F_SENDRECV, bytes_of(scount, stype),
          PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, st));
}

int MPI_Wait(MPI_Request *req, MPI_Status *st) {
    TIMED(F_WAIT, 0, PMPI_Wait(req, st));
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
    TIMED(F_WAITALL, 0, PMPI_Waitall(n, reqs, sts));
}

int MPI_Barrier(MPI_Comm comm) {
    TIMED(F_BARRIER, 0, PMPI_Barrier(comm));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    TIMED(F_BCAST, rank == root ? bytes_of(count, type) : 0, PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
    TIMED(F_REDUCE, bytes_of(count, type), PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm));
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    TIMED(F_ALLREDUCE, bytes_of(count, type), PMPI_Allreduce(sbuf, rbuf, count, type, op, comm));
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                 MPI_Comm comm) {
    int size = 1;
    PMPI_Comm_size(comm, &size);
    TIMED(F_ALLTOALL, bytes_of(scount, stype) * size, PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
    TIMED(F_ALLGATHER, bytes_of(scount, stype), PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
               int root, MPI_Comm comm) {
    TIMED(F_GATHER, bytes_of(scount, stype), PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                int root, MPI_Comm comm) {
    int rank = 0, size = 1;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    TIMED(F_SCATTER, rank == root ? bytes_of(scount, stype) * size : 0,
          PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

static void write_line(int fd, const char *line) {
    size_t len = strlen(line);
    ssize_t done = write(fd, line, len);   /* one write: lines of ranks sharing the file do not mix */
    (void)done;
}

int MPI_Finalize(void) {
    long long finalize_start = now_ns();
    const char *path = getenv("NODEREG_PMPI_OUT");
    if (path && *path) {
        int rank = 0, size = 1;
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        PMPI_Comm_size(MPI_COMM_WORLD, &size);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            char line[256];
            long long total = 0;
            for (int f = 0; f < F_COUNT; f++) {
                if (!calls[f])
                    continue;
                total += time_ns[f];
                snprintf(line, sizeof line, "F\t%d\t%d\t%d\t%s\t%lld\t%lld\t%lld\n", (int)getpid(), rank, size,
                         names[f], calls[f], time_ns[f], sent[f]);
                write_line(fd, line);
            }
            snprintf(line, sizeof line, "T\t%d\t%d\t%d\t%lld\t%lld\t%lld\n", (int)getpid(), rank, size, init_end_ns,
                     finalize_start, total);
            write_line(fd, line);
            close(fd);
        }
    }
    return PMPI_Finalize();
}
