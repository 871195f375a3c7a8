/* nodereg Jacobi data generator: Branikas 2024's stencil, for the boosted communication model
 * (docs/mpi.md, "The Jacobi data generator").
 *
 * A 5-point Jacobi stencil on a grid that is periodic in both directions, decomposed in 1-D: rank r
 * holds N x N points (rows r*N .. r*N+N-1 of the global (ranks*N) x N grid) in two arrays (the
 * previous and the next step) with DEPTH ghost rows above and below. Each time step has two
 * phases, timed apart, as in the paper's generator:
 *   communication  MSGS messages of DEPTH rows (DEPTH * N * 8 bytes) each, non-blocking, then
 *                  MPI_Waitall; message k goes to the neighbour above (k even) or below (k odd),
 *                  the paper's cycling over the neighbours list. The first two are the halo
 *                  (received into the ghost rows); the others repeat them (into scratch buffers)
 *   computation    every interior point: v = 0.25 * (up + down + left + right), then OPS - 1 more
 *                  operations v = v * one + zero (one, zero: 1 and 0 read at run time, so the
 *                  result is the stencil's whatever OPS is: OPS 1 is memory bound, 16 compute bound)
 * Usage (under mpirun):
 *   nodereg-ub-jacobi CPUS CONFIGS REPS TARGET_S
 *     CPUS      comma-separated CPU numbers: rank r pins itself to CPUS[r]
 *     CONFIGS   comma-separated N:DEPTH:MSGS:OPS (DEPTH <= N, MSGS >= 2, OPS >= 1)
 *     REPS      timed repetitions per configuration
 *     TARGET_S  seconds one repetition should take (its steps, at least 4, are calibrated to it)
 *   nodereg-ub-jacobi CPUS check N:DEPTH:MSGS:OPS STEPS
 *     STEPS steps from the initial grid; rank 0 prints {"kernel":"jacobi","grid":[[row], ...]}, the global grid
 * The initial grid: u(i, j) = ((7 i + 13 j) mod 17) / 16 at global row i, column j.
 *
 * Per configuration: calibration (steps doubled from 4 until the fastest of three repetitions
 * lasts TARGET_S / 4, then scaled to TARGET_S; every rank decides from the slowest rank's time),
 * then REPS repetitions, each after a barrier, with no barrier between steps (a rank that waits
 * for a slower neighbour waits inside the communication phase, as in an application). Output
 * (rank 0, JSON lines): {"ranks":R,"cpus":[...],"hosts":[...]}, then per configuration
 * {"kernel":"jacobi","n","depth","msgs","ops","bytes" (one message),"ws" (bytes of a rank's two arrays),"steps","times"
 * (each repetition's seconds, slowest rank),"comm","comp" (each repetition's seconds in the two
 * phases, mean over the ranks),"checksum" (the sum of the global grid at the end: the stencil keeps
 * it, so it equals the initial grid's)}, finally {"done":true}. Errors: {"error":"..."} on stderr.
 */
#define _GNU_SOURCE
#include <string.h>

#include "ub_mpi_common.h"

#define MIN_STEPS 4

static volatile double one_v = 1.0, zero_v = 0.0;

typedef struct {
    long n, depth, msgs, ops;
} Config;

typedef struct {
    Config c;
    double *u, *w;       /* (n + 2 depth) x n each: ghost rows, interior, ghost rows */
    double *scratch;     /* (msgs - 2) receive buffers for the repeated messages */
    MPI_Request *req;
    double comm, comp;   /* this rank's seconds in each phase since the last reset */
} Grid;

static int parse_config(const char *text, Config *c) {
    char *end;
    long v[4];
    const char *p = text;
    for (int i = 0; i < 4; i++) {
        v[i] = strtol(p, &end, 10);
        if (end == p || v[i] < 1 || (i < 3 && *end != ':'))
            return 0;
        p = end + (i < 3);
    }
    c->n = v[0], c->depth = v[1], c->msgs = v[2], c->ops = v[3];
    return c->depth <= c->n && c->msgs >= 2 && (*end == '\0' || *end == ',');
}

static void grid_init(Grid *g, Config c) {
    long n = c.n, rows = n + 2 * c.depth, line = c.depth * n;
    g->c = c;
    g->u = malloc(sizeof(double) * rows * n);
    g->w = malloc(sizeof(double) * rows * n);
    g->scratch = malloc(sizeof(double) * (c.msgs - 2 > 0 ? c.msgs - 2 : 1) * line);
    g->req = malloc(sizeof(MPI_Request) * 2 * c.msgs);
    if (!g->u || !g->w || !g->scratch || !g->req)
        fail("out of memory for the grid");
    for (long i = 0; i < rows; i++)   /* first touch by the rank that computes on it */
        for (long j = 0; j < n; j++) {
            long gi = rank * n + i - c.depth;
            g->u[i * n + j] = (double)((7 * ((gi % (nranks * n) + nranks * n) % (nranks * n)) + 13 * j) % 17) / 16.0;
            g->w[i * n + j] = 0.0;
        }
    for (long k = 0; k < (c.msgs - 2 > 0 ? c.msgs - 2 : 1) * line; k++)
        g->scratch[k] = 0.0;
    g->comm = g->comp = 0.0;
}

static void grid_free(Grid *g) {
    free(g->u), free(g->w), free(g->scratch), free(g->req);
}

/* One time step: the halo exchange, then the sweep (each phase's seconds added to the rank's). */
static void step(Grid *g) {
    long n = g->c.n, d = g->c.depth, line = d * n;
    int up = (rank - 1 + nranks) % nranks, down = (rank + 1) % nranks;
    double *u = g->u, *w = g->w;
    double t0 = MPI_Wtime();
    for (long k = 0; k < g->c.msgs; k++) {
        /* message k: to the neighbour above (k even: my first DEPTH rows) or below (my last);
         * its counterpart arrives from the other side into the ghost rows (k < 2) or scratch */
        int to = k % 2 ? down : up, from = k % 2 ? up : down;
        double *send = k % 2 ? u + n * n : u + line;
        double *recv = k >= 2 ? g->scratch + (k - 2) * line : (k % 2 ? u : u + (n + d) * n);
        MPI_Irecv(recv, (int)line, MPI_DOUBLE, from, (int)k, MPI_COMM_WORLD, &g->req[2 * k]);
        MPI_Isend(send, (int)line, MPI_DOUBLE, to, (int)k, MPI_COMM_WORLD, &g->req[2 * k + 1]);
    }
    MPI_Waitall((int)(2 * g->c.msgs), g->req, MPI_STATUSES_IGNORE);
    double t1 = MPI_Wtime();
    double one = one_v, zero = zero_v;
    long extra = g->c.ops - 1;
    for (long i = d; i < d + n; i++) {
        const double *above = u + (i - 1) * n, *row = u + i * n, *below = u + (i + 1) * n;
        double *out = w + i * n;
        for (long j = 0; j < n; j++) {
            long jm = j == 0 ? n - 1 : j - 1, jp = j == n - 1 ? 0 : j + 1;
            double v = 0.25 * (((above[j] + below[j]) + row[jm]) + row[jp]);
            for (long k = 0; k < extra; k++)
                v = v * one + zero;
            out[j] = v;
        }
    }
    g->u = w, g->w = u;
    g->comm += t1 - t0;
    g->comp += MPI_Wtime() - t1;
}

/* One repetition of `steps` steps after a barrier: the slowest rank's seconds; the mean rank's
 * seconds in each phase into comm and comp. */
static double timed(Grid *g, long steps, double *comm, double *comp) {
    MPI_Barrier(MPI_COMM_WORLD);
    g->comm = g->comp = 0.0;
    double t0 = MPI_Wtime();
    for (long s = 0; s < steps; s++)
        step(g);
    double mine = MPI_Wtime() - t0, slowest, parts[2] = {g->comm, g->comp}, sums[2];
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(parts, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    *comm = sums[0] / nranks, *comp = sums[1] / nranks;
    return slowest;
}

static double checksum(Grid *g) {
    double mine = 0.0, all;
    for (long i = g->c.depth; i < g->c.depth + g->c.n; i++)
        for (long j = 0; j < g->c.n; j++)
            mine += g->u[i * g->c.n + j];
    MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

static void check(Config c, long steps) {
    Grid g;
    grid_init(&g, c);
    for (long s = 0; s < steps; s++)
        step(&g);
    long n = c.n;
    double *all = rank == 0 ? malloc(sizeof(double) * nranks * n * n) : NULL;
    if (rank == 0 && !all)
        fail("out of memory for the gathered grid");
    MPI_Gather(g.u + c.depth * n, (int)(n * n), MPI_DOUBLE, all, (int)(n * n), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("{\"kernel\":\"jacobi\",\"grid\":[");
        for (long i = 0; i < nranks * n; i++) {
            printf("%s[", i ? "," : "");
            for (long j = 0; j < n; j++)
                printf("%s%.17g", j ? "," : "", all[i * n + j]);
            printf("]");
        }
        printf("]}\n");
        free(all);
    }
    grid_free(&g);
}

static void sweep(Config c, long reps, double target) {
    Grid g;
    grid_init(&g, c);
    long steps = MIN_STEPS;
    double comm, comp, t = 0.0;
    for (;;) {   /* the fastest of three: one preempted rank must not stop it too early */
        t = timed(&g, steps, &comm, &comp);
        for (int i = 0; i < 2; i++) {
            double again = timed(&g, steps, &comm, &comp);
            t = again < t ? again : t;
        }
        if (t >= target / 4 || steps >= (1L << 30))
            break;
        steps *= 2;
    }
    if (t < target && t > 0)
        steps = (long)(steps * (target / t)) + 1;
    double *times = malloc(sizeof(double) * 3 * reps);
    if (!times)
        fail("out of memory for the repetitions");
    for (long r = 0; r < reps; r++)
        times[3 * r] = timed(&g, steps, &times[3 * r + 1], &times[3 * r + 2]);
    double sum = checksum(&g);
    if (rank == 0) {
        printf("{\"kernel\":\"jacobi\",\"n\":%ld,\"depth\":%ld,\"msgs\":%ld,\"ops\":%ld,\"bytes\":%ld,\"ws\":%ld,"
               "\"steps\":%ld",
               c.n, c.depth, c.msgs, c.ops, c.depth * c.n * 8, 2 * c.n * c.n * 8, steps);
        const char *names[3] = {"times", "comm", "comp"};
        for (int k = 0; k < 3; k++) {
            printf(",\"%s\":[", names[k]);
            for (long r = 0; r < reps; r++)
                printf("%s%.9g", r ? "," : "", times[3 * r + k]);
            printf("]");
        }
        printf(",\"checksum\":%.17g}\n", sum);
        fflush(stdout);
    }
    free(times);
    grid_free(&g);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 5)
        fail("usage: nodereg-ub-jacobi CPUS CONFIGS REPS TARGET_S | CPUS check CONFIG STEPS");
    int checking = !strcmp(argv[2], "check");
    long cpus[MAX_LIST];
    pin_ranks(cpus, parse_list(argv[1], cpus));

    const char *list = checking ? argv[3] : argv[2];
    Config configs[MAX_LIST];
    int count = 0;
    for (const char *p = list; *p && count < MAX_LIST; count++) {
        if (!parse_config(p, &configs[count]))
            fail("malformed configuration (N:DEPTH:MSGS:OPS, DEPTH <= N, MSGS >= 2, OPS >= 1)");
        const char *comma = strchr(p, ',');
        p = comma ? comma + 1 : p + strlen(p);
    }
    if (count == 0)
        fail("no configuration");
    if (checking) {
        long steps = atol(argv[4]);
        if (steps < 0)
            fail("malformed steps");
        check(configs[0], steps);
    } else {
        long reps = atol(argv[3]);
        double target = atof(argv[4]);
        if (reps < 1 || target <= 0)
            fail("malformed repetitions or target");
        for (int i = 0; i < count; i++)
            sweep(configs[i], reps, target);
    }
    if (rank == 0)
        printf("{\"done\":true}\n");
    MPI_Finalize();
    return 0;
}
