// cli.c: the programs' start, unknown options, output checks (see cli.h).
#include "cli/cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/fs.h"

void cli_start(void) {
    signal(SIGXFSZ, SIG_IGN);
}

int cli_getopt(const char *prog, int argc, char **argv, const struct option *opts, int *idx) {
    opterr = 0;   // getopt prints nothing; the line is ours
    int c = getopt_long(argc, argv, ":h", opts, idx);
    if (c != '?' && c != ':') return c;
    // The argument getopt stopped at: argv[optind - 1] for a long option; a
    // short one (-x) is optopt.
    const char *arg = optind >= 1 && optind <= argc ? argv[optind - 1] : "";
    char name[128];
    if (strncmp(arg, "--", 2) == 0) snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, "="), arg);
    else snprintf(name, sizeof name, "-%c", optopt ? optopt : '?');
    int known = 0;   // --help=1: a known option given a value it does not take
    for (int i = 0; name[1] == '-' && opts[i].name; i++) known |= strcmp(name + 2, opts[i].name) == 0;
    if (c == ':' || known)
        fprintf(stderr, "%s: option '%s' %s (see ./%s --help)\n", prog, name,
                c == ':' ? "needs a value" : "takes no value", prog);
    else
        fprintf(stderr, "%s: unknown option '%s' (see ./%s --help)\n", prog, name, prog);
    exit(2);
}

int cli_check_output(const char *path, int overwrite, const char *const *inputs, int n_inputs,
                     char *err, size_t errlen) {
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] && fs_same_file(path, inputs[i])) {
            snprintf(err, errlen, "%s: the same file as the input %s; an output is never written onto an input", path,
                     inputs[i]);
            return -1;
        }
    return atomic_check_target(path, overwrite ? ATOMIC_REPLACE : ATOMIC_NEW, err, errlen);
}
