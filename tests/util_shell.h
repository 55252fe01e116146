// util_shell.h: run_shell, the one way a test runs a shell command whose
// output it does not need (it goes to the test's own stdout and stderr).
// util_run.h's run() is the capturing form.
#ifndef ROPELAB_TESTS_UTIL_SHELL_H
#define ROPELAB_TESTS_UTIL_SHELL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

// Formats a command as printf does and runs it with /bin/sh. Returns its exit
// status; -1 when it could not be run, was killed by a signal, or did not fit
// the buffer (a truncated command must not run).
__attribute__((format(printf, 1, 2))) static inline int run_shell(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof cmd) {
        fprintf(stderr, "run_shell: command longer than %zu bytes: %.60s...\n", sizeof cmd - 1, cmd);
        return -1;
    }
    int rc = system(cmd);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

#endif
