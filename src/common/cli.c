// cli.c: the programs' start (see cli.h).
#include "common/cli.h"

#include <signal.h>

void cli_start(void) {
    signal(SIGXFSZ, SIG_IGN);
}
