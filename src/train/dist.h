// dist.h: data-parallel training over MPI (`mpirun -np N ./train ...`).
//
// N processes ("ranks") hold the same weights. Each step every rank runs
// forward and backward on its own share of the global batch; the gradients
// are summed across ranks with an all-reduce (each rank's backward is scaled
// by 1/N, so the sum is the mean), and every rank applies the same AdamW
// update to the same weights. Rank 0 alone writes files. The semantics are in
// docs/TRAINING.md, "Several processes (MPI)".
//
// MPI is initialised only when ./train was launched by an MPI launcher
// (OMPI_COMM_WORLD_SIZE or PMIX_RANK in the environment). A plain ./train
// never starts the MPI runtime: every function here then acts for a world of
// one process (rank 0 of 1) and costs nothing, so a plain run is exactly the
// program it was before MPI existed. (MPI_Init as a "singleton" costs about
// 0.4 s here and needs the runtime's shared memory and sockets.)
//
// Failures: errors that only some ranks can see (a file missing on one
// machine, a checkpoint that rank 0 cannot write) are agreed with
// dist_agree before the next collective call, so every rank stops with the
// same status; an error in the middle of a step that cannot be agreed calls
// dist_abort (MPI_Abort: mpirun kills every rank). A rank that dies makes
// mpirun kill the others (mpirun's default).
#ifndef ROPELAB_TRAIN_DIST_H
#define ROPELAB_TRAIN_DIST_H

#include <stddef.h>
#include <stdint.h>

// Exit status when the ranks' weights differ (the periodic check).
#define DIST_EDRIFT 4

// MPI_Init_thread (funneled: only the main thread calls MPI, between
// OpenMP regions) when launched by mpirun; nothing otherwise. 0, or -1 with
// a message.
int dist_init(int *argc, char ***argv, char *err, size_t errlen);
void dist_finalize(void);
int dist_launched(void);    // MPI was initialised (launched by mpirun, any N)
int dist_rank(void);        // 0 without MPI
int dist_size(void);        // 1 without MPI
int dist_local_size(void);  // ranks on this machine (1 without MPI)

// The threads a rank uses for `threads = 0` ("all cores"): the CPUs this
// process may run on, shared by the ranks on this machine (at least 1).
// Without MPI: 0 (threads_set then takes every core, as always).
int dist_default_threads(void);
// A one-line warning when `threads` exceeds the CPUs this process may run
// on (mpirun binds each rank to one core by default), else NULL.
const char *dist_binding_warning(int threads);

// The largest status over the ranks (0 = every rank is fine): a collective
// call that every rank must reach.
int dist_agree(int status);
// Rank 0's bytes to every rank.
void dist_bcast(void *buf, size_t bytes);
// Ends every rank at once (MPI_Abort, or exit without MPI).
_Noreturn void dist_abort(int status);

// Sums across ranks, the result on every rank.
double dist_sum_double(double x);
void dist_sum_floats(float *x, size_t n);
// The largest value of x over the ranks.
int dist_max_int(int x);
// Rank r's n ints to all[r*n .. r*n+n-1] on rank 0 (all is unused elsewhere).
void dist_gather_ints(const int *mine, int *all, size_t n);

// 64-bit hash of n floats' bits (order-sensitive, every bit counts).
uint64_t dist_hash_floats(const float *x, size_t n);
// Whether h is the same on every rank: 0 if so; -1 with the smallest and
// largest value otherwise.
int dist_same_hash(uint64_t h, uint64_t *lo, uint64_t *hi);

// The gradient all-reduce: one MPI_Allreduce over the flat buffer after
// the step's last backward, leaving the sum on every rank (nothing without
// MPI or with one rank); dist_grads_seconds is the time it took.
void dist_grads_sum(float *grads, size_t n);
double dist_grads_seconds(void);

#endif
