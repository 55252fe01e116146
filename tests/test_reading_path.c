// test_reading_path.c: the reading path of one training step, as `make
// reading-path` measures it (scripts/dev/reading_path.py: the functions the
// forward, the loss and the backward run, traced), is what the docs say, and
// is as short as the textbook promises:
//   - its summary lines for the reference and OpenBLAS engines ("reading
//     path, reference engine: 5 files, 467 lines of executed functions")
//     stand verbatim in README.md and docs/ARCHITECTURE.md, so a change to
//     the path that the docs do not follow fails here (the oneDNN engine's
//     line, which its kernels for the CPU may move, is printed, not quoted);
//   - on the reference engine, at most 5 files and 700 lines of executed
//     functions; the OpenBLAS engine adds its own file and no other.
// Run from the repository root (make test).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char out[1 << 16];   // the output of the last command

static int run(const char *cmd) {
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Whether file path holds the text `line` (a whole summary line).
static int file_holds(const char *path, const char *line) {
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: cannot read", path);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    return strstr(text, line) != NULL;
}

static void test_reading_path(void **state) {
    int rc = run("make -s --no-print-directory reading-path 2>&1 | grep '^reading path, '");
    if (rc != 0) fail_msg("make reading-path: %s", out);
    int engines = 0, ref_files = -1, ref_lines = -1, blas_files = -1;
    static char blas_file_list[sizeof out], ref_file_list[sizeof out];
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        char engine[32];
        int files, lines;
        if (sscanf(line, "reading path, %31s engine: %d files, %d lines", engine, &files, &lines) != 3)
            fail_msg("not a summary line: %s", line);
        engines++;
        if (!strcmp(engine, "reference")) ref_files = files, ref_lines = lines;
        if (!strcmp(engine, "openblas")) blas_files = files;
        for (const char *doc = "README.md"; doc && strcmp(engine, "onednn");
             doc = strcmp(doc, "README.md") ? NULL : "docs/ARCHITECTURE.md")
            if (!file_holds(doc, line)) fail_msg("%s does not say what make reading-path measures:\n  %s", doc, line);
    }
    assert_int_equal(engines, 3);   // reference, openblas, onednn
    if (ref_files > 5 || ref_lines > 700)
        fail_msg("the reference engine's path is %d files and %d lines, over the 5 and 700 promised", ref_files,
                 ref_lines);
    // The OpenBLAS engine's path: the reference path's files but engine_reference.c, and engine_openblas.c.
    rc = run("make -s --no-print-directory reading-path 2>&1 | grep '^  by file: ' | sed 's/ [0-9]*,\\? */ /g'");
    if (rc != 0) fail_msg("make reading-path: %s", out);
    char *second = strchr(out, '\n');
    assert_non_null(second);
    *second++ = 0;
    snprintf(ref_file_list, sizeof ref_file_list, "%s", out);
    snprintf(blas_file_list, sizeof blas_file_list, "%.*s", (int)strcspn(second, "\n"), second);
    if (!strstr(blas_file_list, "src/engine/engine_openblas.c")) fail_msg("no engine_openblas.c: %s", blas_file_list);
    for (char *f = strtok(blas_file_list + strlen("  by file:"), " "); f; f = strtok(NULL, " "))
        if (strcmp(f, "src/engine/engine_openblas.c") && !strstr(ref_file_list, f))
            fail_msg("the OpenBLAS engine's path adds %s besides its own file", f);
    if (blas_files > ref_files) fail_msg("OpenBLAS path %d files, reference %d", blas_files, ref_files);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_reading_path)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
