// dist.h: data-parallel training over MPI (`mpirun -np N ./train ...`), and
// the same calls for one process.
//
// N processes ("ranks") hold the same weights. Each step every process runs
// forward and backward on its own share of the global batch; the gradients
// are summed across processes with an all-reduce (each backward is scaled
// by 1/N, so the sum is the mean), and every process applies the same AdamW
// update to the same weights. The main process (rank 0) alone reads and
// writes the run's files and prints. The semantics are in docs/TRAINING.md,
// "Several processes (MPI)".
//
// Alone (a world of one process, rank 0 of 1) every call here is what one
// process does: a sum across processes is the value itself, the main process
// is this one, nothing is sent. That is a plain ./train (MPI is initialised
// only when an MPI launcher started the program: OMPI_COMM_WORLD_SIZE or
// PMIX_RANK in the environment; MPI_Init as a "singleton" costs about 0.4 s
// and needs the runtime's shared memory and sockets), and every run of a
// ./train built without MPI (make MPI=0, or no mpicc at build time): that
// build refuses to start under a launcher, whose N processes would each train
// a copy alone.
//
// Failures: errors that only some processes can see (a file missing on one
// machine, a checkpoint that the main process cannot write) are agreed with
// dist_agree before the next collective call, so every process stops with
// the same status; an error in the middle of a step that cannot be agreed
// ends every process at once (dist_local_failure: MPI_Abort, mpirun kills
// every rank). A process that dies makes mpirun kill the others (mpirun's
// default).
#ifndef ROPELAB_TRAIN_DIST_H
#define ROPELAB_TRAIN_DIST_H

#include <stddef.h>
#include <stdio.h>

// Exit status when the processes' weights differ (the periodic check).
#define DIST_EDRIFT 4

// ---- starting and stopping ----
// Started by an MPI launcher: MPI_Init_thread (funneled: only the main thread
// calls MPI, between OpenMP regions), or, built without MPI, a refusal.
// Otherwise nothing. 0, or -1 with a message.
int dist_init(int *argc, char ***argv, char *err, size_t errlen);
void dist_finalize(void);
// What this build does under mpirun, a few lines for ./train --help
// (with Open MPI, or "MPI: not built").
void dist_print_help(FILE *f);

// ---- who this process is ----
int dist_launched(void);           // MPI was initialised (started by mpirun, any N)
int dist_rank(void);               // 0 alone
int dist_size(void);               // N, the processes that train together (1 alone)
int dist_is_main_process(void);    // rank 0: reads and writes the run's files, prints
int dist_is_last_process(void);    // rank N-1 (the test hooks' other process; alone: this one)
int dist_processes_on_this_machine(void);   // share its memory and cores (1 alone)
// Whether item k of a list dealt round-robin is this process's (k mod N is
// its rank; alone, every k).
int dist_is_mine(int k);

// The threads a process uses for `threads = 0` ("all cores"): the CPUs this
// process may run on, shared by the processes on this machine (at least 1).
// Alone: 0 (threads_set then takes every core, as always).
int dist_default_threads(void);
// A one-line warning when `threads` exceeds the CPUs this process may run
// on (mpirun binds each rank to one core by default), else NULL.
const char *dist_binding_warning(int threads);

// ---- agreeing ----
// The largest x over the processes: a collective call every process must
// reach. For statuses (0 = every process is fine, so all stop together with
// the worst) and the stop signal (one caught by any process stops all).
int dist_agree(int x);
// The main process's bytes to every process.
void dist_bcast(void *buf, size_t bytes);
// An error this process alone sees while the others wait for it in a
// collective call: with several processes they cannot be told, so every
// process ends here at once (MPI_Abort, exit status 1); alone it returns, and
// the caller goes on with the error.
void dist_local_failure(void);

// ---- the data-parallel maths ----
// The scale of each backward so that the gradients summed over
// `micro_batches` micro-batches and over the processes are the gradient of
// the mean loss: 1/(micro_batches N).
float dist_grad_scale(int micro_batches);
// The mean of the processes' sums x of `count` values each: the sum of x
// over the processes / (count N), in double.
double dist_mean(double x, int count);
// Sums across processes in place, the result on every process.
void dist_sum_floats(float *x, size_t n);
// The gradient all-reduce: one MPI_Allreduce over the flat buffer after the
// step's last backward, leaving the sum on every process (nothing alone);
// its time goes into the summary (dist_step_done).
void dist_grads_sum(float *grads, size_t n);
// Every process's n ints in a new array on the main process (rank r's at
// r*n .. r*n+n-1), NULL on the others; free it. Out of memory: a message and
// every process ends (exit status 1).
int *dist_gather_on_main(const int *mine, size_t n);
// Whether the n weights are bit for bit the same on every process (a hash of
// their bits, compared): 0 if so (always alone); -1 with "the weights of the
// N processes differ (parameter hashes ...)" in err otherwise.
int dist_same_weights(const float *w, size_t n, char *err, size_t errlen);

// ---- what the run prints (nothing alone) ----
// "mpi: N processes x T threads; global batch ..." at the start.
void dist_print_setup(FILE *f, int batch_size, int grad_accum);
// A step of step_seconds has finished: past the first 2 (warm-up), it and
// its gradient all-reduce are counted for dist_print_summary.
void dist_step_done(double step_seconds);
// "mpi: N processes, gradient all-reduce X ms per step = Y% of the step ...".
void dist_print_summary(FILE *f);
// The launcher's part of the command that runs this again: "mpirun -np N ",
// or "" alone.
const char *dist_launcher(void);

#endif
