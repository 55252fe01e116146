// fuzz_args.c: options_parse_args on a command line built from the bytes:
// argv[0] = "train", then one argument per NUL- or newline-separated piece.
// A config path or --resume DIR is opened like ./train would (relative to the
// current directory; make fuzz runs from the repository root). Lines naming
// /dev, /proc or /sys are skipped: reading /dev/zero or a FIFO as a config
// file never ends, which tests the harness, not ropelab.
#include "fuzz_util.h"

#include <string.h>

#include "train/options.h"

int fuzz_args_one(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    char **argv = malloc((size + 2) * sizeof *argv);
    if (!buf || !argv) fuzz_fail("args", "out of memory in the harness");
    memcpy(buf, data, size);
    buf[size] = 0;
    int argc = 0;
    argv[argc++] = "train";
    for (size_t i = 0, start = 0; i <= size; i++)
        if (i == size || buf[i] == 0 || buf[i] == '\n') {
            buf[i] = 0;
            if (i > start || i < size) argv[argc++] = buf + start;   // an empty line is an empty argument
            start = i + 1;
        }
    argv[argc] = NULL;
    int skip = 0;
    for (int i = 1; i < argc; i++)
        skip |= strstr(argv[i], "/dev") || strstr(argv[i], "/proc") || strstr(argv[i], "/sys");
    if (!skip) {
        char err[1024];
        TrainOptions opt;
        TrainArgs args;
        options_parse_args(argc, argv, &opt, &args, err, sizeof err);
    }
    free(argv);
    free(buf);
    return 0;
}

FUZZ_TARGET(fuzz_args_one)
