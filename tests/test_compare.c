// test_compare.c: the comparison pipeline (scripts/run/compare.sh) end to end on a
// corpus the test writes itself, and the property it rests on: runs that
// differ only in --pos start from the same values in every shared tensor and
// see the same batches.
//
// The assertions are on the report's content (a row per scheme, both plots,
// the extrapolation table with learned n/a beyond T), never on which scheme wins.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util_study.h"

#include "model/gpt.h"
#include "format/safetensors.h"

static char dir[128];
static char err[512];

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int setup(void **state) {
    return make_quick_study(dir, sizeof dir, "compare", 400);
}

static int teardown(void **state) {
    return run_shell("rm -rf %s", dir) == 0 ? 0 : -1;
}

static void test_quick_comparison_writes_report(void **state) {
    if (run_shell("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null")) { fprintf(stderr, "no matplotlib: skipped\n"); skip(); }
    char cmd[1024], path[256];
    snprintf(cmd, sizeof cmd, "bash scripts/run/compare.sh --seeds 2 --config %s/quick.ini --out %s/cmp > %s/cmp.log 2>&1 "
             "|| { cat %s/cmp.log; exit 1; }", dir, dir, dir, dir);
    assert_int_equal(run_shell("%s", cmd), 0);
    const char *schemes[] = {"rope", "learned", "sinusoidal", "t5"};
    snprintf(path, sizeof path, "%s/cmp/report.md", dir);
    const char *md = slurp(path);
    assert_non_null(md);
    for (int i = 0; i < 4; i++) {
        char row[64];
        snprintf(row, sizeof row, "\n| %s | ", schemes[i]);
        // three tables: final loss, steps to target, extrapolation
        const char *at = md;
        int rows = 0;
        while ((at = strstr(at, row)) != NULL) { rows++; at++; }
        assert_int_equal(rows, 3);
    }
    assert_non_null(strstr(md, "## Length extrapolation"));
    assert_non_null(strstr(md, "| T=16 | T=32 | T=64 |"));
    assert_non_null(strstr(md, "| learned | "));
    const char *learned_ex = strstr(strstr(md, "## Length extrapolation"), "| learned | ");
    assert_non_null(learned_ex);
    assert_non_null(strstr(learned_ex, "| n/a | n/a |"));
    assert_non_null(strstr(md, "speed-up"));
    const char *plots[] = {"val_loss_vs_step.png", "val_loss_vs_time.png"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/cmp/%s", dir, plots[i]);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        unsigned char magic[8];
        assert_int_equal(fread(magic, 1, 8, f), 8);
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fclose(f);
        assert_memory_equal(magic, "\x89PNG\r\n\x1a\n", 8);
        assert_true(size > 10000);          // a real plot, not an empty canvas
        assert_non_null(strstr(md, plots[i]));
    }
    // Interrupted or finished runs are reused: a second call trains nothing.
    snprintf(cmd, sizeof cmd, "bash scripts/run/compare.sh --seeds 2 --config %s/quick.ini --out %s/cmp 2>&1 "
             "| grep -c 'finished earlier, reused'", dir, dir);
    FILE *p = popen(cmd, "r");
    int reused = 0;
    assert_int_equal(fscanf(p, "%d", &reused), 1);
    pclose(p);
    assert_int_equal(reused, 8);
}

// Debug states of two schemes at the same seed: same batch, and the same
// values in every tensor both schemes have.
static void test_schemes_share_init_and_batches(void **state) {
    const char *schemes[] = {"rope", "learned", "sinusoidal", "t5", "alibi", "none"};
    StFile *files[6];
    for (int i = 0; i < 6; i++) {
        char cmd[1024], path[256];
        snprintf(path, sizeof path, "%s/ds_%s.safetensors", dir, schemes[i]);
        snprintf(cmd, sizeof cmd, "./train %s/quick.ini --quiet --pos=%s --seed=3 --debug-state %s",
                 dir, schemes[i], path);
        assert_int_equal(run_shell("%s", cmd), 0);
        assert_int_equal(st_open(&files[i], path, err, sizeof err), 0);
    }
    for (int i = 1; i < 6; i++) {
        int shared = 0;
        for (int k = 0; k < st_num_tensors(files[0]); k++) {
            const StTensor *a = st_tensor_at(files[0], k);
            if (strncmp(a->name, "grad.", 5) == 0 || strcmp(a->name, "loss") == 0) continue;
            const StTensor *b = st_find(files[i], a->name);
            if (!b) continue;                       // a tensor only rope has (none here)
            assert_int_equal(a->nbytes, b->nbytes);
            assert_memory_equal(a->data, b->data, a->nbytes);
            shared++;
        }
        assert_true(shared >= 2 + 12 + 2);          // inputs, targets, wte, 12 per layer, ln_f
    }
    // The batch is the same and non-trivial; the schemes' own tensors differ in presence only.
    assert_non_null(st_find(files[1], "wpe"));
    assert_null(st_find(files[0], "wpe"));
    assert_non_null(st_find(files[3], "rel_bias"));
    for (int i = 0; i < 6; i++) st_close(files[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schemes_share_init_and_batches),
        cmocka_unit_test(test_quick_comparison_writes_report),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
