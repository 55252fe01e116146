// dist.c: data-parallel training over MPI, or one process (see dist.h). One
// process-wide state (MPI itself is one per process).
//
// Every MPI call is in the transport section below, compiled with Open MPI
// when the Makefile defines ROPELAB_MPI (it does where mpicc is found: make
// MPI=1) and as a refusal to start under a launcher otherwise. The rest of
// the file is the same in both builds and calls the transport only with
// several processes (D.size > 1), so a plain run takes the same path through
// it in either build: the same bits.
#include "train/dist.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

static struct {
    int launched;                // MPI_Init_thread was called
    int rank, size, local_size;  // local_size: the processes on this machine
    double grads_seconds;        // in the gradient all-reduce of the last step
    int steps_done, timed_steps; // dist_step_done's calls, and those counted
    double comm_seconds, step_seconds;   // over the counted steps
    char warning[256], launcher[32];
} D = {.rank = 0, .size = 1, .local_size = 1};

// The elements and reductions the transport moves.
typedef enum { T_INT, T_FLOAT, T_DOUBLE, T_U64 } ElemType;
typedef enum { OP_SUM, OP_MAX } ReduceOp;

// ---- the transport ----------------------------------------------------------

#ifdef ROPELAB_MPI
#include <mpi.h>

// Large buffers go to MPI in pieces of at most this many elements (counts are int).
#define DIST_CHUNK ((size_t)1 << 30)

// Started by a launcher (named by `by`, its environment variable).
static int transport_init(int *argc, char ***argv, const char *by, char *err, size_t errlen) {
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Init_thread failed (%s is set: started by mpirun, but the MPI runtime did not "
                 "start)", by);
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

static void transport_finalize(void) { MPI_Finalize(); }

static void transport_abort(int status) { MPI_Abort(MPI_COMM_WORLD, status); }

static MPI_Datatype mpi_type(ElemType t) {
    return t == T_INT ? MPI_INT : t == T_FLOAT ? MPI_FLOAT : t == T_DOUBLE ? MPI_DOUBLE : MPI_UINT64_T;
}

// n elements at x, in place: op across processes, the result on every one.
static void transport_allreduce(void *x, size_t n, ElemType t, ReduceOp op) {
    static const size_t elem_size[] = {sizeof(int), sizeof(float), sizeof(double), sizeof(uint64_t)};
    for (size_t off = 0; off < n; off += DIST_CHUNK) {
        int k = (int)(n - off < DIST_CHUNK ? n - off : DIST_CHUNK);
        MPI_Allreduce(MPI_IN_PLACE, (char *)x + off * elem_size[t], k, mpi_type(t), op == OP_SUM ? MPI_SUM : MPI_MAX,
                      MPI_COMM_WORLD);
    }
}

// Rank 0's bytes at x to every process.
static void transport_bcast(void *x, size_t bytes) {
    for (size_t off = 0; off < bytes; off += DIST_CHUNK) {
        int k = (int)(bytes - off < DIST_CHUNK ? bytes - off : DIST_CHUNK);
        MPI_Bcast((char *)x + off, k, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
}

// Rank r's n ints to all[r*n ..] on rank 0 (all is unused elsewhere).
static void transport_gather_ints(const int *mine, int *all, size_t n) {
    MPI_Gather(mine, (int)n, MPI_INT, all, (int)n, MPI_INT, 0, MPI_COMM_WORLD);
}

void dist_print_help(FILE *f) {
    fprintf(f, "\nseveral processes: mpirun -np N ./train ... trains one model data-parallel on N processes\n"
            "(docs/TRAINING.md, \"Several processes\"). MPI: Open MPI %d.%d.%d\n",
            OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
}

#else  // built without MPI: one process, always

// A launcher's N processes would each train their own copy of the model
// alone, all in the same run directory: refused.
static int transport_init(int *argc, char ***argv, const char *by, char *err, size_t errlen) {
    snprintf(err, errlen, "started by an MPI launcher (%s=%s), but this ./train was built without MPI (MPI: not "
             "built): each process would train a copy alone. Run it without mpirun, or install Open MPI "
             "(sudo apt-get install -y openmpi-bin libopenmpi-dev) and build ./train again (make)",
             by, getenv(by));
    return -1;
}

// Never called: alone, nothing is sent.
static void transport_finalize(void) {}
static void transport_abort(int status) {}
static void transport_allreduce(void *x, size_t n, ElemType t, ReduceOp op) {}
static void transport_bcast(void *x, size_t bytes) {}
static void transport_gather_ints(const int *mine, int *all, size_t n) {}

void dist_print_help(FILE *f) {
    fprintf(f, "\nseveral processes: MPI: not built. This ./train trains in one process and refuses\n"
            "to start under mpirun; for mpirun -np N ./train, install Open MPI (openmpi-bin\n"
            "libopenmpi-dev) and build again (make; docs/TRAINING.md, \"Several processes\").\n");
}

#endif

// ---- starting and stopping ---------------------------------------------------

int dist_init(int *argc, char ***argv, char *err, size_t errlen) {
    const char *by = getenv("OMPI_COMM_WORLD_SIZE") ? "OMPI_COMM_WORLD_SIZE" : getenv("PMIX_RANK") ? "PMIX_RANK" : NULL;
    if (!by) return 0;   // a plain run: no MPI runtime (dist.h)
    return transport_init(argc, argv, by, err, errlen);
}

void dist_finalize(void) {
    if (D.launched) transport_finalize();
    D.launched = 0;
}

// Ends every process at once (MPI_Abort), or this one alone.
static _Noreturn void dist_abort(int status) {
    fflush(stderr);
    if (D.launched) transport_abort(status);
    exit(status);
}

void dist_local_failure(void) {
    if (D.size > 1) dist_abort(1);
}

// ---- who this process is -----------------------------------------------------

int dist_launched(void) { return D.launched; }
int dist_rank(void) { return D.rank; }
int dist_size(void) { return D.size; }
int dist_is_main_process(void) { return D.rank == 0; }
int dist_is_last_process(void) { return D.rank == D.size - 1; }
int dist_processes_on_this_machine(void) { return D.local_size; }
int dist_is_mine(int k) { return k % D.size == D.rank; }

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

// ---- agreeing ------------------------------------------------------------------

int dist_agree(int x) {
    if (D.size > 1) transport_allreduce(&x, 1, T_INT, OP_MAX);
    return x;
}

void dist_bcast(void *buf, size_t bytes) {
    if (D.size > 1) transport_bcast(buf, bytes);
}

// ---- the data-parallel maths -----------------------------------------------------

float dist_grad_scale(int micro_batches) { return 1.0f / (micro_batches * D.size); }

double dist_mean(double x, int count) {
    if (D.size > 1) transport_allreduce(&x, 1, T_DOUBLE, OP_SUM);
    return x / ((double)count * D.size);
}

void dist_sum_floats(float *x, size_t n) {
    if (D.size > 1) transport_allreduce(x, n, T_FLOAT, OP_SUM);
}

// One MPI_Allreduce over the whole buffer, after the step's last backward.
// (An MPI_Iallreduce per layer, started as backward finished each one, was
// measured to gain nothing: Open MPI moves a non-blocking collective on only
// inside MPI calls; docs/TRAINING.md.)
void dist_grads_sum(float *grads, size_t n) {
    D.grads_seconds = 0.0;
    if (D.size == 1) return;
    double t0 = clock_seconds();
    dist_sum_floats(grads, n);
    D.grads_seconds = clock_seconds() - t0;
}

int *dist_gather_on_main(const int *mine, size_t n) {
    int *all = NULL;
    if (D.rank == 0 && !(all = malloc((size_t)D.size * n * sizeof *all))) {
        fprintf(stderr, "out of memory for %d x %zu gathered ints\n", D.size, n);
        dist_abort(1);
    }
    if (D.size == 1) memcpy(all, mine, n * sizeof *mine);
    else transport_gather_ints(mine, all, n);
    return all;
}

// 64-bit hash of n floats' bits (order-sensitive, every bit counts): words of
// 64 bits (two floats) mixed one at a time, h = (h ^ w) * odd constant, then a
// final avalanche (splitmix64's). Any single flipped bit changes h. About
// 1 ns per word: a few ms for millions of parameters.
static uint64_t hash_floats(const float *x, size_t n) {
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

// One all-reduce with MAX of (h, ~h) gives the largest h and ~(the smallest).
int dist_same_weights(const float *w, size_t n, char *err, size_t errlen) {
    if (D.size == 1) return 0;
    uint64_t h = hash_floats(w, n), hashes[2] = {h, ~h};
    transport_allreduce(hashes, 2, T_U64, OP_MAX);
    uint64_t hi = hashes[0], lo = ~hashes[1];
    if (lo == hi) return 0;
    snprintf(err, errlen, "the weights of the %d processes differ (parameter hashes %016llx .. %016llx)", D.size,
             (unsigned long long)lo, (unsigned long long)hi);
    return -1;
}

// ---- what the run prints ---------------------------------------------------------

void dist_print_setup(FILE *f, int batch_size, int grad_accum) {
    if (D.size == 1) return;
    fprintf(f, "mpi: %d processes x %d threads; global batch %d x %d x %d sequences "
            "(processes x batch_size x grad_accum); gradients summed by one all-reduce per step\n", D.size,
            omp_get_max_threads(), D.size, batch_size, grad_accum);
}

void dist_step_done(double step_seconds) {
    if (++D.steps_done <= 2) return;
    D.comm_seconds += D.grads_seconds;
    D.step_seconds += step_seconds;
    D.timed_steps++;
}

void dist_print_summary(FILE *f) {
    if (D.size == 1 || D.timed_steps == 0) return;
    fprintf(f, "mpi: %d processes, gradient all-reduce %.2f ms per step = %.1f%% of the step "
            "(%.1f ms; mean of the %d steps after the first 2)\n", D.size, 1e3 * D.comm_seconds / D.timed_steps,
            100.0 * D.comm_seconds / D.step_seconds, 1e3 * D.step_seconds / D.timed_steps, D.timed_steps);
}

const char *dist_launcher(void) {
    if (D.size == 1) return "";
    snprintf(D.launcher, sizeof D.launcher, "mpirun -np %d ", D.size);
    return D.launcher;
}
