// test_data_corpus.c: the second corpus, GCIDE (Debian package dict-gcide),
// through `scripts/run/get_data.sh gcide` end to end, into a temporary directory
// (ROPELAB_DATA_DIR), so data/ is never touched; the script's command line;
// and configs/compare-gcide.ini against configs/compare.ini. Runs from the
// repository root.
//
// The full clean (about 29 MB, 4-6 s here) runs once; the size check is on
// that full output. When dict-gcide is not installed and cannot be (not root,
// or apt-get failed), the tests that need it say so and are skipped.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "util_shell.h"

// Where dict-gcide puts its database (-D to try the skip path elsewhere).
#ifndef GCIDE_DICT
#define GCIDE_DICT "/usr/share/dictd/gcide.dict.dz"
#endif
#ifndef GCIDE_INDEX
#define GCIDE_INDEX "/usr/share/dictd/gcide.index"
#endif

// Measured with dict-gcide 0.48.5+nmu2 (Debian 12): 29,148,982 bytes and
// 126,236 entries. The ranges allow about 3% either way, for a revised package;
// a cleaner that keeps the source tags ("[1913 Webster]" alone is ~3.3 MB) or
// loses whole entries falls outside them.
#define GCIDE_MIN_BYTES 28300000L
#define GCIDE_MAX_BYTES 30000000L
#define GCIDE_MIN_ENTRIES 122000L
#define GCIDE_MAX_ENTRIES 130000L

static char dir[64];              // the temporary data directory
static char out_path[128];        // dir/gcide.txt
static char *corpus;              // its contents
static size_t corpus_len;
static int corpus_state;          // 0: not tried, 1: ready, -1: unavailable (skip), -2: get_data.sh failed
static char skip_reason[256];
static char run_output[8192];     // what get_data.sh printed

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    if (!b || fread(b, 1, (size_t)len, f) != (size_t)len) { fclose(f); free(b); return NULL; }
    b[len] = 0;
    fclose(f);
    if (n) *n = (size_t)len;
    return b;
}

static void read_into(const char *path, char *buf, size_t cap) {
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
}

static int have_gcide(void) {
    return access(GCIDE_DICT, R_OK) == 0 && access(GCIDE_INDEX, R_OK) == 0;
}

// Runs `scripts/run/get_data.sh gcide` once into dir; skips the calling test
// (with the reason printed) when dict-gcide is missing and cannot be installed.
static void need_corpus(void) {
    if (corpus_state == 0) {
        if (!have_gcide() && geteuid() != 0) {
            snprintf(skip_reason, sizeof skip_reason,
                     "dict-gcide is not installed (%s) and this user cannot install it (not root); "
                     "install it with: sudo apt-get install dict-gcide", GCIDE_DICT);
            corpus_state = -1;
        } else {
            char cmd[512];
            snprintf(cmd, sizeof cmd, "ROPELAB_DATA_DIR=%s scripts/run/get_data.sh gcide >%s/run1.txt 2>&1", dir, dir);
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            int rc = run_shell("%s", cmd);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            snprintf(cmd, sizeof cmd, "%s/run1.txt", dir);
            read_into(cmd, run_output, sizeof run_output);
            if (rc != 0 && !have_gcide()) {
                snprintf(skip_reason, sizeof skip_reason,
                         "dict-gcide is not installed and apt-get could not install it: %.150s", run_output);
                corpus_state = -1;
            } else if (rc != 0 || !(corpus = read_file(out_path, &corpus_len))) {
                corpus_state = -2;
            } else {
                corpus_state = 1;
                fprintf(stderr, "get_data.sh gcide: %.1f s, %zu bytes\n",
                        (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec), corpus_len);
            }
        }
    }
    if (corpus_state == -1) {
        fprintf(stderr, "test_data_corpus: %s: skipped\n", skip_reason);
        skip();
    }
    if (corpus_state == -2) {
        print_error("scripts/run/get_data.sh gcide failed or wrote no %s; it printed:\n%s\n", out_path, run_output);
        fail();
    }
}

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
// Returns the offset of the first bad byte, or len.
static size_t utf8_check(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t n;
        uint32_t cp, min;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xe0) == 0xc0) { n = 1; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { n = 2; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { n = 3; cp = c & 0x07; min = 0x10000; }
        else return i;
        for (size_t k = 1; k <= n; k++) {
            if (i + k >= len || (s[i + k] & 0xc0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
        i += n + 1;
    }
    return len;
}

static void expect_contains(const char *text, const char *want) {
    if (!strstr(text, want)) {
        print_error("the cleaned GCIDE text lacks \"%s\"\n", want);
        fail();
    }
}

static void expect_absent(const char *text, const char *bad) {
    const char *p = strstr(text, bad);
    if (p) {
        print_error("the cleaned GCIDE text still holds \"%s\", at byte %td: \"%.80s\"\n", bad, p - text, p);
        fail();
    }
}

static int setup(void **state) {
    strcpy(dir, "/tmp/ropelab_corpus_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(out_path, sizeof out_path, "%s/gcide.txt", dir);
    return 0;
}

static int teardown(void **state) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    free(corpus);
    return run_shell("%s", cmd) == 0 ? 0 : -1;
}

// The whole cleaned dictionary: valid UTF-8 without NUL, the expected size,
// known entries in their plain form, no markup left.
static void test_gcide_text(void **state) {
    need_corpus();
    assert_int_equal(memchr(corpus, 0, corpus_len) == NULL, 1);
    size_t bad = utf8_check((const unsigned char *)corpus, corpus_len);
    if (bad != corpus_len) {
        print_error("invalid UTF-8 at byte %zu\n", bad);
        fail();
    }
    if ((long)corpus_len < GCIDE_MIN_BYTES || (long)corpus_len > GCIDE_MAX_BYTES) {
        print_error("%s: %zu bytes, expected %ld..%ld\n", out_path, corpus_len, GCIDE_MIN_BYTES, GCIDE_MAX_BYTES);
        fail();
    }
    // The cleaner's summary, "gcide_to_text: N entries, B bytes -> FILE", and
    // the paragraphs of the file agree with it.
    const char *summary = strstr(run_output, "gcide_to_text: ");
    assert_non_null(summary);
    long entries = 0, bytes = 0;
    assert_int_equal(sscanf(summary, "gcide_to_text: %ld entries, %ld bytes", &entries, &bytes), 2);
    assert_int_equal(bytes, (long)corpus_len);
    if (entries < GCIDE_MIN_ENTRIES || entries > GCIDE_MAX_ENTRIES) {
        print_error("%ld entries, expected %ld..%ld\n", entries, GCIDE_MIN_ENTRIES, GCIDE_MAX_ENTRIES);
        fail();
    }
    long paragraphs = 1;
    for (const char *p = corpus; (p = strstr(p, "\n\n")); p += 2) paragraphs++;
    assert_int_equal(paragraphs, entries);

    // Layout: starts with the first entry (the dictd header is gone), one
    // blank line between entries, one newline at the end, no spaces at line ends.
    assert_memory_equal(corpus, "0 adj.\n1. indicating the absence", 32);
    assert_int_equal(corpus[corpus_len - 1], '\n');
    assert_int_not_equal(corpus[corpus_len - 2], '\n');
    expect_absent(corpus, "\n\n\n");
    expect_absent(corpus, " \n");
    expect_absent(corpus, "\t");
    expect_absent(corpus, "\r");

    // Headwords with their pronunciation and part of speech, definitions,
    // quotations; character codes turned into letters.
    expect_contains(corpus, "\nAbandon (ȧ-băn′dŭn), v. t. [imp. & p. p. Abandoned (-dŭnd); "
                            "p. pr. & vb. n. Abandoning.]");
    expect_contains(corpus, "\n1. To cast or drive out; to banish; to expel; to reject. [Obs.]\n");
    expect_contains(corpus, "\nHope was overthrown, yet could not be abandoned. --I. Taylor.\n");
    expect_contains(corpus, "\nLight (līt), n. [OE. light, liht, AS. leíht;");
    expect_contains(corpus, "\nTête-à-tête (tāt‵ȧ-tāt′), n. [F., head to head.");
    expect_contains(corpus, "\n1-dodecanol n. An insoluble solid alcohol (C12H25OH)");
    expect_contains(corpus, "\nZymotic disease (Med.), any epidemic, endemic, contagious");
    expect_contains(corpus, "\nZythepsary (zĭ-thĕp′sȧ-rŭ), n. ");

    // No dictd header, source tags, braces or character codes.
    expect_absent(corpus, "00-database");
    expect_absent(corpus, "[1913 Webster");
    expect_absent(corpus, "[Webster 1913");
    expect_absent(corpus, "[WordNet 1.5");
    expect_absent(corpus, "[PJC]");
    expect_absent(corpus, "{");
    expect_absent(corpus, "}");
    expect_absent(corpus, "[a^]");
    expect_absent(corpus, "[=e]");
    expect_absent(corpus, "['e]");
    expect_absent(corpus, "[ae]");
    expect_absent(corpus, "A*ban\"don");
}

// A second run finds the file and leaves it alone.
static void test_gcide_idempotent(void **state) {
    need_corpus();
    struct stat before, after;
    assert_int_equal(stat(out_path, &before), 0);
    char cmd[512], out[1024];
    snprintf(cmd, sizeof cmd, "ROPELAB_DATA_DIR=%s scripts/run/get_data.sh gcide >%s/run2.txt 2>&1", dir, dir);
    assert_int_equal(run_shell("%s", cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/run2.txt", dir);
    read_into(cmd, out, sizeof out);
    if (!strstr(out, "is already there")) {
        print_error("second run printed: %s\n", out);
        fail();
    }
    assert_int_equal(stat(out_path, &after), 0);
    assert_int_equal(after.st_size, before.st_size);
    assert_int_equal(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
    assert_int_equal(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
}

// --limit N cleans the first N entries: byte for byte the start of the full
// output (so the cleaning of an entry depends on that entry alone, and runs agree).
static void test_gcide_limit_is_prefix(void **state) {
    need_corpus();
    char cmd[512], path[128];
    snprintf(path, sizeof path, "%s/prefix.txt", dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 scripts/run/gcide_to_text.py --limit 3000 -o %s >%s/run3.txt 2>&1",
             path, dir);
    assert_int_equal(run_shell("%s", cmd), 0);
    size_t n;
    char *prefix = read_file(path, &n);
    assert_non_null(prefix);
    assert_true(n > 100000 && n < corpus_len);
    assert_memory_equal(prefix, corpus, n);
    assert_int_equal(corpus[n], '\n');   // the full text goes on with the blank line before entry 3001
    free(prefix);
    snprintf(cmd, sizeof cmd, "%s/run3.txt", dir);
    char out[512];
    read_into(cmd, out, sizeof out);
    if (!strstr(out, "gcide_to_text: 3000 entries")) {
        print_error("gcide_to_text.py --limit 3000 printed: %s\n", out);
        fail();
    }
}

// --help lists the corpora; an unknown name is one line on stderr and exit 2,
// and writes nothing. Needs no package.
static void test_get_data_command_line(void **state) {
    char cmd[512], out[2048], err[1024];
    snprintf(cmd, sizeof cmd, "scripts/run/get_data.sh --help >%s/help.txt 2>&1", dir);
    assert_int_equal(run_shell("%s", cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/help.txt", dir);
    read_into(cmd, out, sizeof out);
    assert_non_null(strstr(out, "kjv"));
    assert_non_null(strstr(out, "gcide"));

    snprintf(cmd, sizeof cmd, "ROPELAB_DATA_DIR=%s/unknown scripts/run/get_data.sh nosuchcorpus >%s/u.out 2>%s/u.err",
             dir, dir, dir);
    assert_int_equal(run_shell("%s", cmd), 2);
    snprintf(cmd, sizeof cmd, "%s/u.out", dir);
    read_into(cmd, out, sizeof out);
    assert_string_equal(out, "");
    snprintf(cmd, sizeof cmd, "%s/u.err", dir);
    read_into(cmd, err, sizeof err);
    char *nl = strchr(err, '\n');
    assert_non_null(nl);
    assert_string_equal(nl + 1, "");   // exactly one line
    assert_non_null(strstr(err, "nosuchcorpus"));
    snprintf(cmd, sizeof cmd, "%s/unknown", dir);
    assert_int_not_equal(access(cmd, F_OK), 0);
}

// ---- configs/compare-gcide.ini: compare.ini's keys, but [data] on data/gcide/

#define MAX_KEYS 128
typedef struct { char section[32], key[64], value[256]; } Entry;

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = 0;
    return s;
}

// The key = value lines of an INI file, comments (; or # to the end) removed.
static int read_ini(const char *path, Entry *out) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512], section[32] = "";
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char *c = strpbrk(line, ";#");
        if (c) *c = 0;
        char *s = trim(line);
        if (!*s) continue;
        if (*s == '[') {
            char *e = strchr(s, ']');
            assert_non_null(e);
            *e = 0;
            snprintf(section, sizeof section, "%s", s + 1);
            continue;
        }
        char *eq = strchr(s, '=');
        assert_non_null(eq);
        *eq = 0;
        assert_true(n < MAX_KEYS);
        snprintf(out[n].section, sizeof out[n].section, "%s", section);
        snprintf(out[n].key, sizeof out[n].key, "%s", trim(s));
        snprintf(out[n].value, sizeof out[n].value, "%s", trim(eq + 1));
        n++;
    }
    fclose(f);
    return n;
}

static void test_compare_gcide_config(void **state) {
    static Entry a[MAX_KEYS], b[MAX_KEYS];
    int na = read_ini("configs/compare.ini", a), nb = read_ini("configs/compare-gcide.ini", b);
    assert_int_equal(na, nb);
    int data_keys = 0;
    for (int i = 0; i < na; i++) {
        if (strcmp(a[i].section, b[i].section) || strcmp(a[i].key, b[i].key)) {
            print_error("key %d: [%s] %s in compare.ini, [%s] %s in compare-gcide.ini\n",
                        i, a[i].section, a[i].key, b[i].section, b[i].key);
            fail();
        }
        if (!strcmp(b[i].section, "data")) {
            data_keys++;
        } else if (strcmp(a[i].value, b[i].value)) {
            print_error("[%s] %s: %s in compare.ini, %s in compare-gcide.ini\n",
                        a[i].section, a[i].key, a[i].value, b[i].value);
            fail();
        }
    }
    assert_int_equal(data_keys, 3);
}

// ---- each config's [data] is the data of its record (configs/data/*.txt), the recipe
// make run and make compare make it by (scripts/run/data_dir.sh)

static void test_configs_name_their_records_data(void **state) {
    static const struct { const char *config, *record; } PAIRS[] = {
        {"configs/small.ini", "configs/data/kjv.txt"},
        {"configs/tiny.ini", "configs/data/kjv.txt"},
        {"configs/medium.ini", "configs/data/kjv.txt"},
        {"configs/compare.ini", "configs/data/kjv-byte-classes.txt"},
        {"configs/compare-medium.ini", "configs/data/kjv-byte-classes.txt"},
        {"configs/compare-llama.ini", "configs/data/kjv-byte-classes.txt"},
        {"configs/compare-quick.ini", "configs/data/kjv-byte-classes.txt"},
        {"configs/compare-gcide.ini", "configs/data/gcide-byte-classes.txt"},
    };
    static const char *const KEYS[][2] = {{"tokenizer", "tokenizer"}, {"train_file", "train"}, {"val_file", "val"}};
    for (size_t p = 0; p < sizeof PAIRS / sizeof PAIRS[0]; p++) {
        static Entry c[MAX_KEYS], r[MAX_KEYS];
        int nc = read_ini(PAIRS[p].config, c), nr = read_ini(PAIRS[p].record, r);
        for (int k = 0; k < 3; k++) {
            const char *in_config = NULL, *in_record = NULL;
            for (int i = 0; i < nc; i++)
                if (!strcmp(c[i].section, "data") && !strcmp(c[i].key, KEYS[k][0])) in_config = c[i].value;
            for (int i = 0; i < nr; i++)
                if (!strcmp(r[i].section, "files") && !strcmp(r[i].key, KEYS[k][1])) in_record = r[i].value;
            if (!in_config || !in_record || strcmp(in_config, in_record) != 0) {
                print_error("%s: [data] %s = %s, but its record %s names %s\n", PAIRS[p].config, KEYS[k][0],
                            in_config ? in_config : "(none)", PAIRS[p].record, in_record ? in_record : "(none)");
                fail();
            }
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gcide_text),
        cmocka_unit_test(test_configs_name_their_records_data),
        cmocka_unit_test(test_gcide_idempotent),
        cmocka_unit_test(test_gcide_limit_is_prefix),
        cmocka_unit_test(test_get_data_command_line),
        cmocka_unit_test(test_compare_gcide_config),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
