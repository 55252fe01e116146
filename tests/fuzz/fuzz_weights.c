// fuzz_weights.c: gpt_load (the model loader of ./sample and ./eval) on the
// bytes as a weights file, with allow_extra and, if that loads, without
// (allow_extra 0 accepts a subset of what allow_extra 1 accepts).
#include "fuzz_util.h"

#include "model/gpt.h"
#include "format/weights_file.h"

int fuzz_weights_one(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file(data, size);
    for (int allow_extra = 1; allow_extra >= 0; allow_extra--) {
        char err[512];
        GPT *model = NULL;
        if (gpt_load(&model, path, allow_extra, err, sizeof err) != 0) {
            if (model) fuzz_fail("weights", "gpt_load failed but returned a model");
            break;
        }
        if (gpt_config_validate(gpt_config(model), err, sizeof err) != 0)
            fuzz_fail("weights", "gpt_load accepted an invalid configuration");
        gpt_free(model);
    }
    return 0;
}

FUZZ_TARGET(fuzz_weights_one)
