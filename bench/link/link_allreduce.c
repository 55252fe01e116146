// link_allreduce.c: the gradient all-reduce of ./train alone, timed
// (bench/link/bench_link.sh compiles it with mpicc into build/ and runs it
// with 2 ranks in two network namespaces joined by a shaped veth pair).
//
//   mpirun -np 2 build/link_allreduce --floats N [--iters K] [--warmup W]
//
// Per iteration: MPI_Barrier, then one MPI_Allreduce(MPI_IN_PLACE, N floats,
// MPI_SUM) on MPI_COMM_WORLD, exactly the call of dist_grads_sum
// (src/train/dist.c; N < 2^30, so one call). Each rank times its own call
// from the barrier's exit; the iteration's time is the largest over the
// ranks (what a training step waits for, without the wait for a slower
// backward that ./train's own figure includes).
//
// Also measured, for reading the result: the one-way small-message latency
// (half the round trip of a 4-byte MPI ping-pong: the model's "latency"),
// the one-way bandwidth of a single N-float message from rank 0 to rank 1
// (what the link delivers to MPI, independent of the all-reduce algorithm),
// and the rate of an exchange: both ranks send their N floats to each other
// at once (MPI_Sendrecv), the slower rank's time. With 2 ranks every
// all-reduce algorithm must carry G = 4N bytes each way (the ring: G/2 in
// reduce-scatter, G/2 in all-gather; recursive doubling: G in one
// exchange), so the exchange is the all-reduce's own floor on this link,
// and its rate per direction is the bandwidth the model's ring term needs.
//
// Prints one line of key=value (rank 0), medians in ms:
//   link_allreduce floats=N bytes=B iters=K allreduce_ms=.. allreduce_min_ms=..
//     allreduce_max_ms=.. latency_us=.. p2p_ms=.. p2p_gbit=.. exchange_ms=.. exchange_gbit=..
//     all=ms,ms,...
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n) {   // sorts x
    qsort(x, n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

int main(int argc, char **argv) {
    long floats = 0;
    enum { P2P_ITERS = 3 };   // timed messages of the one-way and the exchange measurements, after one untimed
    int iters = 10, warmup = 2, pings = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--floats") && i + 1 < argc) floats = atol(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pings") && i + 1 < argc) pings = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: mpirun -np 2 %s --floats N [--iters K] [--warmup W] [--pings P]\n", argv[0]);
            return 2;
        }
    }
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (floats <= 0 || floats >= (1L << 30) || iters < 1 || warmup < 0 || pings < 1 || size < 2) {
        if (rank == 0) fprintf(stderr, "link_allreduce: need --floats in 1..2^30-1, --iters >= 1 and >= 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    float *buf = malloc((size_t)floats * sizeof *buf), *other = malloc((size_t)floats * sizeof *other);
    double *t = malloc((size_t)(iters > pings ? iters : pings) * sizeof *t);
    if (!buf || !other || !t) {
        fprintf(stderr, "link_allreduce: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < floats; i++) buf[i] = 1e-3f * (float)((i + rank) % 1000);

    // Small-message latency: 4-byte ping-pong between ranks 0 and 1.
    int ping = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < pings + 10; i++) {
        double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(&ping, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&ping, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(&ping, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&ping, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        }
        if (i >= 10) t[i - 10] = 0.5 * (MPI_Wtime() - t0);
    }
    double latency = rank == 0 ? median(t, pings) : 0.0;

    // One-way bandwidth: rank 0 sends the whole buffer, rank 1 answers with 4 bytes.
    double p2p[P2P_ITERS];
    for (int i = 0; i < P2P_ITERS + 1; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, (int)floats, MPI_FLOAT, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(&ping, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, (int)floats, MPI_FLOAT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&ping, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
        }
        if (i > 0) p2p[i - 1] = MPI_Wtime() - t0 - latency;   // less the 4-byte answer
    }
    double p2p_s = rank == 0 ? median(p2p, P2P_ITERS) : 0.0;

    // Exchange: ranks 0 and 1 each send their buffer to the other at once.
    double exch[P2P_ITERS];
    for (int i = 0; i < P2P_ITERS + 1; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime(), mine = 0.0, slowest = 0.0;
        if (rank < 2)
            MPI_Sendrecv(buf, (int)floats, MPI_FLOAT, 1 - rank, 3, other, (int)floats, MPI_FLOAT, 1 - rank, 3,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        mine = MPI_Wtime() - t0;
        MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (i > 0) exch[i - 1] = slowest;
    }
    double exch_s = rank == 0 ? median(exch, P2P_ITERS) : 0.0;

    // The all-reduce, as dist_grads_sum calls it.
    for (int i = 0; i < warmup + iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double mine = MPI_Wtime() - t0, slowest;
        MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (i >= warmup) t[i - warmup] = slowest;   // (the values double each time: no matter for the timing)
    }
    if (rank == 0) {
        printf("link_allreduce floats=%ld bytes=%ld iters=%d", floats, floats * 4, iters);
        char all[4096] = "";
        size_t len = 0;
        for (int i = 0; i < iters && len + 16 < sizeof all; i++)
            len += (size_t)snprintf(all + len, sizeof all - len, "%s%.3f", i ? "," : "", 1e3 * t[i]);
        double lo = t[0], hi = t[0];
        for (int i = 1; i < iters; i++) {
            if (t[i] < lo) lo = t[i];
            if (t[i] > hi) hi = t[i];
        }
        double med = median(t, iters);
        printf(" allreduce_ms=%.3f allreduce_min_ms=%.3f allreduce_max_ms=%.3f latency_us=%.1f p2p_ms=%.3f "
               "p2p_gbit=%.3f exchange_ms=%.3f exchange_gbit=%.3f all=%s\n",
               1e3 * med, 1e3 * lo, 1e3 * hi, 1e6 * latency, 1e3 * p2p_s, 8.0 * floats * 4 / p2p_s / 1e9,
               1e3 * exch_s, 8.0 * floats * 4 / exch_s / 1e9, all);
    }
    free(buf);
    free(other);
    free(t);
    MPI_Finalize();
    return 0;
}
