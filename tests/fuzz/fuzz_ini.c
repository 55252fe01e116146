// fuzz_ini.c: options_load_file on the bytes as a ./train config file, then
// options_check on what it read (libinih and the option table's parsers).
#include "fuzz_util.h"

#include "train/options.h"

int fuzz_ini_one(const uint8_t *data, size_t size) {
    char err[1024];
    TrainOptions opt;
    options_defaults(&opt);
    if (options_load_file(&opt, fuzz_write_file(data, size), err, sizeof err) == 0)
        options_check(&opt, err, sizeof err);
    return 0;
}

FUZZ_TARGET(fuzz_ini_one)
