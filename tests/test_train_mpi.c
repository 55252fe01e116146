// test_train_mpi.c: data-parallel ./train under mpirun (docs/TRAINING.md,
// "Several processes (MPI)"), end to end on a small corpus the test writes
// and tokenises with ./prepare (as tests/test_train_run.c does):
//   - np=1 under mpirun is a plain run: the same log and the same weights file;
//   - one step of np=2 with batch b is one step of np=1 with batch 2b on the
//     same windows: same inputs, same loss and gradients up to float sums;
//     the validation loss is that of one process with the same batch_size;
//   - np=2 interrupted (SIGINT on one rank only) and resumed logs exactly what
//     a straight np=2 run logs; a resume with another world size is refused;
//   - kill -9 of one rank ends the job with an error within seconds, the
//     last checkpoint loads, and the run resumes; SIGUSR1 to mpirun stops
//     every rank with a checkpoint;
//   - an error only rank 0 sees (the run directory locked by someone else, a
//     crash in the middle of a checkpoint save) stops every rank at once;
//   - matmul = auto: every rank runs rank 0's choice, whatever its own times;
//   - the weights stay identical on every rank (the check at every
//     evaluation passes in every run here), and one flipped bit on one rank
//     stops the run with exit status 4.
// Needs mpirun (Debian: openmpi-bin) and ./train built with Open MPI; without
// them the test fails with the apt line or says ./train has no MPI (`make
// test` installs Open MPI first as root, then builds with it). Run from the
// repository root with ./train, its test build (TRAIN_WITH_FAULTS, for the
// interruption, the crash and the perturbed weight) and ./prepare built.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/rng.h"
#include "model/gpt.h"
#include "format/safetensors.h"
#include "format/weights_file.h"
#include "util_run.h"

// Every mpirun here: root is allowed (CI containers), more ranks than cores
// are allowed, no binding (2 threads per rank must not share one core), and
// a hard time limit, so a hang fails the test instead of stalling the suite.
#define MPIRUN "timeout -k 5 300 mpirun --allow-run-as-root --oversubscribe --bind-to none"

static int setup(void **state) {
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        fprintf(stderr, "mpirun not found: the MPI tests need OpenMPI; run\n"
                "  sudo apt-get update && sudo apt-get install -y openmpi-bin libopenmpi-dev\n"
                "(make test does it first when run as root)\n");
        return -1;
    }
    // ./train built without MPI (make MPI=0, or no mpicc when it was built) refuses mpirun.
    if (system("./train --help | grep -q 'MPI: not built'") == 0) {
        fprintf(stderr, "./train was built without MPI (its --help says \"MPI: not built\"): build it with Open MPI "
                "(make, with mpicc installed)\n");
        return -1;
    }
    return make_data_dir("mpi");
}


// A metadata value of a checkpoint (NULL if absent), copied into buf.
static const char *checkpoint_meta(const char *run_dir, const char *key, char *buf, size_t n) {
    char path[600], err[512];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", run_dir);
    StFile *f;
    if (st_open(&f, path, err, sizeof err) != 0) fail_msg("%s", err);
    const char *v = st_meta(f, key);
    if (v) snprintf(buf, n, "%s", v);
    st_close(f);
    return v ? buf : NULL;
}

static long long checkpoint_step(const char *run_dir) {
    char buf[64];
    assert_non_null(checkpoint_meta(run_dir, "step", buf, sizeof buf));
    return atoll(buf);
}

// ---- np=1 under mpirun is a plain run ---------------------------------------

static void test_np1_under_mpirun_is_a_plain_run(void **state) {
    static char a[100][160], b[100][160];
    char plain[512], mpi[512], pa[600], pb[600];
    snprintf(plain, sizeof plain, "%s/np1-plain", dir);
    snprintf(mpi, sizeof mpi, "%s/np1-mpi", dir);
    int rc = run("./train configs/tiny.ini %s --threads=2 --steps=20 --out_dir=%s --quiet", pinned_args, plain);
    if (rc != 0) fail_msg("plain: exit %d: %s", rc, out);
    rc = run(MPIRUN " -np 1 ./train configs/tiny.ini %s --threads=2 --steps=20 --out_dir=%s --quiet", pinned_args, mpi);
    if (rc != 0) fail_msg("np=1: exit %d: %s", rc, out);
    assert_same_rows(a, read_log(plain, a, 100), b, read_log(mpi, b, 100));
    snprintf(pa, sizeof pa, "%s/model.safetensors", plain);
    snprintf(pb, sizeof pb, "%s/model.safetensors", mpi);
    assert_true(files_equal(pa, pb));
    char buf[16];
    assert_null(checkpoint_meta(mpi, "world_size", buf, sizeof buf));   // the single-process checkpoint
}

// ---- one step of np=2 with batch b = one step of np=1 with batch 2b --------

static const StTensor *tensor(const StFile *f, const char *name) {
    const StTensor *t = st_find(f, name);
    if (!t) fail_msg("debug state: no tensor %s", name);
    return t;
}

// Float k of an F32 tensor (the data may be unaligned in the file).
static float f32_at(const StTensor *t, size_t k) {
    float v;
    memcpy(&v, (const char *)t->data + 4 * k, 4);
    return v;
}

// Tolerance of the gradients: every entry within 1e-5 of its tensor's
// largest magnitude. Each gradient entry is a sum over the B*T positions of
// the batch; np=2 sums each half on its rank and adds the two halves (and
// the engine, OpenBLAS or oneDNN, blocks the products of a 4-row batch
// differently from an 8-row one), so the float sums are grouped differently. A float sum of n terms in
// any order is within (n-1) u sum|x_i| of the exact one (u = 2^-24 = 6e-8);
// the observed difference is ~6e-7 of the tensor's largest entry (the terms
// cancel, so it is not small against each entry, only against the tensor's
// scale), and 1e-5 leaves a margin of 16x while a wrong shard, a missing
// 1/N or a gradient of one rank only would be off by 10% or more.
static void test_np2_step_equals_np1_double_batch(void **state) {
    char one[600], two[600], err[512];
    snprintf(one, sizeof one, "%s/debug-np1.safetensors", dir);
    snprintf(two, sizeof two, "%s/debug-np2.safetensors", dir);
    int rc = run("./train configs/tiny.ini %s --threads=1 --batch_size=8 --debug-state %s --quiet", data_args, one);
    if (rc != 0) fail_msg("np=1: exit %d: %s", rc, out);
    rc = run(MPIRUN " -np 2 ./train configs/tiny.ini %s --threads=1 --batch_size=4 --debug-state %s --quiet",
             data_args, two);
    if (rc != 0) fail_msg("np=2: exit %d: %s", rc, out);
    StFile *a, *b;
    if (st_open(&a, one, err, sizeof err) != 0 || st_open(&b, two, err, sizeof err) != 0) fail_msg("%s", err);
    const StTensor *ia = tensor(a, "inputs"), *ib = tensor(b, "inputs");
    assert_int_equal(ib->shape[0], 8);                      // rank 0 gathered both ranks' 4 windows
    assert_int_equal(ia->nbytes, ib->nbytes);
    assert_memory_equal(ia->data, ib->data, ia->nbytes);    // the same windows, in the same order
    assert_memory_equal(tensor(a, "targets")->data, tensor(b, "targets")->data, ia->nbytes);
    float la = f32_at(tensor(a, "loss"), 0), lb = f32_at(tensor(b, "loss"), 0);
    printf("  loss np=1 batch 8: %.7f, np=2 batch 4: %.7f\n", la, lb);
    assert_true(fabsf(la - lb) <= 1e-6f * fabsf(la));       // the mean of the halves' means, summed in double
    int checked = 0;
    double worst = 0.0;
    for (int i = 0; i < st_num_tensors(a); i++) {
        const StTensor *ga = st_tensor_at(a, i);
        if (strncmp(ga->name, "grad.", 5) != 0) continue;
        const StTensor *gb = tensor(b, ga->name);
        assert_int_equal(ga->nbytes, gb->nbytes);
        size_t n = ga->nbytes / 4;
        float scale = 0.0f, diff = 0.0f;
        for (size_t k = 0; k < n; k++) {
            float x = f32_at(ga, k), y = f32_at(gb, k);
            if (fabsf(x) > scale) scale = fabsf(x);
            if (fabsf(x - y) > diff) diff = fabsf(x - y);
        }
        if (diff > 1e-5f * scale) fail_msg("%s: max |difference| %g, largest entry %g", ga->name, diff, scale);
        if (scale > 0 && diff / scale > worst) worst = diff / scale;
        checked++;
    }
    printf("  %d gradient tensors, largest difference %.2e of the tensor's largest entry (tolerance 1e-5)\n",
           checked, worst);
    assert_true(checked > 10);
    st_close(a);
    st_close(b);

    // Validation: rank r evaluates batches r, r+2, ...; the logged loss is
    // the single process's with the same batch_size, bit for bit (row 0:
    // the same initial weights).
    static char ra[10][160], rb[10][160];
    char d1[512], d2[512];
    snprintf(d1, sizeof d1, "%s/val-np1", dir);
    snprintf(d2, sizeof d2, "%s/val-np2", dir);
    rc = run("./train configs/tiny.ini %s --threads=1 --steps=1 --eval_batches=5 --out_dir=%s --quiet", pinned_args, d1);
    if (rc != 0) fail_msg("np=1: exit %d: %s", rc, out);
    rc = run(MPIRUN " -np 2 ./train configs/tiny.ini %s --threads=1 --steps=1 --eval_batches=5 --out_dir=%s --quiet",
             pinned_args, d2);
    if (rc != 0) fail_msg("np=2: exit %d: %s", rc, out);
    assert_true(read_log(d1, ra, 10) >= 1 && read_log(d2, rb, 10) >= 1);
    assert_string_equal(ra[0], rb[0]);
}

// ---- exact resume under np=2 ------------------------------------------------

// The reference: 40 straight steps of t5 with 2 ranks, evaluations every 10 steps.
#define RUN_ARGS "configs/tiny.ini %s --threads=1 --pos=t5 --steps=40 --eval_every=10 --save_every=10"

static int straight_rows(char rows[][160]) {
    static int done = 0;
    char run_dir[512];
    snprintf(run_dir, sizeof run_dir, "%s/straight", dir);
    if (!done) {
        int rc = run(MPIRUN " -np 2 ./train " RUN_ARGS " --out_dir=%s --quiet", pinned_args, run_dir);
        if (rc != 0) fail_msg("straight np=2: exit %d: %s", rc, out);
        done = 1;
    }
    return read_log(run_dir, rows, 100);
}

static void test_np2_interrupt_and_resume_is_exact(void **state) {
    static char ref[100][160], got[100][160];
    int n_ref = straight_rows(ref);
    assert_int_equal(n_ref, 41);
    char run_dir[512], buf[32], a[600], b[600];
    snprintf(run_dir, sizeof run_dir, "%s/interrupted", dir);
    // SIGINT during step 15, on the last rank only: both ranks stop after step 15.
    int rc = run("ROPELAB_TEST_SIGINT_AT_STEP=15 " MPIRUN " -np 2 " TRAIN_WITH_FAULTS " " RUN_ARGS " --out_dir=%s",
                 pinned_args, run_dir);
    assert_int_equal(rc, 130);
    assert_non_null(strstr(out, "stopped by SIGINT after step 15"));
    assert_non_null(strstr(out, "mpirun -np 2 ./train --resume"));
    assert_non_null(strstr(out, "mpi: 2 processes x 1 threads"));
    assert_int_equal(checkpoint_step(run_dir), 15);
    assert_string_equal(checkpoint_meta(run_dir, "world_size", buf, sizeof buf), "2");
    assert_int_equal(read_log(run_dir, got, 100), 16);
    // Another world size is refused, naming both.
    rc = run("./train --resume %s --quiet", run_dir);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "written by a run of 2 processes (world_size), this one has 1"));
    rc = run(MPIRUN " -np 3 ./train --resume %s --quiet", run_dir);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "this one has 3"));
    rc = run(MPIRUN " -np 2 ./train --resume %s --quiet", run_dir);
    if (rc != 0) fail_msg("resume: exit %d: %s", rc, out);
    assert_same_rows(ref, n_ref, got, read_log(run_dir, got, 100));
    snprintf(a, sizeof a, "%s/straight/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/model.safetensors", run_dir);
    assert_true(files_equal(a, b));                       // bit-identical final weights
}

// ---- a rank that dies -------------------------------------------------------

// mpirun PID's child whose environment says OMPI_COMM_WORLD_RANK=rank, or -1.
static pid_t find_rank(pid_t mpirun, int rank) {
    char want[64];
    snprintf(want, sizeof want, "OMPI_COMM_WORLD_RANK=%d", rank);
    DIR *d = opendir("/proc");
    if (!d) return -1;
    struct dirent *e;
    pid_t found = -1;
    while (found < 0 && (e = readdir(d)) != NULL) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0) continue;
        char path[64], stat[512], env[1 << 15];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[n] = 0;
        const char *c = strrchr(stat, ')');   // "pid (comm) state ppid ..."
        int ppid = 0;
        if (!c || sscanf(c + 1, " %*c %d", &ppid) != 1 || ppid != mpirun) continue;
        snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
        if (!(f = fopen(path, "r"))) continue;
        n = fread(env, 1, sizeof env - 1, f);
        fclose(f);
        env[n] = 0;
        for (size_t i = 0; i < n; i += strlen(env + i) + 1)
            if (strcmp(env + i, want) == 0) found = pid;
    }
    closedir(d);
    return found;
}

// Starts `sh -c "exec CMD"` with output to log; returns the pid (of mpirun, after the exec).
static pid_t start(const char *log, const char *fmt, ...) {
    char cmd[4096], full[4200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "exec %s >'%s' 2>&1", cmd, log);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", full, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Waits for pid up to limit seconds; its exit status (128 + signal if killed), or -1 on timeout.
static int wait_for(pid_t pid, double limit, double *took) {
    double t0 = now_s();
    while (now_s() - t0 < limit) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            *took = now_s() - t0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(20000);
    }
    return -1;
}

// Whether pid is a running process (not gone, not a zombie waiting to be reaped).
static int alive(pid_t pid) {
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = 0;
    const char *c = strrchr(stat, ')');
    return c && c[1] == ' ' && c[2] != 'Z' && c[2] != 'X';
}

// The step of the last row of RUN/log.csv (-1 if none yet).
static int last_logged_step(const char *run_dir) {
    static char rows[4000][160];
    char path[600];
    snprintf(path, sizeof path, "%s/log.csv", run_dir);
    if (access(path, F_OK) != 0) return -1;
    int n = read_log(run_dir, rows, 4000);
    return n > 0 ? atoi(rows[n - 1]) : -1;
}

static void test_kill9_of_one_rank_ends_the_job(void **state) {
    static char rows[4000][160];
    char run_dir[512], log[600], err[512], path[600];
    snprintf(run_dir, sizeof run_dir, "%s/killed", dir);
    snprintf(log, sizeof log, "%s/killed.out", dir);
    // No timeout wrapper here: mpirun itself must be the child (its ranks are its children).
    pid_t mpirun = start(log, "mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 ./train "
                         "configs/tiny.ini %s --threads=1 --steps=3000 --save_every=1 --eval_every=100 "
                         "--out_dir=%s --quiet", data_args, run_dir);
    double t0 = now_s();
    // step 6 logged: step 5's checkpoint is written (the kill may land between a step's row and its checkpoint)
    while (last_logged_step(run_dir) < 6 && now_s() - t0 < 120) usleep(50000);
    pid_t rank1 = find_rank(mpirun, 1), rank0 = find_rank(mpirun, 0);
    if (rank1 < 0 || rank0 < 0) {
        kill(mpirun, SIGKILL);
        fail_msg("ranks of mpirun %d not found (rank 0: %d, rank 1: %d)", (int)mpirun, (int)rank0, (int)rank1);
    }
    kill(rank1, SIGKILL);
    double took;
    int rc = wait_for(mpirun, 30, &took);
    if (rc < 0) {
        kill(mpirun, SIGKILL);
        fail_msg("mpirun still running 30 s after kill -9 of rank 1");
    }
    printf("  kill -9 of rank 1: mpirun exited with %d after %.2f s\n", rc, took);
    assert_true(rc != 0);
    assert_true(took < 10.0);
    t0 = now_s();
    while (alive(rank0) && now_s() - t0 < 5) usleep(20000);
    assert_false(alive(rank0));                           // rank 0 is gone too
    // The last checkpoint is whole: it loads as weights, and the run resumes.
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", run_dir);
    GPT *m;
    if (gpt_load(&m, path, 1, err, sizeof err) != 0) fail_msg("%s", err);
    gpt_free(m);
    long long step = checkpoint_step(run_dir);
    printf("  checkpoint at step %lld\n", step);
    assert_true(step >= 5);
    int rc2 = run(MPIRUN " -np 2 ./train --resume %s --steps=%lld --quiet", run_dir, step + 10);
    if (rc2 != 0) fail_msg("resume: exit %d: %s", rc2, out);
    int n = read_log(run_dir, rows, 4000);
    assert_int_equal(n, step + 11);                       // every step exactly once
    for (int i = 0; i < n; i++) assert_int_equal(atoi(rows[i]), i);

    // SIGUSR1 to mpirun reaches every rank (mpirun forwards it): they stop
    // after the same step, with a checkpoint of that step.
    mpirun = start(log, "mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 ./train --resume %s "
                   "--steps=3000 --save_every=0 --eval_every=0", run_dir);
    t0 = now_s();
    while (last_logged_step(run_dir) < step + 15 && now_s() - t0 < 120) usleep(50000);
    kill(mpirun, SIGUSR1);
    rc = wait_for(mpirun, 60, &took);
    if (rc < 0) {
        kill(mpirun, SIGKILL);
        fail_msg("mpirun still running 60 s after SIGUSR1");
    }
    assert_int_equal(rc, 128 + SIGUSR1);
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    size_t got = fread(out, 1, sizeof out - 1, f);
    out[got] = 0;
    fclose(f);
    assert_non_null(strstr(out, "stopped by SIGUSR1 after step"));
    assert_int_equal(checkpoint_step(run_dir), last_logged_step(run_dir));
}

// ---- an error only rank 0 sees ----------------------------------------------

static void test_rank0_errors_stop_every_rank(void **state) {
    static char ref[100][160], got[100][160];
    int n_ref = straight_rows(ref);
    char run_dir[512], lock[600];
    snprintf(run_dir, sizeof run_dir, "%s/locked", dir);
    assert_int_equal(run("mkdir -p %s", run_dir), 0);
    // Someone else holds the run directory's lock: rank 0 cannot take it;
    // rank 1, which never looks at the directory, must not wait forever.
    snprintf(lock, sizeof lock, "%s/train.lock", run_dir);
    int fd = open(lock, O_RDWR | O_CREAT, 0666);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    double t0 = now_s();
    int rc = run(MPIRUN " -np 2 ./train " RUN_ARGS " --out_dir=%s --quiet", pinned_args, run_dir);
    double took = now_s() - t0;
    close(fd);
    printf("  run directory locked: exit %d after %.2f s\n", rc, took);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "in use by another ./train"));
    assert_true(took < 60.0);   // startup of two ranks on a busy machine included

    // Rank 0 dies in the middle of writing the checkpoint of step 20: rank 1
    // goes too, the checkpoint of step 10 stays whole, and the run resumes exactly.
    snprintf(run_dir, sizeof run_dir, "%s/crashed", dir);
    rc = run("ROPELAB_TEST_CRASH_IN_SAVE=20 " MPIRUN " -np 2 " TRAIN_WITH_FAULTS " " RUN_ARGS " --out_dir=%s --quiet",
             pinned_args, run_dir);
    assert_int_equal(rc, 1);
    assert_int_equal(checkpoint_step(run_dir), 10);
    rc = run(MPIRUN " -np 2 ./train --resume %s --quiet", run_dir);
    if (rc != 0) fail_msg("resume: exit %d: %s", rc, out);
    assert_same_rows(ref, n_ref, got, read_log(run_dir, got, 100));
}

// ---- matmul = auto: rank 0's choice on every rank ----------------------------

// Every rank runs matmul = auto's trial, and each rank's own times could
// choose differently: the hook (ROPELAB_TEST_AUTO_MS) makes oneDNN the faster
// on rank 0 and, swapped on the last rank, OpenBLAS there. The run must be
// np=2 with --matmul=onednn named, bit for bit (a rank on OpenBLAS would add
// its half of every gradient in another order).
static void test_np2_auto_takes_rank0s_choice(void **state) {
    static char a[40][160], b[40][160];
    char named[512], measured[512], pa[600], pb[600];
    snprintf(named, sizeof named, "%s/auto-named", dir);
    snprintf(measured, sizeof measured, "%s/auto-measured", dir);
    int rc = run(MPIRUN " -np 2 ./train configs/tiny.ini %s --threads=1 --steps=20 --matmul=onednn --out_dir=%s "
                 "--quiet", data_args, named);
    if (rc != 0) fail_msg("np=2 --matmul=onednn: exit %d: %s", rc, out);
    rc = run("ROPELAB_TEST_AUTO_MS=openblas=2,onednn=1 " MPIRUN " -np 2 " TRAIN_WITH_FAULTS
             " configs/tiny.ini %s --threads=1 --steps=20 --out_dir=%s", data_args, measured);
    if (rc != 0) fail_msg("np=2 auto: exit %d: %s", rc, out);
    assert_non_null(strstr(out, "; matmul = auto: onednn fp32 (measured per forward+backward: onednn 1.00 ms, "
                                "openblas 2.00 ms, as the test hook says)"));
    assert_same_rows(a, read_log(named, a, 40), b, read_log(measured, b, 40));
    snprintf(pa, sizeof pa, "%s/model.safetensors", named);
    snprintf(pb, sizeof pb, "%s/model.safetensors", measured);
    assert_true(files_equal(pa, pb));
}

// ---- identical weights on every rank ----------------------------------------

static void test_weights_drift_is_caught(void **state) {
    // Every run above passed the check at each of its evaluations. Here one
    // rank's first weight gets 1 added after step 12: the check at the
    // evaluation of step 20 must stop the run (exit status 4).
    char run_dir[512];
    snprintf(run_dir, sizeof run_dir, "%s/drift", dir);
    int rc = run("ROPELAB_TEST_PERTURB_AT_STEP=12 " MPIRUN " -np 2 " TRAIN_WITH_FAULTS
                 " configs/tiny.ini %s --threads=1 --out_dir=%s --quiet", data_args, run_dir);
    assert_int_equal(rc, 4);
    assert_non_null(strstr(out, "step 20: the weights of the 2 processes differ"));
    assert_int_equal(last_logged_step(run_dir), 19);     // the step of the failed check is not logged
}

// --init-from under np=2: rank 0 reads the file and every rank starts from
// its weights (the run ends, and its first validation loss is the file's own
// model's on the same windows, which a seed-initialised model would not give).
static void test_np2_init_from(void **state) {
    char base[512], run_dir[512];
    snprintf(base, sizeof base, "%s/if-base", dir);
    snprintf(run_dir, sizeof run_dir, "%s/if-np2", dir);
    int rc = run("./train configs/tiny.ini %s --threads=1 --steps=10 --out_dir=%s --quiet", pinned_args, base);
    if (rc != 0) fail_msg("base: exit %d: %s", rc, out);
    rc = run(MPIRUN " -np 2 ./train configs/tiny.ini %s --threads=1 --steps=2 --seed=9 --init-from=%s/model.safetensors "
             "--out_dir=%s --quiet", pinned_args, base, run_dir);
    if (rc != 0) fail_msg("np=2 --init-from: exit %d: %s", rc, out);
    static char a[100][160], b[100][160];
    int na = read_log(base, a, 100), nb = read_log(run_dir, b, 100);
    assert_true(na == 11 && nb == 3);
    // row 0 of the new run: the validation loss of the base's final weights (its last row)
    const char *va = strchr(strchr(a[na - 1], ',') + 1, ',') + 1, *vb = strchr(strchr(b[0], ',') + 1, ',') + 1;
    assert_float_equal(atof(va), atof(vb), 1e-6 * atof(va));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_np1_under_mpirun_is_a_plain_run),
        cmocka_unit_test(test_np2_step_equals_np1_double_batch),
        cmocka_unit_test(test_np2_interrupt_and_resume_is_exact),
        cmocka_unit_test(test_kill9_of_one_rank_ends_the_job),
        cmocka_unit_test(test_rank0_errors_stop_every_rank),
        cmocka_unit_test(test_weights_drift_is_caught),
        cmocka_unit_test(test_np2_init_from),
        cmocka_unit_test(test_np2_auto_takes_rank0s_choice),
    };
    return cmocka_run_group_tests(tests, setup, remove_data_dir);
}
