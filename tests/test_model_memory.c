// test_model_memory.c: memory. Work that needs more memory than this process
// can still take is refused before anything large is allocated, in one line
// giving the bytes needed, the bytes left and the limit that leaves them:
//
// * the limits (src/common/memory.c): MemAvailable, the cgroup's (v2 and v1,
//   from fake cgroup files under ROPELAB_CGROUP_ROOT, walking up to the
//   parents), RLIMIT_AS (setrlimit in a child, and ulimit -v on ./train);
// * the estimate (src/train/footprint.c on gpt_memory, kv_cache_bytes,
//   gguf_model_bytes): each figure equal to what the allocation it
//   describes really takes, on every engine this CPU runs;
// * the programs, end to end: ./train's 4096-wide model refused at once with
//   little memory; ./train, ./eval's activations, ./sample's KV cache and
//   ./export's position table refused under a fake cgroup limit; ./train
//   under ulimit -v; ./export's --context-length bounded.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <malloc.h>

#include <cmocka.h>
#include <omp.h>

#include "common/fs.h"
#include "common/memory.h"
#include "format/gguf_model.h"
#include "model/gpt.h"
#include "model/gpt_internal.h"   // white-box: the buffers the estimate describes
#include "model/params.h"        // gpt_create_uninit: a model without gradients
#include "train/footprint.h"
#include "util_gradcheck.h"
#include "util_run.h"

// Bytes of heap in use, to measure what an allocation takes: glibc's count
// (mallinfo2: small blocks and mmapped ones), or under AddressSanitizer,
// whose allocator replaces glibc's and leaves mallinfo2 unchanged, ASan's
// own count of the bytes the program asked for (libasan's interface,
// declared here: GCC ships no header for it).
#if UNDER_ASAN
size_t __sanitizer_get_current_allocated_bytes(void);
static size_t heap_bytes(void) { return __sanitizer_get_current_allocated_bytes(); }
#else
static size_t heap_bytes(void) {
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}
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
    gc_config_defaults(&cfg);
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
    gc_config_defaults(&cfg);
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
    assert_int_equal(m->acts.bytes, 0);
    assert_true(peak_rss() - rss0 < (64LL << 20));
    // the model is still whole: a batch that fits is sized and runs
    assert_int_equal(gpt_alloc_activations(m, 2, 8, err, sizeof err), 0);
    assert_true(m->acts.bytes > 0);
    int tokens[16] = {0};
    float loss;
    assert_int_equal(gpt_forward(m, tokens, tokens, 2, 8, &loss, err, sizeof err), 0);
    gpt_free(m);
}

// ---- the estimate against the allocations it describes

// What malloc gave for a block of `want` bytes must be at least that and
// at most a page (mmap's rounding) and an alignment more.
static void expect_block(const void *p, size_t want, const char *what) {
    size_t got = malloc_usable_size((void *)p);
    if (got < want || got > want + 4096 + 64) fail_msg("%s: estimated %zu bytes, allocated %zu", what, want, got);
}

// Every scheme on both blocks, every engine this CPU runs: gpt_memory's
// figures against the model's real buffers after a forward and a backward
// (the engines size their scratch at the first pass), with the logits of all
// positions at once and of 7 at a time (gpt_set_logits_rows): the parameters, the
// gradients and the scheme's tables block by block, the activations and
// the engine's bytes (Engine.bytes) exactly (oneDNN: all but its own
// scratchpads, which it reports on top). T = 40 > block_size = 32 (the
// tables grow) for every scheme but learned.
static void test_estimate_matches_allocations(void **s) {
    (void)s;
    static const struct { GPTMatmul matmul; GPTPrecision precision; GPTAttention attention; const char *name; } ENGINES[] = {
        {GPT_MATMUL_OPENBLAS, GPT_FP32, GPT_ATTENTION_BLOCKED, "openblas"},
        {GPT_MATMUL_OPENBLAS, GPT_FP32, GPT_ATTENTION_FUSED, "openblas fused"},
        {GPT_MATMUL_REFERENCE, GPT_FP32, GPT_ATTENTION_BLOCKED, "reference"},
        {GPT_MATMUL_ONEDNN, GPT_FP32, GPT_ATTENTION_BLOCKED, "onednn fp32"},
        {GPT_MATMUL_ONEDNN, GPT_FP32, GPT_ATTENTION_FUSED, "onednn fp32 fused"},
        {GPT_MATMUL_ONEDNN, GPT_BF16, GPT_ATTENTION_BLOCKED, "onednn bf16"},
        {GPT_MATMUL_ONEDNN, GPT_BF16, GPT_ATTENTION_FUSED, "onednn bf16 fused"}};
    char err[512], what[128];
    for (int train = 1; train >= 0; train--)   // a model to train, or one read to run (no gradients)
    for (int logits_rows = 0; logits_rows <= 7; logits_rows += 7)   // all B*T positions' logits, or 7 at a time
    for (int threads = 1; threads <= 2 - !train; threads++)
        for (int block = 0; block < 2; block++)
            for (int pos = 0; pos < POS_COUNT; pos++)
                for (size_t e = 0; e < sizeof ENGINES / sizeof ENGINES[0]; e++) {
                    omp_set_num_threads(threads);
                    GPTConfig cfg = {.n_layer = 2, .n_head = 2, .d_model = 32, .vocab_size = 96, .block_size = 32};
                    gc_config_defaults(&cfg);
                    cfg.pos = (PosKind)pos;
                    cfg.block = block ? BLOCK_LLAMA : BLOCK_GPT2;
                    const int B = 3, T = cfg.pos == POS_LEARNED ? 32 : 40;
                    GPT *m;
                    if (train) assert_int_equal(gpt_create(&m, &cfg, 1, err, sizeof err), 0);
                    else assert_int_equal(gpt_create_uninit(&m, &cfg, 0, err, sizeof err), 0);
                    if (gpt_set_matmul(m, ENGINES[e].matmul, ENGINES[e].precision, ENGINES[e].attention, err,
                                       sizeof err) != 0) {
                        gpt_free(m);   // bf16 below AVX-512
                        continue;
                    }
                    snprintf(what, sizeof what, "%s %s %s, %d threads, logits_rows %d%s", pos_kind_name(cfg.pos),
                             block ? "llama" : "gpt2", ENGINES[e].name, threads, logits_rows,
                             train ? "" : ", forward only");
                    GPTMemory mem;
                    GPTWorkload w = {.matmul = ENGINES[e].matmul, .precision = ENGINES[e].precision,
                                     .attention = ENGINES[e].attention, .B = B, .T = T, .backward = train,
                                     .n_threads = threads, .logits_rows = logits_rows};
                    assert_int_equal(gpt_memory(&cfg, &w, &mem, err, sizeof err), 0);
                    gpt_set_logits_rows(m, logits_rows);
                    assert_int_equal(gpt_alloc_activations(m, B, T, err, sizeof err), 0);
                    int tokens[3 * 40];
                    for (int i = 0; i < B * T; i++) tokens[i] = (i * 7) % cfg.vocab_size;
                    float loss;
                    assert_int_equal(gpt_forward(m, tokens, tokens, B, T, &loss, err, sizeof err), 0);
                    if (train) assert_int_equal(gpt_backward(m, 1.0f, err, sizeof err), 0);
                    assert_int_equal(mem.n_params, gpt_num_params(m));
                    expect_block(m->params, mem.params, what);
                    if (train) expect_block(m->grads, mem.grads, what);
                    else assert_true(m->grads == NULL && mem.grads == 0);
                    if (mem.pos_tables) expect_block(m->pos_ctx.tables, mem.pos_tables, what);
                    else assert_null(m->pos_ctx.tables);
                    if (mem.activations != m->acts.bytes)
                        fail_msg("%s: activations estimated %zu, allocated %zu", what, mem.activations,
                                 m->acts.bytes);
                    size_t engine = m->engine->bytes(m->engine);
                    if (ENGINES[e].matmul == GPT_MATMUL_ONEDNN) {
                        // known: everything but the scratchpads (up to the weight copies' padding in bf16)
                        if (engine < mem.engine) fail_msg("%s: engine estimated %zu > %zu", what, mem.engine, engine);
                    } else if (engine != mem.engine) {
                        fail_msg("%s: engine estimated %zu, holds %zu", what, mem.engine, engine);
                    }
                    gpt_free(m);
                }
    omp_set_num_threads(1);
}

// The KV cache and the export's tensors: their estimates against the blocks
// they allocate (kv_cache_create's three and the scheme's tables; the
// export's one), and the footprint of each program made of the parts.
static void test_kv_cache_and_export_sizes(void **s) {
    (void)s;
    char err[512];
    for (int pos = 0; pos < POS_COUNT; pos++) {
        GPTConfig cfg = {.n_layer = 2, .n_head = 2, .d_model = 32, .vocab_size = 96, .block_size = 32};
        gc_config_defaults(&cfg);
        cfg.pos = (PosKind)pos;
        GPT *m;
        assert_int_equal(gpt_create(&m, &cfg, 1, err, sizeof err), 0);
        int len = cfg.pos == POS_LEARNED ? 32 : 1000;
        size_t before = heap_bytes();
        KVCache *kv;
        assert_int_equal(kv_cache_create(&kv, m, len, err, sizeof err), 0);
        size_t used = heap_bytes() - before, want = kv_cache_bytes(&cfg, len);
        // malloc's own headers and rounding: at most 4 blocks x (16 bytes + 4 KB of mmap rounding)
        if (used < want || used > want + 4 * (16 + 4096))
            fail_msg("pos=%s: KV cache estimated %zu, allocated %zu", pos_kind_name(cfg.pos), want, used);
        kv_cache_free(kv);
        GgufModel gm;
        if (gguf_model_refusal(&cfg) == NULL) {
            int n_ctx = cfg.pos == POS_LEARNED ? 32 : 4096;
            assert_int_equal(gguf_model_describe(m, n_ctx, &gm, NULL, err, sizeof err), 0);
            size_t owned = gguf_model_bytes(&cfg, n_ctx);
            if (owned) expect_block(gm.owned, owned, pos_kind_name(cfg.pos));
            else assert_null(gm.owned);
            gguf_model_free(&gm);
            Footprint f;
            assert_int_equal(footprint_export(&f, &cfg, n_ctx, err, sizeof err), 0);
            size_t base = f.model.params + f.model.grads + f.model.pos_tables;
            assert_int_equal(f.bytes, base + owned);
        }
        Footprint f;
        GPTWorkload w = {.matmul = GPT_MATMUL_OPENBLAS, .precision = GPT_FP32, .n_threads = 1};
        assert_int_equal(footprint_sample(&f, &cfg, &w, len, err, sizeof err), 0);
        assert_int_equal(f.work, kv_cache_bytes(&cfg, len));
        assert_int_equal(f.bytes, f.model.params + f.model.grads + f.model.pos_tables + f.work);
        gpt_free(m);
    }
}

// GPT-2 124M's shape (V 50,257) at B 8, T 1,024: the logits of all 8,192
// positions would be 1.6 GB; the head holds 320 at a time (64-row slices
// within 2^24 floats), the accounting with them, and logits_rows = B*T asks
// for all of them. The logits' rows are read from the accounting as bench_memory
// does: the activations with 16 vocabulary entries fewer hold rows x 16 floats fewer.
static void test_gpt2_logits_chunks(void **s) {
    (void)s;
    char err[256];
    GPTConfig cfg = {.n_layer = 12, .n_head = 12, .d_model = 768, .vocab_size = 50257, .block_size = 1024,
                     .pos = POS_LEARNED};
    gc_config_defaults(&cfg);
    cfg.pos = POS_LEARNED;
    GPTConfig less = cfg;
    less.vocab_size -= 16;
    for (int backward = 0; backward <= 1; backward++) {
        GPTWorkload w = {.matmul = GPT_MATMUL_OPENBLAS, .precision = GPT_FP32, .B = 8, .T = 1024,
                         .backward = backward, .n_threads = 2};
        for (int whole = 0; whole <= 1; whole++) {
            w.logits_rows = whole ? 8 * 1024 : 0;
            GPTMemory a, b;
            assert_int_equal(gpt_memory(&cfg, &w, &a, err, sizeof err), 0);
            assert_int_equal(gpt_memory(&less, &w, &b, err, sizeof err), 0);
            size_t rows = (a.activations - b.activations) / (16 * sizeof(float));
            printf("  %s, logits_rows %d: %zu positions' logits at once, activations %.1f MB\n",
                   backward ? "training" : "forward only", w.logits_rows, rows, a.activations / 1e6);
            assert_int_equal(rows, whole ? 8 * 1024 : 320);
        }
    }
}

// ./train's need, part by part: everything is held at once (the checkpoint
// and --init-from's weights are read tensor by tensor into the model and the
// moments, weights_file.h), and --debug-state has no moments.
static void test_train_footprint_phases(void **s) {
    (void)s;
    char err[512];
    GPTConfig cfg = {.n_layer = 2, .n_head = 2, .d_model = 64, .vocab_size = 96, .block_size = 32};
    gc_config_defaults(&cfg);
    Footprint f;
    GPTWorkload w = {.matmul = GPT_MATMUL_OPENBLAS, .precision = GPT_FP32, .attention = GPT_ATTENTION_BLOCKED, .B = 4,
                     .T = 32, .n_threads = 2};
    assert_int_equal(footprint_train(&f, &cfg, &w, 1, err, sizeof err), 0);
    const GPTMemory *m = &f.model;
    size_t held = m->params + m->grads + m->pos_tables + m->activations;
    assert_int_equal(f.adamw, 2 * m->n_params * sizeof(float));
    assert_int_equal(f.bytes, held + f.adamw + m->engine);
    assert_int_equal(footprint_train(&f, &cfg, &w, 0, err, sizeof err), 0);
    assert_int_equal(f.bytes, held + m->engine);   // --debug-state: no moments
    // matmul = auto measured: either engine may train, and its trial holds both before the moments exist
    Footprint ob, on, au;
    GPTWorkload each = w;
    assert_int_equal(footprint_train(&ob, &cfg, &each, 1, err, sizeof err), 0);
    each.matmul = GPT_MATMUL_ONEDNN;
    assert_int_equal(footprint_train(&on, &cfg, &each, 1, err, sizeof err), 0);
    assert_int_equal(footprint_train_auto(&au, &cfg, &w, err, sizeof err), 0);
    size_t trial = held + ob.model.engine + on.model.engine, run = ob.bytes > on.bytes ? ob.bytes : on.bytes;
    assert_int_equal(au.bytes, trial > run ? trial : run);
    assert_true(ob.model.engine > 0 && on.model.engine > 0);   // both counted, not a zero
    // a batch the model refuses is refused here too, with the model's message
    w.B = w.T = 65536;
    w.n_threads = 1;
    assert_int_equal(footprint_train(&f, &cfg, &w, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "too large for the activation buffers"));
}

// ---- the programs, end to end

// Runs cmd (exec'd by sh) with its output in out; its exit status, peak RSS
// and wall time.
static int run_measured(long long *rss_bytes, double *seconds, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t n;
    while ((n = read(fds[0], out + got, sizeof out - 1 - got)) > 0) got += (size_t)n;
    out[got] = 0;
    close(fds[0]);
    int st;
    struct rusage ru;
    assert_int_equal(wait4(pid, &st, 0, &ru), pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *rss_bytes = (long long)ru.ru_maxrss * 1024;
    *seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect_one_line(const char *needle) {
    if (!strstr(out, needle) || strchr(out, '\n') != out + strlen(out) - 1)
        fail_msg("want one line with '%s', got:\n%s", needle, out);
}

// A fake cgroup v2 under dir whose limit leaves `left` bytes; its root in root.
static void fake_cgroup_leaving(char *root, size_t n, const char *name, long long left) {
    char text[64];
    fake_root(root, n, name);
    put_file(root, "proc/self/cgroup", "0::/\n");
    snprintf(text, sizeof text, "%lld\n", left + 1000000);
    put_file(root, "sys/fs/cgroup/memory.max", text);
    put_file(root, "sys/fs/cgroup/memory.current", "1000000\n");
}

// The reproducer: 9 layers of width 4096, 1.8e9 parameters, whose
// parameters, gradients and AdamW moments alone are 16 bytes each, 29 GB.
// Refused at once (under a fake cgroup leaving 8 GB, so on any machine),
// naming the figure and the limit, with the memory of a process that
// allocated nothing; the run directory is not created. Before the one
// estimate, ./train allocated and initialised the 14.6 GB of parameters and
// gradients first (11.8 GB of RSS after 190 s, no message).
static void test_train_wide_model_refused_at_once(void **s) {
    (void)s;
    char root[600], run_dir[600];
    fake_cgroup_leaving(root, sizeof root, "cg-wide", 8000000000LL);
    snprintf(run_dir, sizeof run_dir, "%s/wide", dir);
    long long rss;
    double secs;
    int rc = run_measured(&rss, &secs,
                          "ROPELAB_CGROUP_ROOT=%s exec timeout 20 ./train configs/tiny.ini %s --d_model=4096 --n_head=32 "
                          "--n_layer=9 --steps=2 --threads=1 --out_dir=%s",
                          root, data_args, run_dir);
    printf("  4096-wide model: exit %d in %.2f s, peak RSS %.1f MB: %s", rc, secs, rss / 1e6, out);
    assert_int_equal(rc, 1);
    size_t C = 4096, L = 9, V = 320, n_params = V * C + L * (12 * C * C + 13 * C) + 2 * C;
    char what[200];
    snprintf(what, sizeof what, "the model's %zu parameters, their gradients, AdamW moments and activations for "
             "batch 8 x 32 need ", n_params);
    expect_one_line(what);
    assert_true(strncmp(out, what, strlen(what)) == 0);
    // 16 bytes a parameter, and the activations of 8 x 32 tokens (docs/MODEL.md's
    // formula, gpt2: C + L (16 C + 4 + H) + C + 4 + V + 10 C + H floats a token), 0.66 GB
    double need, H = 32, tokens = 8 * 32;
    double acts = 4 * tokens * (C + L * (16.0 * C + 4 + H) + C + 4 + V + 10.0 * C + H);
    assert_int_equal(sscanf(out + strlen(what), "%lf GB", &need), 1);
    assert_true(need * 1e9 >= 16.0 * n_params + acts - 0.05e9 && need * 1e9 <= (16.0 * n_params + acts) * 1.001);
    char want[900];
    snprintf(want, sizeof want, "; the cgroup's memory limit leaves 8.0 GB (%s/sys/fs/cgroup/memory.max)\n", root);
    assert_non_null(strstr(out, want));
    assert_true(secs < 5);
    if (!UNDER_ASAN) assert_true(rss < (200LL << 20));
    assert_int_equal(access(run_dir, F_OK), -1);
}

// A run that fits the machine but not the (fake) cgroup: refused, nothing
// written. The same fake cgroup with room to spare changes nothing.
static void test_train_cgroup_limit(void **s) {
    (void)s;
    char root[600], run_dir[600];
    snprintf(run_dir, sizeof run_dir, "%s/cg-run", dir);
    fake_cgroup_leaving(root, sizeof root, "cg-train", 500000);
    assert_int_equal(run("ROPELAB_CGROUP_ROOT=%s ./train configs/tiny.ini %s --steps=2 --threads=1 --out_dir=%s "
                         "--quiet", root, data_args, run_dir), 1);
    expect_one_line("; the cgroup's memory limit leaves 0.5 MB (");
    assert_true(strncmp(out, "the model's ", 12) == 0);
    assert_int_equal(access(run_dir, F_OK), -1);
    fake_cgroup_leaving(root, sizeof root, "cg-train", 4000000000LL);
    assert_int_equal(run("ROPELAB_CGROUP_ROOT=%s ./train configs/tiny.ini %s --steps=2 --threads=1 --out_dir=%s "
                         "--quiet", root, data_args, run_dir), 0);
}

// ulimit -v: a 100-million-parameter model (1.6 GB for weights, gradients
// and moments) under a 1 GB address space is refused, naming RLIMIT_AS,
// instead of failing an allocation part-way.
static void test_train_address_space_limit(void **s) {
    (void)s;
    if (UNDER_ASAN) skip();
    char run_dir[600];
    snprintf(run_dir, sizeof run_dir, "%s/as-run", dir);
    long long rss;
    double secs;
    int rc = run_measured(&rss, &secs, "ulimit -v 1000000 && exec ./train configs/tiny.ini %s --d_model=1024 "
                          "--n_head=8 --n_layer=8 --steps=2 --threads=1 --out_dir=%s --quiet", data_args, run_dir);
    printf("  under ulimit -v 1000000: exit %d in %.2f s: %s", rc, secs, out);
    assert_int_equal(rc, 1);
    expect_one_line("; the address-space limit leaves ");
    assert_non_null(strstr(out, "(RLIMIT_AS, ulimit -v)"));
    assert_true(strncmp(out, "the model's ", 12) == 0);
    assert_true(secs < 5);
    assert_int_equal(access(run_dir, F_OK), -1);
}

// ./eval's activations, ./sample's KV cache and ./export's position table,
// each refused under a fake cgroup before the model is loaded; the same
// programs run under a fake cgroup with room. --context-length is bounded.
static void test_eval_sample_export(void **s) {
    (void)s;
    char root[600], big[600], rope[600], sin[600], tok[600], val[600], gguf[600];
    snprintf(rope, sizeof rope, "%s/rope", dir);
    snprintf(sin, sizeof sin, "%s/sin", dir);
    snprintf(tok, sizeof tok, "%s/data/tokenizer.bin", dir);
    snprintf(val, sizeof val, "%s/data/val.bin", dir);
    snprintf(gguf, sizeof gguf, "%s/x.gguf", dir);
    assert_int_equal(run("./train configs/tiny.ini %s --steps=2 --threads=1 --quiet --out_dir=%s", data_args, rope), 0);
    assert_int_equal(run("./train configs/tiny.ini %s --pos=sinusoidal --steps=2 --threads=1 --quiet --out_dir=%s",
                         data_args, sin), 0);
    fake_cgroup_leaving(root, sizeof root, "cg-small", 20000000);   // 20 MB
    fake_cgroup_leaving(big, sizeof big, "cg-big", 4000000000LL);
    // eval: activations for 8 windows of 4096 tokens, far more than the 20 MB left
    assert_int_equal(run("ROPELAB_CGROUP_ROOT=%s ./eval --weights %s/model.safetensors --data %s --seq-len 4096 "
                         "--threads 1", root, rope, val), 1);
    expect_one_line("eval: the model's ");
    expect_one_line("parameters and activations for batch 8 x 4096 need ");
    expect_one_line("the cgroup's memory limit leaves 20.0 MB");
    assert_int_equal(run("ROPELAB_CGROUP_ROOT=%s ./eval --weights %s/model.safetensors --data %s --batches 2 "
                         "--threads 1", big, rope, val), 0);
    // sample: a million tokens, 2 x 2 layers x 32 floats a position: 512 MB of KV cache
    assert_int_equal(run("ROPELAB_CGROUP_ROOT=%s ./sample --weights %s/model.safetensors --tokenizer %s --tokens "
                         "1000000 --threads 1", root, rope, tok), 1);
    expect_one_line("parameters and a KV cache of 1000001 positions need ");
    assert_int_equal(run("ROPELAB_CGROUP_ROOT=%s ./sample --weights %s/model.safetensors --tokenizer %s --tokens 5 "
                         "--threads 1", big, rope, tok), 0);
    // export: 2^20 rows of 32 floats, 134 MB
    assert_int_equal(run("ROPELAB_CGROUP_ROOT=%s ./export --weights %s/model.safetensors --tokenizer %s --out %s "
                         "--context-length 1048576", root, sin, tok, gguf), 1);
    expect_one_line("export: the model's ");
    expect_one_line("parameters and a position table of 1048576 rows need 134.4 MB; the cgroup's memory limit");
    assert_int_equal(access(gguf, F_OK), -1);
    assert_int_equal(run("ROPELAB_CGROUP_ROOT=%s ./export --weights %s/model.safetensors --tokenizer %s --out %s "
                         "--context-length 4096", big, sin, tok, gguf), 0);
    // the 16777216 rows (2.1 GB at width 32): beyond the bound, refused on the command line at once
    long long rss;
    double secs;
    int rc = run_measured(&rss, &secs, "exec timeout 20 ./export --weights %s/model.safetensors --tokenizer %s "
                          "--out %s.big --context-length 16777216", sin, tok, gguf);
    assert_int_equal(rc, 2);
    expect_one_line("export: --context-length: 16777216 is out of range [1, 1048576]");
    assert_true(secs < 5);
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
        cmocka_unit_test(test_estimate_matches_allocations),
        cmocka_unit_test(test_kv_cache_and_export_sizes),
        cmocka_unit_test(test_train_footprint_phases),
        cmocka_unit_test(test_gpt2_logits_chunks),
        cmocka_unit_test(test_train_wide_model_refused_at_once),
        cmocka_unit_test(test_train_cgroup_limit),
        cmocka_unit_test(test_train_address_space_limit),
        cmocka_unit_test(test_eval_sample_export),
    };
    return cmocka_run_group_tests(tests, setup, remove_data_dir);
}
