// test_deps.c: src/ has no cycle and no upward edge (scripts/dev/deps.py),
// and the script can fail: on a fixture with a cycle of three files (an
// #include, a symbol, an #include) and an edge from a low folder into a high
// one it names both, and on the same fixture with those two edges removed it
// passes. Run from the repository root.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util_run.h"

#define DEPS "/usr/bin/python3 scripts/dev/deps.py"

static void test_src_has_no_cycle_and_no_upward_edge(void **state) {
    (void)state;
    int rc = run(DEPS);
    if (rc != 0) {
        fputs(out, stderr);   // whole: a cycle's line can be longer than cmocka's message
        fail_msg("scripts/dev/deps.py: exit %d, the violations above", rc);
    }
}

// Floors low < high. high/x -> high/y by #include, high/y -> high/z by the
// symbol z (declared in y.c itself: no #include), high/z -> high/x by
// #include: one cycle of three nodes; low/w.c includes high/x.h: upward.
static void test_fixture_cycle_and_upward_edge(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/ropelab_deps_XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(run_shell("mkdir %s/low %s/high", dir, dir), 0);
    put("high/x.h", "int x(void);\n");
    put("high/x.c", "#include \"high/x.h\"\n#include \"high/y.h\"\nint x(void) { return y(); }\n");
    put("high/y.h", "int y(void);\n");
    put("high/y.c", "#include \"high/y.h\"\nint z(void);\nint y(void) { return z(); }\n");
    put("high/z.c", "#include \"high/x.h\"\nint z(void) { return 1; }\n");
    put("low/w.c", "#include \"high/x.h\"\nint w(void) { return 2; }\n");

    assert_int_equal(run(DEPS " --root %s --order low,high", dir), 1);
    if (!strstr(out, "cycle: high/x high/y high/z: ") || !strstr(out, "high/y.c -> high/z.c (z)") ||
        !strstr(out, "upward: low/w.c -> high/x.h (#include \"high/x.h\"): low is below high") ||
        !strstr(out, "1 cycles, 1 upward edges"))
        fail_msg("the cycle and the upward edge not both named:\n%s", out);
    assert_int_equal(run(DEPS " --root %s --order high,low", dir), 1);   // cycle only: low above high
    if (strstr(out, "upward:") || !strstr(out, "1 cycles, 0 upward edges")) fail_msg("%s", out);

    put("high/z.c", "int z(void) { return 1; }\n");
    put("low/w.c", "int w(void) { return 2; }\n");
    if (run(DEPS " --root %s --order low,high", dir) != 0 || !strstr(out, "0 cycles, 0 upward edges"))
        fail_msg("the fixed fixture does not pass:\n%s", out);
    assert_int_equal(run(DEPS " --root %s --order low", dir), 1);   // high is in no floor
    if (!strstr(out, "folders not in the order: high")) fail_msg("%s", out);
    assert_int_equal(run_shell("rm -rf '%s'", dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cycle_and_upward_edge),
        cmocka_unit_test(test_src_has_no_cycle_and_no_upward_edge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
