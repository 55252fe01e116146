// cli.h: what the programs (./train, ./prepare, ./eval, ./sample, ./export)
// share about running from a command line, besides their own options.
#ifndef ROPELAB_CLI_H
#define ROPELAB_CLI_H

// The first thing every main does. SIGXFSZ is ignored: a write past the
// file-size limit (ulimit -f) then fails with EFBIG, as a write to a full
// disk fails with ENOSPC, so the writer removes its temporary and says so in
// one line; by default the signal kills the program and leaves the
// temporary (PATH.tmp.XXXXXX) behind.
void cli_start(void);

#endif
