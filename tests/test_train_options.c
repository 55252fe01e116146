// test_train_options.c: the configuration of ./train: defaults, INI values,
// the command line winning, every kind of bad configuration (as a parser
// error "file:line: message" / "--key: message", and for a few through the
// ./train binary with exit status 2), --help and config.ini round trips;
// range messages exact; a training key as another program's flag (for
// ./sample and ./eval).
// Run from the repository root with ./train built.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "util_shell.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine_create.h"
#include "train/matmul_auto.h"
#include "train/options.h"

static char tmpdir[256];

static int setup_dir(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ropelab_opts_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

static int teardown_dir(void **state) {
    return run_shell("rm -rf '%s'", tmpdir) == 0 ? 0 : -1;
}

// Writes text to tmpdir/name and returns the path (static buffer per call site is enough).
static const char *write_file(const char *name, const char *text) {
    static char path[8][512];
    static int next = 0;
    char *p = path[next++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

// Parses a command line given as a NULL-terminated list after "train".
static int parse(TrainOptions *opt, TrainArgs *args, char *err, size_t errlen, ...) {
    char *argv[32] = {"train"};
    int argc = 1;
    va_list ap;
    va_start(ap, errlen);
    for (char *a; (a = va_arg(ap, char *)) != NULL;) argv[argc++] = a;
    va_end(ap);
    err[0] = 0;
    return options_parse_args(argc, argv, opt, args, err, errlen);
}

// Runs a shell command, captures stdout+stderr, returns the exit status.
static int run(const char *cmd, char *out, size_t cap) {
    char full[2048];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_defaults(void **state) {
    TrainOptions o;
    options_defaults(&o);
    assert_int_equal(o.model.n_layer, 4);
    assert_int_equal(o.model.n_head, 4);
    assert_int_equal(o.model.d_model, 128);
    assert_int_equal(o.model.block_size, 128);
    assert_int_equal(o.model.pos, POS_ROPE);
    assert_true(o.model.rope_base == 10000.0f);
    assert_int_equal(o.model.rope_dims, 0);
    assert_int_equal(o.model.t5_num_buckets, 32);
    assert_int_equal(o.model.t5_max_distance, 128);
    assert_string_equal(o.tokenizer, "data/kjv/tokenizer.bin");
    assert_string_equal(o.train_file, "data/kjv/train.bin");
    assert_string_equal(o.val_file, "data/kjv/val.bin");
    assert_true(o.beta1 == 0.9f && o.beta2 == 0.95f && o.eps == 1e-8f);
    assert_int_equal(o.grad_accum, 1);
    assert_true(o.seed == 1);
    assert_int_equal(o.threads, 0);
    assert_string_equal(o.out_dir, "");
    char err[512];
    assert_int_equal(options_check(&o, err, sizeof err), 0);
    assert_int_equal(o.model.rope_dims, 32);                       // resolved to head_dim = 128 / 4
    assert_string_equal(o.out_dir, "runs/rope-default-s1");
}

// configs/small.ini states the built-in defaults explicitly.
static void test_small_ini_equals_defaults(void **state) {
    TrainOptions d, s;
    char err[512];
    options_defaults(&d);
    options_defaults(&s);
    assert_int_equal(options_load_file(&s, "configs/small.ini", err, sizeof err), 0);
    assert_string_equal(s.config_name, "small");
    size_t n = offsetof(TrainOptions, config_name);
    assert_memory_equal(&d, &s, n);
    // and tiny/medium load cleanly and pass the checks
    const char *others[] = {"configs/tiny.ini", "configs/medium.ini"};
    for (int i = 0; i < 2; i++) {
        options_defaults(&s);
        assert_int_equal(options_load_file(&s, others[i], err, sizeof err), 0);
        assert_int_equal(options_check(&s, err, sizeof err), 0);
    }
}

static void test_file_values_and_cli_wins(void **state) {
    const char *path = write_file("a.ini",
        "; comment\n"
        "[model]\n"
        "n_layer = 3\n"
        "d_model = 96   ; inline comment\n"
        "n_head = 6\n"
        "[positions]\n"
        "pos = t5\n"
        "[optim]\n"
        "lr = 3e-4\n"
        "min_lr = 1e-5\n"
        "[run]\n"
        "seed = 18446744073709551615\n"
        "out_dir = /tmp/somewhere\n");
    TrainOptions o;
    TrainArgs a;
    char err[512];
    assert_int_equal(parse(&o, &a, err, sizeof err, (char *)path, "--n_layer=5", "--rope-dims=8", NULL), 0);
    assert_int_equal(o.model.n_layer, 5);                 // command line wins
    assert_int_equal(o.model.d_model, 96);
    assert_int_equal(o.model.n_head, 6);
    assert_int_equal(o.model.rope_dims, 8);               // --rope-dims spelled with a hyphen
    assert_int_equal(o.model.pos, POS_T5);
    assert_true(o.lr == 3e-4f && o.min_lr == 1e-5f);
    assert_true(o.seed == UINT64_MAX);
    assert_string_equal(o.out_dir, "/tmp/somewhere");
    assert_string_equal(o.config_name, "a");
    assert_int_equal(o.model.block_size, 128);            // untouched default
    assert_string_equal(a.config_path, path);
    assert_null(a.resume_dir);
    // default out_dir uses pos, config name and seed
    assert_int_equal(parse(&o, &a, err, sizeof err, (char *)path, "--out_dir=", "--seed=7", NULL), 0);
    assert_string_equal(o.out_dir, "runs/t5-a-s7");
    assert_int_equal(parse(&o, &a, err, sizeof err, "--quiet", "--overwrite", "--debug-state", "x.st", NULL), 0);
    assert_true(a.quiet && a.overwrite);
    assert_string_equal(a.debug_state, "x.st");
}

typedef struct {
    const char *ini;         // file body
    int line;                // expected line in "path:line: "
    const char *needle;      // expected in the message
} BadFile;

static void test_bad_files(void **state) {
    const BadFile cases[] = {
        {"[model]\nn_layer = 2\nfoo = 1\n", 3, "unknown key 'foo'"},
        {"[model]\nlr = 0.1\n", 2, "belongs in section [optim]"},
        {"[modle]\nn_layer = 2\n", 2, "unknown section [modle]"},
        {"n_layer = 2\n", 1, "outside any [section]"},
        {"[model]\nn_layer = two\n", 2, "'two' is not an integer"},
        {"[model]\nn_layer = 2.5\n", 2, "not an integer"},
        {"[model]\nn_layer = 0\n", 2, "out of range"},
        {"[model]\nn_layer =\n", 2, "not an integer"},
        {"[optim]\nlr = fast\n", 2, "'fast' is not a number"},
        {"[optim]\nbeta2 = 1.5\n", 2, "out of range"},
        {"[optim]\nlr = nan\n", 2, "not a number"},
        {"[run]\nseed = -3\n", 2, "not a non-negative integer"},
        {"[positions]\npos = rotary\n", 2, "unknown positional scheme 'rotary'"},
        {"[data]\ntokenizer =\n", 2, "must not be empty"},
        {"[model]\nn_layer = 2\n\nn_layer = 3\n", 4, "already set on line 2"},
        {"[model]\nn_layer 2\n", 2, "syntax error"},
        {"[model\nn_layer = 2\n", 1, "syntax error"},
        // combinations: the later of the keys involved is named
        {"[model]\nd_model = 100\nn_head = 3\n", 3, "d_model (100) is not divisible by n_head (3)"},
        {"[model]\nn_head = 4\nd_model = 64\n[positions]\nrope_dims = 7\n", 5, "rope_dims (7) must be even"},
        {"[model]\nn_head = 4\nd_model = 64\n[positions]\nrope_dims = 18\n", 5, "larger than head_dim"},
        {"[positions]\npos = t5\nt5_num_buckets = 32\nt5_max_distance = 16\n", 4, "t5_max_distance (16)"},
        // a scheme's own rules apply when it is used: an odd head_dim is fine for learned ...
        {"[model]\nn_head = 4\nd_model = 36\n[positions]\npos = rope\n", 5, "head_dim (9) is odd"},
        {"[optim]\nmin_lr = 0.5\nlr = 0.1\n", 3, "min_lr (0.5) is larger than lr (0.1)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = write_file("bad.ini", cases[i].ini);
        TrainOptions o;
        TrainArgs a;
        char err[512], want[600];
        int rc = parse(&o, &a, err, sizeof err, (char *)path, NULL);
        snprintf(want, sizeof want, "%s:%d: ", path, cases[i].line);
        if (rc != -1 || strncmp(err, want, strlen(want)) != 0 || !strstr(err, cases[i].needle))
            fail_msg("case %zu: rc %d, message '%s'; wanted '%s...%s'", i, rc, err, want, cases[i].needle);
    }
}

typedef struct {
    const char *arg;
    const char *prefix;      // expected start of the message
    const char *needle;
} BadArg;

static void test_bad_command_lines(void **state) {
    const BadArg cases[] = {
        {"--nlayer=3", "--nlayer: ", "unknown key"},
        {"--n_layer=x", "--n_layer: ", "not an integer"},
        // one rule for numbers as text (src/common/numtext.h), model and training keys alike
        {"--n_layer= 2", "--n_layer: ", "' 2' is not an integer"},
        {"--n_layer=2 ", "--n_layer: ", "'2 ' is not an integer"},
        {"--n_layer=+2", "--n_layer: ", "'+2' is not an integer"},
        {"--n_layer=02", "--n_layer: ", "'02' is not an integer"},
        {"--batch_size=+8", "--batch_size: ", "'+8' is not an integer"},
        {"--batch_size= 8", "--batch_size: ", "' 8' is not an integer"},
        {"--seed=+1", "--seed: ", "'+1' is not a non-negative integer"},
        {"--seed=01", "--seed: ", "'01' is not a non-negative integer"},
        {"--lr=0x1p-3", "--lr: ", "'0x1p-3' is not a number"},
        {"--lr= 0.1", "--lr: ", "' 0.1' is not a number"},
        {"--rope_base=+500", "--rope_base: ", "'+500' is not a number"},
        {"--n_layer=100000", "--n_layer: ", "out of range"},
        {"--lr=-1", "--lr: ", "out of range"},
        {"--pos=bogus", "--pos: ", "unknown positional scheme"},
        {"--attention=flash", "--attention: ", "'flash'"},
        {"--n_head=3", "--n_head: ", "d_model (128) is not divisible by n_head (3)"},
        {"--rope_dims=5", "--rope_dims: ", "must be even"},
        {"--rope_dims=34", "--rope_dims: ", "larger than head_dim"},
        {"--min_lr=1", "--min_lr: ", "larger than lr"},
        {"--steps", "--steps: ", "expected --steps=VALUE"},
        {"-x", "unknown option '-x' ", "(see ./train --help)"},
        {"--resume", "option '--resume' needs a value", "(see ./train --help)"},
        {"--quiet=1", "option '--quiet' takes no value", "(see ./train --help)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TrainOptions o;
        TrainArgs a;
        char err[512];
        int rc = parse(&o, &a, err, sizeof err, (char *)cases[i].arg, NULL);
        if (rc != -1 || strncmp(err, cases[i].prefix, strlen(cases[i].prefix)) != 0 || !strstr(err, cases[i].needle))
            fail_msg("case %s: rc %d, message '%s'", cases[i].arg, rc, err);
    }
    TrainOptions o;
    TrainArgs a;
    char err[512];
    // The fused attention runs on OpenBLAS (fp32) or oneDNN (fp32 or bf16), not on the reference
    // engine, and never in the reproducible mode (blocked: its bits).
    assert_int_equal(parse(&o, &a, err, sizeof err, "--matmul=reference", "--attention=fused", NULL), -1);
    assert_true(strncmp(err, "--attention: ", 13) == 0 && strstr(err, "the reference engine has the plain"));
    assert_int_equal(parse(&o, &a, err, sizeof err, "--precision=bf16", "--attention=fused", NULL), 0);
    assert_int_equal(parse(&o, &a, err, sizeof err, "--matmul=onednn", "--attention=fused", NULL), 0);
    assert_int_equal(parse(&o, &a, err, sizeof err, "--attention=fused", "--reproducible=1", NULL), -1);
    assert_true(strncmp(err, "--attention: ", 13) == 0 && strstr(err, "runs the blocked attention"));
    assert_int_equal(parse(&o, &a, err, sizeof err, "--attention=blocked", "--reproducible=1", NULL), 0);
    assert_int_equal(parse(&o, &a, err, sizeof err, "--attention=fused", NULL), 0);   // auto: openblas or onednn
    // A combination split between file and command line names the command line.
    const char *path = write_file("c.ini", "[model]\nd_model = 100\n");
    assert_int_equal(parse(&o, &a, err, sizeof err, (char *)path, "--n_head=3", NULL), -1);
    assert_true(strncmp(err, "--n_head: ", 10) == 0);
    // ... and the file line when the file's key is the later one.
    path = write_file("c2.ini", "[model]\nn_head = 3\n");
    assert_int_equal(parse(&o, &a, err, sizeof err, (char *)path, "--d_model=100", "--n_head=3", NULL), -1);
    assert_true(strncmp(err, "--", 2) == 0);
    assert_int_equal(parse(&o, &a, err, sizeof err, (char *)path, NULL), -1);
    assert_non_null(strstr(err, ":2: d_model (128) is not divisible by n_head (3)"));
    // Missing config file, two config files.
    assert_int_equal(parse(&o, &a, err, sizeof err, "/nonexistent/x.ini", NULL), -1);
    assert_non_null(strstr(err, "/nonexistent/x.ini: "));
    assert_int_equal(parse(&o, &a, err, sizeof err, (char *)path, (char *)path, NULL), -1);
    assert_non_null(strstr(err, "only one config file"));
}

static void test_resume_fixes_model_keys(void **state) {
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/run", tmpdir);
    assert_int_equal(run_shell("mkdir -p %s", dir), 0);
    TrainOptions o;
    TrainArgs a;
    options_defaults(&o);
    o.model.n_layer = 3;
    assert_int_equal(options_check(&o, err, sizeof err), 0);
    char ini[600];
    snprintf(ini, sizeof ini, "%s/config.ini", dir);
    assert_int_equal(options_write_ini(&o, ini, 300, err, sizeof err), 0);
    assert_int_equal(parse(&o, &a, err, sizeof err, "--resume", dir, "--steps=77", "--threads=1", NULL), 0);
    assert_int_equal(o.model.n_layer, 3);
    assert_int_equal(o.steps, 77);
    assert_string_equal(o.out_dir, dir);
    assert_int_equal(parse(&o, &a, err, sizeof err, "--resume", dir, "--d_model=64", NULL), -1);
    assert_non_null(strstr(err, "--d_model: cannot be changed on --resume"));
    assert_int_equal(parse(&o, &a, err, sizeof err, "--resume", dir, "--seed=2", NULL), -1);
    assert_int_equal(parse(&o, &a, err, sizeof err, "--resume", dir, "configs/tiny.ini", NULL), -1);
    assert_int_equal(parse(&o, &a, err, sizeof err, "--resume", dir, "--debug-state=x", NULL), -1);
    assert_non_null(strstr(err, "--debug-state: cannot be combined with --resume"));
}

// Every key survives config.ini -> options_load_file unchanged, and the hash
// of the model keys ignores [optim]/[run] but not [model].
static void test_write_ini_round_trip(void **state) {
    const char *path = write_file("r.ini",
        "[model]\nn_layer = 3\nd_model = 96\nn_head = 6\n[positions]\npos = alibi\nrope_base = 12345.5\n"
        "[optim]\nlr = 0.0007\neps = 1.5e-7\n[run]\nseed = 99\n");
    TrainOptions o, back;
    TrainArgs a;
    char err[512], out[512];
    assert_int_equal(parse(&o, &a, err, sizeof err, (char *)path, NULL), 0);
    snprintf(out, sizeof out, "%s/config.ini", tmpdir);
    assert_int_equal(options_write_ini(&o, out, 512, err, sizeof err), 0);
    options_defaults(&back);
    assert_int_equal(options_load_file(&back, out, err, sizeof err), 0);
    assert_int_equal(options_check(&back, err, sizeof err), 0);
    assert_memory_equal(&o, &back, offsetof(TrainOptions, config_name));
    uint64_t h = options_model_hash(&o);
    back.lr = 0.5f;
    back.steps = 3;
    assert_true(options_model_hash(&back) == h);
    back.model.n_layer = 4;
    assert_true(options_model_hash(&back) != h);
}

static const char *ALL_KEYS[] = {"n_layer", "n_head", "d_model", "block_size", "pos", "rope_base", "rope_dims",
    "t5_num_buckets", "t5_max_distance", "tokenizer", "train_file", "val_file", "lr", "min_lr", "warmup_steps",
    "beta1", "beta2", "eps", "weight_decay", "grad_clip", "batch_size", "grad_accum", "steps", "eval_every",
    "eval_batches", "save_every", "seed", "threads", "precision", "matmul", "attention", "reproducible", "out_dir"};

static void test_binary_help_and_exit_codes(void **state) {
    static char out[65536];
    assert_int_equal(run("./train --help", out, sizeof out), 0);
    for (size_t i = 0; i < sizeof ALL_KEYS / sizeof ALL_KEYS[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "  %s ", ALL_KEYS[i]);
        if (!strstr(out, want)) fail_msg("--help does not list %s", ALL_KEYS[i]);
    }
    assert_non_null(strstr(out, "--resume"));
    assert_non_null(strstr(out, "--debug-state"));

    const char *path = write_file("b.ini", "[model]\nn_layer = 2\n[optim]\nlearning_rate = 0.1\n");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "./train %s", path);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    char want[600];
    snprintf(want, sizeof want, "%s:4: unknown key 'learning_rate'", path);
    assert_non_null(strstr(out, want));

    assert_int_equal(run("./train --n_head=3", out, sizeof out), 2);
    assert_true(strncmp(out, "--n_head: d_model (128) is not divisible by n_head (3)", 50) == 0);
    assert_int_equal(run("./train --pos=rotary", out, sizeof out), 2);
    assert_true(strncmp(out, "--pos: unknown positional scheme", 30) == 0);
    assert_int_equal(run("./train --rope_dims=3", out, sizeof out), 2);
    assert_int_equal(run("./train --lr=abc", out, sizeof out), 2);
    // Numbers by numtext.h's rule, whole: one line naming the key or flag, exit 2.
    static const struct { const char *args, *want; } strict[] = {
        {"--steps=1e3", "--steps: '1e3' is not an integer\n"},
        {"--batch_size=12abc", "--batch_size: '12abc' is not an integer\n"},
        {"--eval_every=-1", "--eval_every: -1 is out of range [0, 1000000000]\n"},
        {"--lr=nan", "--lr: 'nan' is not a number\n"},
        {"--seed=1.5", "--seed: '1.5' is not a non-negative integer\n"},
        {"-x", "unknown option '-x' (see ./train --help)\n"},
        {"--resume", "option '--resume' needs a value (see ./train --help)\n"},
    };
    for (size_t i = 0; i < sizeof strict / sizeof strict[0]; i++) {
        snprintf(cmd, sizeof cmd, "./train %s", strict[i].args);
        int rc = run(cmd, out, sizeof out);
        if (rc != 2 || strcmp(out, strict[i].want) != 0) fail_msg("./train %s: exit %d: %s", strict[i].args, rc, out);
    }
}

// Range messages print values and bounds exactly: a value just outside a
// bound never reads as the bound itself (%g wrote "1e+06 is out of range
// [1, 1e+06]" for 1000001), for the model's keys and training's alike.
static void test_range_messages_exact(void **state) {
    static const struct { const char *arg, *want; } cases[] = {
        {"--rope_scaling_factor=1000001", "--rope_scaling_factor: 1000001 is out of range [1, 1000000]"},
        {"--rope_scaling_factor=1000000.5", "--rope_scaling_factor: 1000000.5 is out of range [1, 1000000]"},
        {"--rope_base=1", "--rope_base: 1 is out of range (1, 1000000000000]"},
        {"--beta1=0.9999991", "--beta1: 0.9999991 is out of range [0, 0.999999]"},
        {"--lr=1e31", "--lr: 1e+31 is out of range [0, 1e+30]"},
        {"--eps=1e-31", "--eps: 1e-31 is out of range [1e-30, 1]"},
        {"--threads=4097", "--threads: 4097 is out of range [0, 4096]"},
        {"--steps=1000000001", "--steps: 1000000001 is out of range [1, 1000000000]"},
        {"--warmup_steps=99999999999999999999", "--warmup_steps: 99999999999999999999 is out of range [0, 1000000000]"},
        {"--n_layer=257", "--n_layer: 257 is out of range [1, 256]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TrainOptions o;
        TrainArgs a;
        char err[512];
        int rc = parse(&o, &a, err, sizeof err, (char *)cases[i].arg, NULL);
        if (rc != -1 || strcmp(err, cases[i].want) != 0) fail_msg("%s: rc %d, message '%s'", cases[i].arg, rc, err);
    }
    // In a file, with the line; and min_lr against lr, both exact.
    const char *path = write_file("range.ini", "[positions]\nrope_scaling_factor = 1000000.5\n");
    TrainOptions o;
    TrainArgs a;
    char err[512], want[600];
    assert_int_equal(parse(&o, &a, err, sizeof err, (char *)path, NULL), -1);
    snprintf(want, sizeof want, "%s:2: rope_scaling_factor: 1000000.5 is out of range [1, 1000000]", path);
    assert_string_equal(err, want);
    assert_int_equal(parse(&o, &a, err, sizeof err, "--lr=0.0002", "--min_lr=0.00020001", NULL), -1);
    assert_string_equal(err, "--min_lr: min_lr (0.00020001) is larger than lr (0.0002)");
    // Through the binary: exit 2, the one line.
    static char out[4096];
    assert_int_equal(run("./train configs/tiny.ini --rope_scaling_factor=1000001", out, sizeof out), 2);
    assert_string_equal(out, "--rope_scaling_factor: 1000001 is out of range [1, 1000000]\n");
}

// options_flag: a training key as another program's flag (./sample --seed,
// ./eval --threads): OPTION_TABLE's type, range and default, read by
// opt_parse into the field at the offset given.
typedef struct { uint64_t seed; int threads; } FlagArgs;

// matmul = auto's rule (options_engine_for), each side of the ISA question
// answered by the test, so both run on any machine:
// fp32 onednn with AVX-512, openblas without it and always in the
// reproducible mode, bf16 onednn; a named engine is itself on either side.
// (test_train_run: what ./train's start line and machine.txt say of it.)
static void test_matmul_auto(void **state) {
    static const struct {
        const char *isa, *matmul, *precision;
        int reproducible;
        GPTMatmul want;
        const char *choice;
    } cases[] = {
        {"avx512", "auto", "fp32", 0, GPT_MATMUL_ONEDNN, "matmul = auto: onednn fp32 (AVX-512)"},
        {"avx2", "auto", "fp32", 0, GPT_MATMUL_OPENBLAS, "matmul = auto: openblas fp32 (no AVX-512)"},
        {"avx512", "auto", "fp32", 1, GPT_MATMUL_OPENBLAS, "matmul = auto: openblas fp32 (reproducible)"},
        {"avx2", "auto", "fp32", 1, GPT_MATMUL_OPENBLAS, "matmul = auto: openblas fp32 (reproducible)"},
        {"avx512", "auto", "bf16", 0, GPT_MATMUL_ONEDNN, "matmul = auto: onednn bf16"},
        {"avx2", "auto", "bf16", 0, GPT_MATMUL_ONEDNN, "matmul = auto: onednn bf16"},
        {"avx512", "openblas", "fp32", 0, GPT_MATMUL_OPENBLAS, "matmul = openblas"},
        {"avx2", "onednn", "fp32", 0, GPT_MATMUL_ONEDNN, "matmul = onednn"},
        {"avx512", "reference", "fp32", 0, GPT_MATMUL_REFERENCE, "matmul = reference"},
        {"avx2", "onednn", "bf16", 0, GPT_MATMUL_ONEDNN, "matmul = onednn"},
        {"avx512", "openblas", "fp32", 1, GPT_MATMUL_OPENBLAS, "matmul = openblas"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        GPTMatmul m;
        GPTPrecision p;
        const char *choice = NULL;
        char err[256] = "";
        int rc = options_engine_for(cases[i].matmul, cases[i].precision, cases[i].reproducible,
                                    strcmp(cases[i].isa, "avx512") == 0, 0, &m, &p, &choice, err, sizeof err);
        if (rc != 0 || m != cases[i].want || strcmp(choice, cases[i].choice) != 0)
            fail_msg("%s, matmul %s, %s, reproducible %d: rc %d, engine %d (want %d), '%s' %s", cases[i].isa,
                     cases[i].matmul, cases[i].precision, cases[i].reproducible, rc, (int)m, (int)cases[i].want,
                     choice ? choice : "(none)", err);
    }
    // ./train: auto is never refused in the reproducible mode, whatever the ISA; a named oneDNN is.
    TrainOptions o;
    TrainArgs a;
    char err[512];
    assert_int_equal(parse(&o, &a, err, sizeof err, "--reproducible=1", NULL), 0);
    GPTMatmul m;
    GPTPrecision p;
    GPTAttention att;
    const char *choice = NULL;
    assert_int_equal(options_matmul(&o, &m, &p, &att, &choice, err, sizeof err), 0);
    assert_int_equal(m, GPT_MATMUL_OPENBLAS);
    assert_int_equal(parse(&o, &a, err, sizeof err, "--reproducible=1", "--matmul=onednn", NULL), -1);
    assert_non_null(strstr(err, "reproducible = 1 runs on OpenBLAS in fp32"));
    // options_engine: the CPU answers.
    assert_int_equal(options_engine("auto", "fp32", 0, &m, &p, &choice, err, sizeof err), 0);
    assert_int_equal(m, engine_onednn_has_avx512() ? GPT_MATMUL_ONEDNN : GPT_MATMUL_OPENBLAS);
    assert_string_equal(choice, engine_onednn_has_avx512() ? "matmul = auto: onednn fp32 (AVX-512)"
                                                           : "matmul = auto: openblas fp32 (no AVX-512)");
}

// matmul = auto measured (matmul_auto.h): a choice only for auto in fp32
// outside the reproducible mode; the faster of the two times, OpenBLAS on a
// tie, and the line that says so. (test_train_run: the trial in ./train.)
static void test_matmul_auto_pick(void **state) {
    assert_int_equal(matmul_auto_chooses("auto", "fp32", 0), 1);
    assert_int_equal(matmul_auto_chooses("auto", "bf16", 0), 0);
    assert_int_equal(matmul_auto_chooses("auto", "fp32", 1), 0);
    assert_int_equal(matmul_auto_chooses("openblas", "fp32", 0), 0);
    assert_int_equal(matmul_auto_chooses("onednn", "fp32", 0), 0);
    char line[256];
    double ms[2];
    ms[GPT_MATMUL_OPENBLAS] = 47.9, ms[GPT_MATMUL_ONEDNN] = 41.2;
    assert_int_equal(matmul_auto_pick(ms, 0, line, sizeof line), GPT_MATMUL_ONEDNN);
    assert_string_equal(line, "matmul = auto: onednn fp32 (measured per forward+backward: onednn 41.20 ms, "
                              "openblas 47.90 ms)");
    ms[GPT_MATMUL_ONEDNN] = 50.0;
    assert_int_equal(matmul_auto_pick(ms, 1, line, sizeof line), GPT_MATMUL_OPENBLAS);
    assert_string_equal(line, "matmul = auto: openblas fp32 (measured per forward+backward: openblas 47.90 ms, "
                              "onednn 50.00 ms, as the test hook says)");
    ms[GPT_MATMUL_ONEDNN] = 47.9;
    assert_int_equal(matmul_auto_pick(ms, 0, line, sizeof line), GPT_MATMUL_OPENBLAS);
}

static void test_training_key_as_flag(void **state) {
    FlagArgs args = {7, 3};
    char err[256];
    OptSpec seed = options_flag("seed", offsetof(FlagArgs, seed), "N", "sampling seed");
    OptSpec threads = options_flag("threads", offsetof(FlagArgs, threads), "N", NULL);
    assert_string_equal(seed.name, "seed");
    assert_string_equal(seed.help, "sampling seed");
    assert_string_equal(seed.def, "1");
    assert_null(seed.section);
    assert_string_equal(threads.help, "OpenMP and OpenBLAS threads; 0 = all cores");
    assert_true(threads.min == 0 && threads.max == 4096);
    uint64_t *s = (uint64_t *)((char *)&args + seed.offset);
    int *t = (int *)((char *)&args + threads.offset);
    assert_ptr_equal(s, &args.seed);
    assert_ptr_equal(t, &args.threads);
    assert_int_equal(opt_parse(&seed, "18446744073709551615", s, err, sizeof err), 0);
    assert_true(args.seed == UINT64_MAX);
    args.seed = 7;
    assert_int_equal(opt_parse(&seed, "-1", s, err, sizeof err), -1);
    assert_string_equal(err, "'-1' is not a non-negative integer");
    assert_int_equal(opt_parse(&seed, "18446744073709551616", s, err, sizeof err), -1);
    assert_string_equal(err, "'18446744073709551616' is not a non-negative integer");
    assert_int_equal(opt_parse(&seed, "", s, err, sizeof err), -1);
    assert_true(args.seed == 7);                                 // untouched on failure
    assert_int_equal(opt_parse(&threads, "4096", t, err, sizeof err), 0);
    assert_int_equal(args.threads, 4096);
    assert_int_equal(opt_parse(&threads, "4097", t, err, sizeof err), -1);
    assert_string_equal(err, "4097 is out of range [0, 4096]");
    assert_int_equal(opt_parse(&threads, "16777216", t, err, sizeof err), -1);
    assert_int_equal(opt_parse(&threads, "2x", t, err, sizeof err), -1);
    assert_string_equal(err, "'2x' is not an integer");
    assert_int_equal(args.threads, 4096);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_small_ini_equals_defaults),
        cmocka_unit_test(test_file_values_and_cli_wins),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_bad_command_lines),
        cmocka_unit_test(test_resume_fixes_model_keys),
        cmocka_unit_test(test_write_ini_round_trip),
        cmocka_unit_test(test_binary_help_and_exit_codes),
        cmocka_unit_test(test_range_messages_exact),
        cmocka_unit_test(test_training_key_as_flag),
        cmocka_unit_test(test_matmul_auto),
        cmocka_unit_test(test_matmul_auto_pick),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
