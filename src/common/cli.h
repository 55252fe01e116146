// cli.h: what the programs (./train, ./prepare, ./eval, ./sample, ./export)
// share about running from a command line, besides their own options: the
// start of main and the line for an unknown option.
#ifndef ROPELAB_CLI_H
#define ROPELAB_CLI_H

#include <getopt.h>
#include <stddef.h>

// The first thing every main does. SIGXFSZ is ignored: a write past the
// file-size limit (ulimit -f) then fails with EFBIG, as a write to a full
// disk fails with ENOSPC, so the writer removes its temporary and says so in
// one line; by default the signal kills the program and leaves the
// temporary (PATH.tmp.XXXXXX) behind.
void cli_start(void);

// getopt_long over opts (long options, and -h) that prints nothing itself:
// an unknown option or one without its value is refused in one line,
// "prog: unknown option '--foo' (see ./prog --help)", with exit status 2
// (getopt's own message and the whole usage would be twenty lines).
int cli_getopt(const char *prog, int argc, char **argv, const struct option *opts, int *idx);

#endif
