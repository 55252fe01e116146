// cli.c: the programs' start, unknown options (see cli.h).
#include "common/cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
