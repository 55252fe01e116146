// dist.c: data-parallel training over MPI (see dist.h). One process-wide
// state (MPI itself is one per process). Every call is a no-op for a world
// of one process, so code paths of a plain ./train do not change.
#include "train/dist.h"

#include <limits.h>
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

static struct {
    int launched;           // MPI_Init_thread was called
    int rank, size, local_size;
    double seconds;         // in the gradient all-reduce of the last step
    char warning[256];
} D = {.rank = 0, .size = 1, .local_size = 1};

// Large buffers go to MPI in pieces of at most this many elements (counts are int).
#define DIST_CHUNK ((size_t)1 << 30)

int dist_init(int *argc, char ***argv, char *err, size_t errlen) {
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK")) return 0;   // a plain run
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Init_thread failed (launched by mpirun, but the MPI runtime did not start)");
        return -1;
    }
    D.launched = 1;
    // Errors in MPI calls end the job (MPI's default, said here so nobody turns it off).
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_rank(MPI_COMM_WORLD, &D.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &D.size);
    MPI_Comm local;   // the ranks sharing this machine's memory
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &D.local_size);
    MPI_Comm_free(&local);
    if (provided < MPI_THREAD_FUNNELED) {   // the main thread is the one that called MPI_Init: nothing more is needed
        snprintf(err, errlen, "MPI provides thread level %d, ./train needs MPI_THREAD_FUNNELED", provided);
        return -1;
    }
    return 0;
}

void dist_finalize(void) {
    if (D.launched) MPI_Finalize();
    D.launched = 0;
}

int dist_launched(void) { return D.launched; }
int dist_rank(void) { return D.rank; }
int dist_size(void) { return D.size; }
int dist_local_size(void) { return D.local_size; }

int dist_default_threads(void) {
    if (!D.launched) return 0;
    int n = omp_get_num_procs() / D.local_size;   // omp_get_num_procs counts the CPUs this process may use
    return n > 0 ? n : 1;
}

const char *dist_binding_warning(int threads) {
    if (!D.launched || threads <= omp_get_num_procs()) return NULL;
    snprintf(D.warning, sizeof D.warning,
             "rank %d: %d threads but %d CPU(s) to run on (mpirun binds each process to one core by "
             "default); give mpirun --bind-to none, or --map-by slot:PE=%d", D.rank, threads,
             omp_get_num_procs(), threads);
    return D.warning;
}

int dist_agree(int status) { return dist_max_int(status); }

// n elements of `size` bytes at x, in place: op across ranks (bcast: rank 0's
// to every rank), DIST_CHUNK elements per call (MPI counts are ints).
typedef enum { BCAST, ALLREDUCE } Collective;
static void collective(Collective what, void *x, size_t n, size_t size, MPI_Datatype type, MPI_Op op) {
    if (D.size == 1) return;
    for (size_t off = 0; off < n; off += DIST_CHUNK) {
        int k = (int)(n - off < DIST_CHUNK ? n - off : DIST_CHUNK);
        void *at = (char *)x + off * size;
        if (what == BCAST) MPI_Bcast(at, k, type, 0, MPI_COMM_WORLD);
        else MPI_Allreduce(MPI_IN_PLACE, at, k, type, op, MPI_COMM_WORLD);
    }
}

int dist_max_int(int x) {
    collective(ALLREDUCE, &x, 1, sizeof x, MPI_INT, MPI_MAX);
    return x;
}

void dist_bcast(void *buf, size_t bytes) { collective(BCAST, buf, bytes, 1, MPI_BYTE, MPI_OP_NULL); }

_Noreturn void dist_abort(int status) {
    fflush(stderr);
    if (D.launched) MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

double dist_sum_double(double x) {
    collective(ALLREDUCE, &x, 1, sizeof x, MPI_DOUBLE, MPI_SUM);
    return x;
}

void dist_sum_floats(float *x, size_t n) { collective(ALLREDUCE, x, n, sizeof *x, MPI_FLOAT, MPI_SUM); }

void dist_gather_ints(const int *mine, int *all, size_t n) {
    if (D.size == 1) {
        memcpy(all, mine, n * sizeof *mine);
        return;
    }
    MPI_Gather(mine, (int)n, MPI_INT, all, (int)n, MPI_INT, 0, MPI_COMM_WORLD);
}

// Words of 64 bits (two floats) mixed one at a time: h = (h ^ w) * odd
// constant, then a final avalanche (splitmix64's). Any single flipped bit
// changes h. About 1 ns per word: a few ms for millions of parameters.
uint64_t dist_hash_floats(const float *x, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
        uint64_t w;
        memcpy(&w, x + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    if (i < n) {
        uint32_t w;
        memcpy(&w, x + i, 4);
        h = (h ^ w) * 0x100000001b3ull;
    }
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

// One all-reduce with MPI_MAX of (h, ~h) gives max(h) and ~min(h).
int dist_same_hash(uint64_t h, uint64_t *lo, uint64_t *hi) {
    *lo = *hi = h;
    if (D.size == 1) return 0;
    uint64_t in[2] = {h, ~h}, out[2];
    MPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    *hi = out[0];
    *lo = ~out[1];
    return *lo == *hi ? 0 : -1;
}

// One MPI_Allreduce over the whole buffer, after the step's last backward.
// (An MPI_Iallreduce per layer, started as backward finished each one, was
// measured to gain nothing: Open MPI moves a non-blocking collective on only
// inside MPI calls; docs/TRAINING.md.)
void dist_grads_sum(float *grads, size_t n) {
    D.seconds = 0.0;
    if (D.size == 1) return;
    double t0 = clock_seconds();
    dist_sum_floats(grads, n);
    D.seconds = clock_seconds() - t0;
}

double dist_grads_seconds(void) { return D.seconds; }
