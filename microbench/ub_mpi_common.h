/* What the MPI kernel programs share (ub_mpi.c, ub_jacobi.c): their one-line error, the
 * comma-separated lists of their arguments, and each rank pinning itself to its CPU and saying
 * where it runs. Included
 * once, by the program's one source file (after _GNU_SOURCE, for sched_setaffinity). */
#ifndef NODEREG_UB_MPI_COMMON_H
#define NODEREG_UB_MPI_COMMON_H

#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_LIST 256
#define HOST_CHARS 64

static int rank, nranks;

static void fail(const char *msg) {
    if (rank == 0)
        fprintf(stderr, "{\"error\":\"%s\"}\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Comma-separated non-negative integers into out[]; returns how many (0 on a malformed list). */
static int parse_list(const char *text, long *out) {
    int n = 0;
    const char *p = text;
    while (*p && n < MAX_LIST) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0)
            return 0;
        out[n++] = v;
        if (*end == ',')
            end++;
        else if (*end)
            return 0;
        p = end;
    }
    return *p ? 0 : n;
}

/* Rank r pins itself to CPUS[r] (the launcher binds nothing, so placement is the same whatever
 * MPI launched it); rank 0 prints the first output line, {"ranks":N,"cpus":[the CPU each rank runs
 * on],"hosts":[the host each rank runs on (MPI_Get_processor_name)]}. */
static void pin_ranks(const long *cpus, int ncpus) {
    if (ncpus < nranks)
        fail("fewer CPUs than ranks");
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)cpus[rank], &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        fail("cannot pin a rank to its CPU");
    int here = sched_getcpu(), where[MAX_LIST], len = 0;
    MPI_Gather(&here, 1, MPI_INT, where, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char host[MPI_MAX_PROCESSOR_NAME] = "", hosts[MAX_LIST][HOST_CHARS];
    MPI_Get_processor_name(host, &len);
    host[HOST_CHARS - 1] = 0;
    MPI_Gather(host, HOST_CHARS, MPI_CHAR, hosts, HOST_CHARS, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("{\"ranks\":%d,\"cpus\":[", nranks);
        for (int r = 0; r < nranks; r++)
            printf("%s%d", r ? "," : "", where[r]);
        printf("],\"hosts\":[");
        for (int r = 0; r < nranks; r++)
            printf("%s\"%s\"", r ? "," : "", hosts[r]);
        printf("]}\n");
        fflush(stdout);
    }
}

#endif
