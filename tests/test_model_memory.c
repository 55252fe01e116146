// test_model_memory.c: memory. Work that needs more memory than this process
// can still take is refused before anything large is allocated, in one line
// giving the bytes needed, the bytes left and the limit that leaves them:
// MemAvailable, the cgroup's (v2 and v1, from fake cgroup files under
// ROPELAB_CGROUP_ROOT, walking up to the parents), RLIMIT_AS (setrlimit in
// a child); and the model's own checks of its parameters and activations.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <omp.h>

#include "common/fs.h"
#include "common/memory.h"
#include "model/gpt.h"
#include "util_run.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

// Peak resident memory of this process so far, in bytes (ru_maxrss is in kB on Linux).
static long long peak_rss(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (long long)u.ru_maxrss * 1024;
}

// err must be "WHAT need NEED; " then one of the three limits' clauses, with
// a figure left below NEED (both in GB or MB, decimal).
static void expect_refusal(const char *err, const char *what, const char *need) {
    char want[256];
    snprintf(want, sizeof want, "%s need %s; ", what, need);
    size_t n = strlen(want);
    if (strncmp(err, want, n) != 0) printf("got:  %s\nwant: %s...\n", err, want);
    assert_memory_equal(err, want, n);
    static const char *const clauses[] = {"this machine has %lf %2s available (",
                                          "the cgroup's memory limit leaves %lf %2s (",
                                          "the address-space limit leaves %lf %2s ("};
    double left = -1, need_v;
    char unit[3] = "", need_unit[3] = "";
    for (int i = 0; i < 3 && left < 0; i++)
        if (sscanf(err + n, clauses[i], &left, unit) != 2) left = -1;
    if (left < 0) fail_msg("no limit named in: %s", err);
    assert_int_equal(sscanf(need, "%lf %2s", &need_v, need_unit), 2);
    double scale = strcmp(unit, "GB") == 0 ? 1e9 : 1e6, need_scale = strcmp(need_unit, "GB") == 0 ? 1e9 : 1e6;
    assert_true(left * scale < need_v * need_scale);
    assert_non_null(strchr(err, ')'));
}

// ---- the limits

// Writes text to root/rel, making its directories.
static void put_file(const char *root, const char *rel, const char *text) {
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    char *slash = strrchr(path, '/');
    *slash = 0;
    if (make_dirs(path, err, sizeof err) != 0) fail_msg("%s", err);
    *slash = '/';
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

// A fresh directory standing for / in the fake-cgroup tests.
static void fake_root(char *root, size_t n, const char *name) {
    snprintf(root, n, "%s/%s", dir, name);
    assert_int_equal(run("rm -rf '%s' && mkdir -p '%s'", root, root), 0);
}

static void test_mem_check(void **s) {
    (void)s;
    char err[512];
    MemLimit l;
    assert_int_equal(mem_limit_machine(&l), 0);
    assert_int_equal(l.kind, MEM_LIMIT_MACHINE);
    assert_true(l.left > ((size_t)16 << 20) && l.left < SIZE_MAX);   // a real figure
    mem_limit(&l);
    assert_true(l.kind != MEM_LIMIT_NONE && l.left > 0);
    assert_int_equal(mem_check(0, "nothing", err, sizeof err), 0);
    assert_int_equal(mem_check(l.left / 2, "half of it", err, sizeof err), 0);
    assert_int_equal(mem_check((size_t)1 << 50, "a pebibyte", err, sizeof err), -1);
    expect_refusal(err, "a pebibyte", "1125899.9 GB");   // 2^50 bytes = 1125899.9 x 10^9
}

// cgroup v2: the process's cgroup and each parent up to the mount; limit
// minus usage, plus the inactive file cache the kernel reclaims first; "max"
// is no limit; the smallest room wins, named by its file.
static void test_cgroup_v2(void **s) {
    (void)s;
    char root[600], want[800];
    MemLimit l;
    fake_root(root, sizeof root, "cg2");
    put_file(root, "proc/self/cgroup", "0::/ci/job\n");
    put_file(root, "sys/fs/cgroup/ci/job/memory.max", "600000000\n");
    put_file(root, "sys/fs/cgroup/ci/job/memory.current", "100000000\n");
    put_file(root, "sys/fs/cgroup/ci/job/memory.stat", "anon 70000000\nfile 30000000\ninactive_file 20000000\n");
    put_file(root, "sys/fs/cgroup/ci/memory.max", "max\n");
    put_file(root, "sys/fs/cgroup/ci/memory.current", "900000000\n");
    assert_int_equal(mem_limit_cgroup(&l, root), 0);
    assert_int_equal(l.kind, MEM_LIMIT_CGROUP);
    assert_int_equal(l.left, 600000000 - (100000000 - 20000000));
    snprintf(want, sizeof want, "%s/sys/fs/cgroup/ci/job/memory.max", root);
    assert_string_equal(l.file, want);
    // a parent that leaves less decides
    put_file(root, "sys/fs/cgroup/ci/memory.max", "1000000000\n");
    put_file(root, "sys/fs/cgroup/ci/memory.current", "990000000\n");
    assert_int_equal(mem_limit_cgroup(&l, root), 0);
    assert_int_equal(l.left, 10000000);
    snprintf(want, sizeof want, "%s/sys/fs/cgroup/ci/memory.max", root);
    assert_string_equal(l.file, want);
    // usage above the limit leaves nothing
    put_file(root, "sys/fs/cgroup/ci/memory.current", "1200000000\n");
    assert_int_equal(mem_limit_cgroup(&l, root), 0);
    assert_int_equal(l.left, 0);
    // no limit anywhere: none applies
    put_file(root, "sys/fs/cgroup/ci/memory.max", "max\n");
    put_file(root, "sys/fs/cgroup/ci/job/memory.max", "max\n");
    assert_int_equal(mem_limit_cgroup(&l, root), -1);
    // a container's own namespace: "0::/", the limit at the mount's root
    put_file(root, "proc/self/cgroup", "0::/\n");
    put_file(root, "sys/fs/cgroup/memory.max", "629145600\n");
    put_file(root, "sys/fs/cgroup/memory.current", "29145600\n");
    assert_int_equal(mem_limit_cgroup(&l, root), 0);
    assert_int_equal(l.left, 600000000);
    snprintf(want, sizeof want, "%s/sys/fs/cgroup/memory.max", root);
    assert_string_equal(l.file, want);
}

// cgroup v1: the memory hierarchy's line (among others, with a controller
// list), limit_in_bytes minus usage_in_bytes plus total_inactive_file; the
// "unlimited" figure (about 2^63) is no limit.
static void test_cgroup_v1(void **s) {
    (void)s;
    char root[600], want[800];
    MemLimit l;
    fake_root(root, sizeof root, "cg1");
    put_file(root, "proc/self/cgroup", "9:name=systemd:/\n5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n");
    put_file(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put_file(root, "sys/fs/cgroup/memory/memory.usage_in_bytes", "8000000000\n");
    put_file(root, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "629145600\n");
    put_file(root, "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", "129145600\n");
    put_file(root, "sys/fs/cgroup/memory/docker/abc/memory.stat",
             "cache 5000000\ninactive_file 1\ntotal_cache 5000000\ntotal_inactive_file 4000000\n");
    assert_int_equal(mem_limit_cgroup(&l, root), 0);
    assert_int_equal(l.kind, MEM_LIMIT_CGROUP);
    assert_int_equal(l.left, 629145600 - (129145600 - 4000000));
    snprintf(want, sizeof want, "%s/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", root);
    assert_string_equal(l.file, want);
    // "memory" inside a controller list counts too
    put_file(root, "proc/self/cgroup", "4:cpu,memory:/docker/abc\n");
    assert_int_equal(mem_limit_cgroup(&l, root), 0);
    assert_int_equal(l.left, 629145600 - (129145600 - 4000000));
    // only the unlimited root: none applies; no cgroup file at all: none
    put_file(root, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");
    assert_int_equal(mem_limit_cgroup(&l, root), -1);
    fake_root(root, sizeof root, "cg-none");
    assert_int_equal(mem_limit_cgroup(&l, root), -1);
}

// ROPELAB_CGROUP_ROOT reaches mem_check: a fake limit below the need is the
// one named (it is the smallest), one above it changes nothing.
static void test_cgroup_refuses(void **s) {
    (void)s;
    char root[600], want[900], err[1024];
    fake_root(root, sizeof root, "cg-check");
    put_file(root, "proc/self/cgroup", "0::/\n");
    put_file(root, "sys/fs/cgroup/memory.max", "3000000\n");
    put_file(root, "sys/fs/cgroup/memory.current", "2000000\n");
    setenv("ROPELAB_CGROUP_ROOT", root, 1);
    assert_int_equal(mem_check(900000, "a little", err, sizeof err), 0);
    assert_int_equal(mem_check(64000000, "model and training state", err, sizeof err), -1);
    snprintf(want, sizeof want,
             "model and training state need 64.0 MB; the cgroup's memory limit leaves 1.0 MB (%s/sys/fs/cgroup/memory.max)",
             root);
    assert_string_equal(err, want);
    // several processes on this machine share the cgroup: their sum is checked
    assert_int_equal(mem_check_processes(600000, 2, "two", err, sizeof err), -1);
    expect_refusal(err, "two", "1.2 MB");
    unsetenv("ROPELAB_CGROUP_ROOT");
}

// RLIMIT_AS, set in a child (it cannot be raised again): what it leaves is
// the limit minus the address space in use, and it is named in the refusal.
static void test_address_space_limit(void **s) {
    (void)s;
    if (UNDER_ASAN) skip();   // ASan reserves terabytes of address space
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        MemLimit l;
        char err[512];
        int code = 0;
        if (mem_limit_address(&l) == 0) code = 1;   // unlimited before
        FILE *st = fopen("/proc/self/status", "r");
        char line[256];
        unsigned long long vm_kb = 0;
        while (st && fgets(line, sizeof line, st)) sscanf(line, "VmSize: %llu kB", &vm_kb);
        if (st) fclose(st);
        size_t room = (size_t)256 << 20;
        struct rlimit r = {.rlim_cur = vm_kb * 1024 + room, .rlim_max = vm_kb * 1024 + room};
        if (setrlimit(RLIMIT_AS, &r) != 0) code = 2;
        if (!code && (mem_limit_address(&l) != 0 || l.kind != MEM_LIMIT_ADDRESS)) code = 3;
        // the room left: 256 MiB, less what this child mapped since it read VmSize (a few pages)
        if (!code && (l.left > room || l.left < room - ((size_t)1 << 20))) code = 4;
        if (!code && mem_check((size_t)1 << 30, "a gigabyte", err, sizeof err) != -1) code = 5;
        if (!code && strncmp(err, "a gigabyte need 1.1 GB; the address-space limit leaves 26", 56) != 0) code = 6;
        if (!code && strstr(err, "(RLIMIT_AS, ulimit -v)") == NULL) code = 7;
        if (!code && mem_check((size_t)64 << 20, "64 MiB", err, sizeof err) != 0) code = 8;
        dprintf(fds[1], "%s", err);
        _exit(code);
    }
    close(fds[1]);
    char msg[512] = "";
    ssize_t n = read(fds[0], msg, sizeof msg - 1);
    msg[n > 0 ? n : 0] = 0;
    close(fds[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("child failed at check %d: %s", WEXITSTATUS(st), msg);
    printf("  under RLIMIT_AS: %s\n", msg);
}

// ---- the model's own checks (for callers of gpt.h other than the programs)

// A model near the largest the configuration allows (2^34 parameters):
// L = 5, C = 16384, 1.6e10 parameters, 128.9 GB of parameters and
// gradients (4 bytes each, each buffer rounded up to 64 bytes). gpt_create
// must refuse it with that figure before allocating either buffer.
static void test_huge_model(void **s) {
    (void)s;
    GPTConfig cfg = {.n_layer = 5, .n_head = 128, .d_model = 16384, .vocab_size = 64, .block_size = 128};
    gpt_config_defaults(&cfg);
    cfg.pos = POS_ROPE;
    size_t L = 5, C = 16384, V = 64;
    size_t n_params = V * C + L * (12 * C * C + 13 * C) + 2 * C;
    size_t bytes = 2 * ((n_params * 4 + 63) / 64 * 64);
    MemLimit l;
    mem_limit(&l);
    if (l.left >= bytes) skip();   // a machine where it fits: nothing to refuse
    char err[512], what[96], need[32];
    snprintf(what, sizeof what, "the model's %zu parameters and their gradients", n_params);
    snprintf(need, sizeof need, "%.1f GB", (double)bytes / 1e9);
    assert_string_equal(need, "128.9 GB");
    long long rss0 = peak_rss();
    GPT *m = (GPT *)&m;   // must be set to NULL
    assert_int_equal(gpt_create(&m, &cfg, 1, err, sizeof err), -1);
    assert_null(m);
    expect_refusal(err, what, need);
    assert_true(peak_rss() - rss0 < (64LL << 20));
}

// A small model (L = 256, C = 16) asked for one sequence of 2^25 tokens:
// the activations hold more than L x 16C floats per token (LayerNorms,
// qkv, attention output, residuals, MLP hidden), about 9 TB. The refusal
// names the batch and the figure, comes before the rope tables grow to
// 2^25 positions (2 GB), and leaves the model able to size a real batch.
static void test_huge_activations(void **s) {
    (void)s;
    GPTConfig cfg = {.n_layer = 256, .n_head = 1, .d_model = 16, .vocab_size = 64, .block_size = 64};
    gpt_config_defaults(&cfg);
    cfg.pos = POS_ROPE;
    char err[512];
    GPT *m;
    assert_int_equal(gpt_create(&m, &cfg, 1, err, sizeof err), 0);
    const int B = 1, T = 1 << 25;
    assert_int_equal(gpt_check_batch(&cfg, B, T, err, sizeof err), 0);   // within the index range
    long long rss0 = peak_rss();
    assert_int_equal(gpt_alloc_activations(m, B, T, err, sizeof err), -1);
    const char *what = "activations for batch 1 x 33554432 tokens";
    size_t n = strlen(what);
    double need;
    assert_memory_equal(err, what, n);
    assert_int_equal(sscanf(err + n, " need %lf GB", &need), 1);
    assert_true(need * 1e9 >= (double)B * T * 256 * 16 * 16 * sizeof(float));   // >= 8.7 TB
    char need_s[32];
    snprintf(need_s, sizeof need_s, "%.1f GB", need);
    expect_refusal(err, what, need_s);
    assert_int_equal(gpt_activation_bytes(m), 0);
    assert_true(peak_rss() - rss0 < (64LL << 20));
    // the model is still whole: a batch that fits is sized and runs
    assert_int_equal(gpt_alloc_activations(m, 2, 8, err, sizeof err), 0);
    assert_true(gpt_activation_bytes(m) > 0);
    int tokens[16] = {0};
    float loss;
    assert_int_equal(gpt_forward(m, tokens, tokens, 2, 8, &loss, err, sizeof err), 0);
    gpt_free(m);
}

static int setup(void **state) {
    (void)state;
    return make_data_dir("memory");
}

int main(void) {
    omp_set_num_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem_check),
        cmocka_unit_test(test_cgroup_v2),
        cmocka_unit_test(test_cgroup_v1),
        cmocka_unit_test(test_cgroup_refuses),
        cmocka_unit_test(test_address_space_limit),
        cmocka_unit_test(test_huge_model),
        cmocka_unit_test(test_huge_activations),
    };
    return cmocka_run_group_tests(tests, setup, remove_data_dir);
}
