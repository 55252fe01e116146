// test_train_rundir.c: a run directory holds the run's record and nothing
// else can write through it (src/train/run_dir.h), and a run carries its
// data (src/data/data_record.h). Each test is a reproducer of an outside
// audit's finding, which failed before the change:
//   - a link planted as train.lock, machine.txt, config.ini, log.csv or the
//     checkpoint, and a FIFO as machine.txt, are refused in one line (the
//     file linked to is untouched, nothing hangs);
//   - --resume refuses a config.ini that lacks a key, holds another value,
//     or was cut in half, naming the key; a change given as --key=value is
//     taken and recorded (config.ini after the first save, machine.txt);
//   - a resume with nothing to do changes no file and says so;
//   - a new run records its data (data.txt: checksums, and the recipe of
//     the data's own record); --resume refuses data changed since;
//   - --resume refuses a model.safetensors that is not the run's own
//     instead of replacing it;
//   - ./train --init-from of weights that overflow the model exits 1 (a bad
//     file), not 3 (divergence); --init-from followed by an option is refused.
// Run from the repository root with ./train and ./prepare built (make test).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util_run.h"

// A finished 30-step run every test copies (saves every 10 steps).
#define RUN_ARGS "configs/tiny.ini %s --threads=1 --steps=30 --eval_every=10 --save_every=10 --lr=0.01 --quiet"
static char base[600];

static int setup(void **state) {
    if (make_data_dir("rundir") != 0) return -1;
    snprintf(base, sizeof base, "%s/base", dir);
    if (run("./train " RUN_ARGS " --out_dir=%s", data_args, base) != 0) {
        fprintf(stderr, "the base run failed: %s\n", out);
        return -1;
    }
    return 0;
}

// A fresh copy of the base run at dir/NAME; returns its path (static).
static const char *copy_of_base(const char *name) {
    static char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (run("rm -rf '%s' && cp -r '%s' '%s'", path, base, path) != 0) fail_msg("cp: %s", out);
    return path;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

// The last command failed with status want and printed one line holding each of a and b.
static void expect_refusal(int rc, int want, const char *a, const char *b) {
    if (rc != want || count_lines(out) != 1 || !strstr(out, a) || (b && !strstr(out, b)))
        fail_msg("want exit %d and one line holding \"%s\"%s%s, got exit %d:\n%s", want, a, b ? " and " : "",
                 b ? b : "", rc, out);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_text(const char *path, const char *want) {
    char got[256] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(got, 1, sizeof got - 1, f);
    got[n] = 0;
    fclose(f);
    if (strcmp(got, want) != 0) fail_msg("%s: holds \"%s\", want \"%s\" (written through a link)", path, got, want);
}

// ---------------------------------------------------------------- planted files

static void test_planted_links_refused(void **state) {
    static const char *const names[] = {"train.lock", "machine.txt", "config.ini", "log.csv",
                                        "checkpoint.safetensors", "data.txt"};
    char victim[700], target[800];
    snprintf(victim, sizeof victim, "%s/precious.txt", dir);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        write_text(victim, "precious\n");
        const char *run_dir = copy_of_base("planted");
        snprintf(target, sizeof target, "%s/%s", run_dir, names[i]);
        assert_int_equal(unlink(target), 0);
        assert_int_equal(symlink(victim, target), 0);
        int rc = run("./train --resume %s --steps=40 --quiet", run_dir);
        expect_refusal(rc, 2, names[i], "symbolic link");
        expect_text(victim, "precious\n");
    }
    // A new run into a directory where a link waits as machine.txt: refused, the file untouched.
    char new_dir[700];
    snprintf(new_dir, sizeof new_dir, "%s/new", dir);
    assert_int_equal(run("rm -rf '%s' && mkdir '%s' && ln -s '%s' '%s/machine.txt'", new_dir, new_dir, victim, new_dir),
                     0);
    int rc = run("./train " RUN_ARGS " --out_dir=%s", data_args, new_dir);
    expect_refusal(rc, 1, "machine.txt", "symbolic link");
    expect_text(victim, "precious\n");
}

static void test_planted_fifo_refused(void **state) {
    char fifo_dir[700], fifo[800];
    snprintf(fifo_dir, sizeof fifo_dir, "%s/fifo", dir);
    snprintf(fifo, sizeof fifo, "%s/machine.txt", fifo_dir);
    assert_int_equal(run("rm -rf '%s' && mkdir '%s'", fifo_dir, fifo_dir), 0);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    // timeout: before the change ./train waited for a reader for ever
    int rc = run("timeout 60 ./train " RUN_ARGS " --out_dir=%s", data_args, fifo_dir);
    expect_refusal(rc, 1, "machine.txt", "FIFO");
}

// ---------------------------------------------------------------- a damaged config.ini

static void test_resume_refuses_damaged_config(void **state) {
    // lr deleted: before the change it trained on at the default 2e-3 (the run used 1e-2)
    const char *r = copy_of_base("damaged");
    assert_int_equal(run("sed -i '/^lr = /d' '%s/config.ini'", r), 0);
    int rc = run("./train --resume %s --steps=40 --quiet", r);
    expect_refusal(rc, 2, "lacks the key 'lr'", "lr = 0.01");
    // another value
    r = copy_of_base("damaged");
    assert_int_equal(run("sed -i 's/^lr = .*/lr = 0.002/' '%s/config.ini'", r), 0);
    rc = run("./train --resume %s --steps=40 --quiet", r);
    expect_refusal(rc, 2, "lr = 0.002 differs from the run's record", "--lr=0.002");
    // cut in half at a line's end: before the change a finished run started again with the default steps
    r = copy_of_base("damaged");
    assert_int_equal(run("f='%s/config.ini'; head -n $(( $(wc -l < \"$f\") / 2 )) \"$f\" > \"$f.cut\" && "
                         "mv \"$f.cut\" \"$f\"", r), 0);
    rc = run("./train --resume %s --quiet", r);
    expect_refusal(rc, 2, "lacks the key", NULL);
    char rows[64][160];
    assert_int_equal(read_log(r, rows, 64), 31);   // the run as it was: 30 steps and row 0
}

static void test_resume_change_is_explicit_and_recorded(void **state) {
    const char *r = copy_of_base("changed");
    int rc = run("./train --resume %s --steps=40 --quiet", r);
    if (rc != 0) fail_msg("resume --steps=40: exit %d: %s", rc, out);
    assert_int_equal(run("grep -x 'steps = 40' '%s/config.ini' && grep -x 'changed = steps 30 -> 40' "
                         "'%s/machine.txt'", r, r), 0);
    // recorded in the checkpoint too: a plain resume of the longer run takes config.ini as it is now
    rc = run("./train --resume %s --quiet", r);
    if (rc != 0 || !strstr(out, "finished (step 40 of 40)")) fail_msg("plain resume: exit %d: %s", rc, out);
}

// ---------------------------------------------------------------- nothing to do

static void test_resume_with_nothing_to_do_changes_nothing(void **state) {
    const char *r = copy_of_base("noop");
    assert_int_equal(run("cd '%s' && md5sum * > ../noop.md5", r), 0);
    // before the change: steps = 20 written into config.ini, a start block appended to machine.txt
    int rc = run("./train --resume %s --steps=20", r);
    if (rc != 0 || !strstr(out, "nothing to do and no file changed")) fail_msg("exit %d: %s", rc, out);
    if (run("cd '%s' && md5sum -c --quiet ../noop.md5 && test $(ls | wc -l) = 7", r) != 0)
        fail_msg("a file of the run changed: %s", out);
}

// ---------------------------------------------------------------- the run's data

static void test_run_records_its_data(void **state) {
    // data.txt: the three files' checksums and the recipe of the data directory's own record
    int rc = run("grep -q '^tokenizer_fnv1a = [0-9a-f]\\{16\\}$' '%s/data.txt' && "
                 "grep -qx 'vocab_size = 320' '%s/data.txt' && grep -qx 'val_fraction = 0.1' '%s/data.txt' && "
                 "grep -qx 'input = %s/corpus.txt' '%s/data.txt'", base, base, base, dir, base);
    if (rc != 0) fail_msg("%s/data.txt does not record the data and its recipe: %s", base, out);
    // the recorded tokenizer checksum is the model's tokenizer_checksum (bpe_checksum: the file's FNV-1a)
    rc = run("a=$(sed -n 's/^tokenizer_fnv1a = //p' '%s/data.txt'); "
             "head -c 8 '%s/model.safetensors' >/dev/null && grep -a -q \"\\\"tokenizer_checksum\\\":\\\"$a\\\"\" "
             "'%s/model.safetensors'", base, base, base);
    if (rc != 0) fail_msg("data.txt's tokenizer_fnv1a is not the model's tokenizer_checksum: %s", out);
    // ./prepare --record of the run's record: its data directory holds it (nothing to do)
    rc = run("./prepare --record %s/data.txt", base);
    if (rc != 0 || !strstr(out, "nothing to do")) fail_msg("./prepare --record: exit %d: %s", rc, out);
    // data changed under a run (two tokens swapped: a valid token file still): --resume refuses it
    const char *r = copy_of_base("data-changed");
    assert_int_equal(run("cp '%s/data/train.bin' '%s/train.bin.orig' && /usr/bin/python3 -c \"import sys; "
                         "p='%s/data/train.bin'; b=bytearray(open(p,'rb').read()); i=1024+2*100; "
                         "b[i:i+2],b[i+2:i+4]=b[i+2:i+4],b[i:i+2]; assert b!=open(p,'rb').read(); "
                         "open(p,'wb').write(b)\"", dir, dir, dir), 0);
    rc = run("./train --resume %s --steps=40 --quiet", r);
    expect_refusal(rc, 1, "train.bin: FNV-1a", "not the file the run trained on");
    assert_int_equal(run("mv '%s/train.bin.orig' '%s/data/train.bin'", dir, dir), 0);   // back, for the other tests
}

static void test_resume_refuses_foreign_model(void **state) {
    const char *r = copy_of_base("foreign");
    char other[700];
    snprintf(other, sizeof other, "%s/other", dir);
    assert_int_equal(run("./train " RUN_ARGS " --out_dir=%s --d_model=48 --n_head=2 --steps=2", data_args, other), 0);
    assert_int_equal(run("cp '%s/model.safetensors' '%s/model.safetensors'", other, r), 0);
    int rc = run("./train --resume %s --steps=40 --quiet", r);
    expect_refusal(rc, 1, "model.safetensors: is not this run's model", NULL);
    assert_int_equal(run("cmp '%s/model.safetensors' '%s/model.safetensors'", other, r), 0);   // left as it was
}

// ---------------------------------------------------------------- --init-from

static void test_init_from_overflowing_weights(void **state) {
    // every weight of the base model 1e38: finite values whose products overflow
    char big[700];
    snprintf(big, sizeof big, "%s/big.safetensors", dir);
    int rc = run("/usr/bin/python3 -c \"import json,struct,sys; b=open('%s/model.safetensors','rb').read(); "
                 "n=struct.unpack('<Q',b[:8])[0]; h=b[8:8+n]; d=bytearray(b[8+n:]); "
                 "d[:]=struct.pack('<f',1e38)*(len(d)//4); open('%s','wb').write(b[:8+n]+bytes(d))\"", base, big);
    assert_int_equal(rc, 0);
    rc = run("./train " RUN_ARGS " --out_dir=%s/init --init-from %s --steps=2", data_args, dir, big);
    expect_refusal(rc, 1, "--init-from", "a bad weights file");
    rc = run("./train --init-from --steps=1");
    expect_refusal(rc, 2, "'--init-from' needs a value", "--steps=1");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planted_links_refused),
        cmocka_unit_test(test_planted_fifo_refused),
        cmocka_unit_test(test_resume_refuses_damaged_config),
        cmocka_unit_test(test_resume_change_is_explicit_and_recorded),
        cmocka_unit_test(test_resume_with_nothing_to_do_changes_nothing),
        cmocka_unit_test(test_run_records_its_data),
        cmocka_unit_test(test_resume_refuses_foreign_model),
        cmocka_unit_test(test_init_from_overflowing_weights),
    };
    return cmocka_run_group_tests(tests, setup, remove_data_dir);
}
