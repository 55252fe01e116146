// test_docs.c: the docs name what the tree holds (scripts/dev/docs_check.py):
// every file of src/ in docs/ARCHITECTURE.md and no file there that does not
// exist, every test in tests/README.md, every relative link and anchor of the
// docs leading somewhere, docs/TRAINING.md's key list equal to ./train
// --help's, and README.md, ARCHITECTURE.md and PERFORMANCE.md within their
// sizes. And the script can fail: on a fixture with a file left out of the
// map, a file named that does not exist, a test left out, a broken link and
// a broken anchor it names each, and on the fixture mended it passes. Run
// from the repository root, after make (./train --help is read).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util_run.h"

#define DOCS "/usr/bin/python3 scripts/dev/docs_check.py"

static void test_the_docs_name_the_tree(void **state) {
    (void)state;
    int rc = run(DOCS);
    if (rc != 0) {
        fputs(out, stderr);   // whole: every problem on its own line
        fail_msg("scripts/dev/docs_check.py: exit %d, the problems above", rc);
    }
}

static void test_fixture_fails_and_mended_passes(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/ropelab_docs_XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(run_shell("mkdir -p %s/src/low %s/docs %s/tests", dir, dir, dir), 0);
    put("src/low/a.c", "int a;\n");
    put("src/low/a.h", "extern int a;\n");
    put("src/low/b.c", "int b;\n");
    put("tests/test_one.c", "\n");
    put("tests/test_two.c", "\n");
    put("docs/ARCHITECTURE.md", "# Map\n\n## Files\n\n- `a.c/.h`: a\n- `gone.h`: was there\n- `src/low/c.c`: never\n");
    put("tests/README.md", "# Tests\n\n- `test_one`\n- `test_three`\n");
    put("README.md", "# x\n\n## Read the code\n\n[map](docs/ARCHITECTURE.md#files) [no](docs/NONE.md) "
                     "[anchor](docs/ARCHITECTURE.md#no-such-heading)\n");

    assert_int_equal(run(DOCS " --root %s", dir), 1);
    const char *expect[] = {
        "docs/ARCHITECTURE.md: does not name src/low/b.c",
        "docs/ARCHITECTURE.md: names gone.h, which is not a file",
        "docs/ARCHITECTURE.md: names src/low/c.c, which does not exist",
        "tests/README.md: does not name tests/test_two",
        "tests/README.md: names test_three, which is not a test",
        "README.md: link docs/NONE.md: no such file",
        "README.md: link docs/ARCHITECTURE.md#no-such-heading: no heading #no-such-heading there",
        "8 problems"};
    for (size_t i = 0; i < sizeof expect / sizeof *expect; i++)
        if (!strstr(out, expect[i])) fail_msg("not said: %s\nin:\n%s", expect[i], out);
    if (strstr(out, "does not name src/low/a.h")) fail_msg("a.c/.h names a.h too:\n%s", out);

    put("docs/ARCHITECTURE.md", "# Map\n\n## Files\n\n- `a.c/.h`: a\n- `b.c`: b\n");
    put("tests/README.md", "# Tests\n\n- `test_one`\n- `test_two.c`\n");
    put("README.md", "# x\n\n## Read the code\n\n[map](docs/ARCHITECTURE.md#files)\n");
    if (run(DOCS " --root %s", dir) != 0 || !strstr(out, "0 problems"))
        fail_msg("the mended fixture does not pass:\n%s", out);
    assert_int_equal(run_shell("rm -rf '%s'", dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_fails_and_mended_passes),
        cmocka_unit_test(test_the_docs_name_the_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
