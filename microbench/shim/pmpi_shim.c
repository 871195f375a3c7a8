/* PMPI interposition library: per rank and per stretch of time, the time spent in MPI calls, the
 * calls, the bytes and the peers.
 *
 * Why: issue #31 item 2. An MPI program's phases split into computation and communication, and
 * only the second moves with a node's communication profile (docs/mpi.md). The MPI standard's
 * profiling interface lets a library define MPI_Send & co. and reach the real ones as PMPI_Send,
 * so the program is not changed: `nodereg trace -- mpirun ...` preloads it into every rank
 * (LD_PRELOAD, which the launcher passes on) and it wraps the point-to-point, wait, test and
 * collective calls below.
 *
 * Per rank it keeps (1) per MPI function the calls, nanoseconds inside the call (CLOCK_MONOTONIC)
 * and bytes sent (point-to-point: the message; collectives: the rank's send buffer); (2) a time
 * line of bins (0.1 ms from MPI_Init; when a run outgrows NBINS bins, neighbours merge and the width
 * doubles, so memory stays fixed at 1.8 MB: a bin is 0.1 ms up to a 3.3 s run, 0.1 s for a 1-hour one) holding the MPI time, calls, messages sent and their bytes,
 * collective calls and bytes, and the peers touched (a 64-bit mask of world ranks modulo 64), from
 * which the tracer gets every phase's split, whatever the phases turn out to be; (3) per peer
 * (world rank) the messages and bytes sent to it. Time is what the rank spent inside MPI: a
 * waiting rank's wait is communication time, as IMB and the seeds (Barnes's SEP) count it.
 *
 * (4) Per marker phase (a program using microbench/include/nodereg_phase.h calls nodereg_pmpi_mark
 * at each marker), the same figures call by call, and the phase's own time on this rank: the time
 * belongs to the innermost open phase, as the tracer's marker phases do (registry.trace.phases.leaves).
 *
 * At MPI_Finalize it writes its lines to NODEREG_PMPI_OUT/pmpi.<pid>.tsv (written to a temporary
 * name and renamed: a rank killed while writing leaves no half file); without NODEREG_PMPI_OUT it
 * records nothing. Line format (tab-separated; times in ns):
 *   H pid rank size host init_end_mono_ns init_end_real_ns bin_ns            (first)
 *   F pid rank size function calls time_ns bytes
 *   B pid rank bin mpi_ns calls msgs msg_bytes coll_calls coll_bytes peer_mask   (non-empty bins)
 *   P pid rank peer msgs bytes
 *   M pid rank name occurrences phase_ns mpi_ns calls msgs msg_bytes coll_calls coll_bytes peer_mask
 *   T pid rank size init_end_ns finalize_start_ns mpi_ns                       (last)
 * mpi_ns is the sum of the F lines' time_ns: the wall time between MPI_Init and MPI_Finalize minus
 * mpi_ns is the rank's computation. Bin i covers [init_end + i*bin_ns, init_end + (i+1)*bin_ns).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    F_SEND, F_RECV, F_ISEND, F_IRECV, F_SENDRECV, F_WAIT, F_WAITALL, F_WAITANY, F_TEST1, F_TESTALL, F_PROBE,
    F_BARRIER, F_BCAST, F_REDUCE, F_ALLREDUCE, F_ALLTOALL, F_ALLGATHER, F_GATHER, F_SCATTER, F_COUNT
};
static const char *const names[F_COUNT] = {
    "MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv", "MPI_Wait", "MPI_Waitall", "MPI_Waitany",
    "MPI_Test", "MPI_Testall", "MPI_Probe", "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce",
    "MPI_Alltoall", "MPI_Allgather", "MPI_Gather", "MPI_Scatter"};

#define NBINS 32768
#define BIN0_NS 100000LL

typedef struct {
    long long mpi_ns, calls, msgs, msg_bytes, coll, coll_bytes;
    uint64_t peers;
} bin_t;

#define NPHASES 64
#define DEPTH 32

typedef struct {
    char name[64];
    long long occurrences, phase_ns;
    bin_t sums;
} phase_t;

static phase_t phases[NPHASES];
static int nphases, stack[DEPTH], depth;
static long long switched_ns;

static long long calls[F_COUNT], time_ns[F_COUNT], sent[F_COUNT];
static long long init_end_ns, init_end_real_ns, bin_ns = BIN0_NS;
static bin_t *bins;
static long long *peer_msgs, *peer_bytes;
static int world_size, started;

static long long clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

static void start(void) {
    init_end_ns = now_ns();
    init_end_real_ns = clock_ns(CLOCK_REALTIME);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    bins = calloc(NBINS, sizeof *bins);
    peer_msgs = calloc(world_size > 0 ? world_size : 1, sizeof *peer_msgs);
    peer_bytes = calloc(world_size > 0 ? world_size : 1, sizeof *peer_bytes);
    started = bins && peer_msgs && peer_bytes;
}

/* The bin of time T, merging neighbouring bins (doubling the width) until it fits. */
static bin_t *bin_at(long long t) {
    long long i = (t - init_end_ns) / bin_ns;
    if (i < 0)
        i = 0;
    while (i >= NBINS) {
        for (int k = 0; k < NBINS / 2; k++) {
            bin_t a = bins[2 * k], b = bins[2 * k + 1];
            bins[k] = (bin_t){a.mpi_ns + b.mpi_ns, a.calls + b.calls, a.msgs + b.msgs, a.msg_bytes + b.msg_bytes,
                              a.coll + b.coll, a.coll_bytes + b.coll_bytes, a.peers | b.peers};
        }
        memset(bins + NBINS / 2, 0, NBINS / 2 * sizeof *bins);
        bin_ns *= 2;
        i = (t - init_end_ns) / bin_ns;
    }
    return bins + i;
}

/* Spread [T0, T1) over the bins it covers; the call's counts go to the bin it began in. */
static bin_t *add_time(long long t0, long long t1) {
    long long t = t0;
    while (t < t1) {
        bin_t *b = bin_at(t);
        long long edge = init_end_ns + ((t - init_end_ns) / bin_ns + 1) * bin_ns;
        long long upto = edge < t1 ? edge : t1;
        b->mpi_ns += upto - t;
        t = upto;
    }
    return bin_at(t0);   /* looked up again: the bins may have merged meanwhile */
}

static long long bytes_of(int count, MPI_Datatype type) {
    int size = 0;
    if (count <= 0 || PMPI_Type_size(type, &size) != MPI_SUCCESS)
        return 0;
    return (long long)count * size;
}

/* The world rank of RANK in COMM (-1: none, e.g. MPI_ANY_SOURCE or MPI_PROC_NULL). */
static int world_rank(int rank, MPI_Comm comm) {
    if (rank < 0)
        return -1;
    if (comm == MPI_COMM_WORLD)
        return rank;
    MPI_Group group, world;
    int out = -1;
    PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Group_translate_ranks(group, 1, &rank, world, &out);
    PMPI_Group_free(&group);
    PMPI_Group_free(&world);
    return out == MPI_UNDEFINED ? -1 : out;
}

/* The time since the last marker to the innermost open phase. */
static void settle(long long t) {
    if (depth > 0 && depth <= DEPTH)
        phases[stack[depth - 1]].phase_ns += t - switched_ns;
    switched_ns = t;
}

void nodereg_pmpi_mark(const char *verb, const char *name) {
    long long t = now_ns();
    int k = 0;
    while (k < nphases && strncmp(phases[k].name, name, sizeof phases[k].name - 1) != 0)
        k++;
    if (strcmp(verb, "begin") == 0) {
        if (k == nphases && nphases < NPHASES)
            snprintf(phases[nphases++].name, sizeof phases[0].name, "%s", name);
        if (k >= nphases || depth >= DEPTH)
            return;   /* past the tables: the phase is left to the time line */
        settle(t);
        phases[k].occurrences++;
        stack[depth++] = k;
    } else if (strcmp(verb, "end") == 0) {
        for (int d = depth - 1; d >= 0; d--)
            if (stack[d] == k) {   /* close it (and any left open inside it) */
                settle(t);
                depth = d;
                break;
            }
    }
}

enum kind { K_WAIT, K_P2P, K_COLL };

static void count(bin_t *b, long long ns, enum kind kind, long long bytes, int peer) {
    b->mpi_ns += ns;
    b->calls++;
    if (kind == K_COLL) {
        b->coll++;
        b->coll_bytes += bytes;
    } else if (kind == K_P2P) {
        b->msgs++;
        b->msg_bytes += bytes;
    }
    if (peer >= 0)
        b->peers |= 1ULL << (peer % 64);
}

/* Book one finished call of function F: KIND says whether BYTES are a message to PEER (a world
 * rank, or -1), a collective's, or nothing (waits, tests, receives: PEER still counts). */
static void book(int f, enum kind kind, long long t0, long long bytes, int peer) {
    long long t1 = now_ns();
    time_ns[f] += t1 - t0;
    calls[f]++;
    sent[f] += bytes;
    if (!started)
        return;
    if (kind == K_P2P && peer >= 0 && peer < world_size) {
        peer_msgs[peer]++;
        peer_bytes[peer] += bytes;
    }
    count(add_time(t0, t1), 0, kind, bytes, peer);
    if (depth > 0 && depth <= DEPTH)
        count(&phases[stack[depth - 1]].sums, t1 - t0, kind, bytes, peer);
}

#define P2P(F, BYTES, PEER, COMM, CALL)                                              \
    do {                                                                              \
        long long t0_ = now_ns();                                                     \
        int rc_ = (CALL);                                                             \
        book(F, K_P2P, t0_, (BYTES), world_rank((PEER), (COMM)));                     \
        return rc_;                                                                   \
    } while (0)

#define RECEIVE(F, PEER, COMM, CALL)                                                  \
    do {                                                                              \
        long long t0_ = now_ns();                                                     \
        int rc_ = (CALL);                                                             \
        book(F, K_WAIT, t0_, 0, world_rank((PEER), (COMM)));                          \
        return rc_;                                                                   \
    } while (0)

#define WAITING(F, CALL)                                                              \
    do {                                                                              \
        long long t0_ = now_ns();                                                     \
        int rc_ = (CALL);                                                             \
        book(F, K_WAIT, t0_, 0, -1);                                                  \
        return rc_;                                                                   \
    } while (0)

#define COLLECTIVE(F, BYTES, CALL)                                                    \
    do {                                                                              \
        long long t0_ = now_ns();                                                     \
        int rc_ = (CALL);                                                             \
        book(F, K_COLL, t0_, (BYTES), -1);                                            \
        return rc_;                                                                   \
    } while (0)

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    start();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    start();
    return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    P2P(F_SEND, bytes_of(count, type), dest, comm, PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Status *st) {
    RECEIVE(F_RECV, src, comm, PMPI_Recv(buf, count, type, src, tag, comm, st));
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    P2P(F_ISEND, bytes_of(count, type), dest, comm, PMPI_Isend(buf, count, type, dest, tag, comm, req));
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Request *req) {
    RECEIVE(F_IRECV, src, comm, PMPI_Irecv(buf, count, type, src, tag, comm, req));
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
                 MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *st) {
    long long t0 = now_ns();
    int rc = PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, st);
    int from = world_rank(src, comm);
    if (from >= 0 && bins)
        bin_at(t0)->peers |= 1ULL << (from % 64);
    book(F_SENDRECV, K_P2P, t0, bytes_of(scount, stype), world_rank(dest, comm));
    return rc;
}

int MPI_Wait(MPI_Request *req, MPI_Status *st) { WAITING(F_WAIT, PMPI_Wait(req, st)); }

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) { WAITING(F_WAITALL, PMPI_Waitall(n, reqs, sts)); }

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st) {
    WAITING(F_WAITANY, PMPI_Waitany(n, reqs, index, st));
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st) { WAITING(F_TEST1, PMPI_Test(req, flag, st)); }

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]) {
    WAITING(F_TESTALL, PMPI_Testall(n, reqs, flag, sts));
}

int MPI_Probe(int src, int tag, MPI_Comm comm, MPI_Status *st) {
    RECEIVE(F_PROBE, src, comm, PMPI_Probe(src, tag, comm, st));
}

int MPI_Barrier(MPI_Comm comm) { COLLECTIVE(F_BARRIER, 0, PMPI_Barrier(comm)); }

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    COLLECTIVE(F_BCAST, rank == root ? bytes_of(count, type) : 0, PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
    COLLECTIVE(F_REDUCE, bytes_of(count, type), PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm));
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    COLLECTIVE(F_ALLREDUCE, bytes_of(count, type), PMPI_Allreduce(sbuf, rbuf, count, type, op, comm));
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                 MPI_Comm comm) {
    int size = 1;
    PMPI_Comm_size(comm, &size);
    COLLECTIVE(F_ALLTOALL, bytes_of(scount, stype) * size,
               PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
    COLLECTIVE(F_ALLGATHER, bytes_of(scount, stype), PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
               int root, MPI_Comm comm) {
    COLLECTIVE(F_GATHER, bytes_of(scount, stype), PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                int root, MPI_Comm comm) {
    int rank = 0, size = 1;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    COLLECTIVE(F_SCATTER, rank == root ? bytes_of(scount, stype) * size : 0,
               PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Finalize(void) {
    long long finalize_start = now_ns();
    const char *dir = getenv("NODEREG_PMPI_OUT");
    if (dir && *dir) {
        int rank = 0, size = 1, pid = (int)getpid();
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        PMPI_Comm_size(MPI_COMM_WORLD, &size);
        char path[4096], tmp[4200], host[256] = "";
        gethostname(host, sizeof host - 1);
        snprintf(path, sizeof path, "%s/pmpi.%d.tsv", dir, pid);
        snprintf(tmp, sizeof tmp, "%s/.pmpi.%d.tsv.tmp", dir, pid);
        FILE *f = fopen(tmp, "w");
        if (f) {
            long long total = 0;
            fprintf(f, "H\t%d\t%d\t%d\t%s\t%lld\t%lld\t%lld\n", pid, rank, size, host[0] ? host : "-", init_end_ns,
                    init_end_real_ns, bin_ns);
            for (int k = 0; k < F_COUNT; k++) {
                if (!calls[k])
                    continue;
                total += time_ns[k];
                fprintf(f, "F\t%d\t%d\t%d\t%s\t%lld\t%lld\t%lld\n", pid, rank, size, names[k], calls[k], time_ns[k],
                        sent[k]);
            }
            for (int i = 0; started && i < NBINS; i++) {
                bin_t *b = bins + i;
                if (b->calls || b->mpi_ns)
                    fprintf(f, "B\t%d\t%d\t%d\t%lld\t%lld\t%lld\t%lld\t%lld\t%lld\t%llu\n", pid, rank, i, b->mpi_ns,
                            b->calls, b->msgs, b->msg_bytes, b->coll, b->coll_bytes, (unsigned long long)b->peers);
            }
            settle(finalize_start);
            for (int k = 0; k < nphases; k++) {
                phase_t *ph = phases + k;
                bin_t *b = &ph->sums;
                if (ph->occurrences)
                    fprintf(f, "M\t%d\t%d\t%s\t%lld\t%lld\t%lld\t%lld\t%lld\t%lld\t%lld\t%lld\t%llu\n", pid, rank,
                            ph->name, ph->occurrences, ph->phase_ns, b->mpi_ns, b->calls, b->msgs, b->msg_bytes, b->coll,
                            b->coll_bytes, (unsigned long long)b->peers);
            }
            for (int p = 0; started && p < world_size; p++)
                if (peer_msgs[p])
                    fprintf(f, "P\t%d\t%d\t%d\t%lld\t%lld\n", pid, rank, p, peer_msgs[p], peer_bytes[p]);
            fprintf(f, "T\t%d\t%d\t%d\t%lld\t%lld\t%lld\n", pid, rank, size, init_end_ns, finalize_start, total);
            if (fclose(f) == 0)
                rename(tmp, path);
            else
                unlink(tmp);
        }
    }
    return PMPI_Finalize();
}
