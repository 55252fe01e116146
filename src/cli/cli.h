// cli.h: what the programs (./train, ./prepare, ./eval, ./sample, ./export)
// share about running from a command line, besides their own options: the
// start of main, the line for an unknown option, and the check of an output
// file named on the command line.
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

// Whether a program may write its output file PATH: never onto one of its
// inputs (compared as files, by device and inode, so another spelling of
// the path or a link is caught), not even with --overwrite; then the rules of
// atomic_check_target (common/atomic_file.h): an existing PATH only with
// overwrite, and only if it is a regular file. inputs may hold NULLs
// (inputs not given). 0, or -1 with "PATH: problem". Called before the
// program's work, so that a refusal comes first.
int cli_check_output(const char *path, int overwrite, const char *const *inputs, int n_inputs,
                     char *err, size_t errlen);

#endif
