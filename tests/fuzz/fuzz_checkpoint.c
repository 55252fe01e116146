// fuzz_checkpoint.c: checkpoint_load on the bytes as a training checkpoint
// (layout in src/train/checkpoint.h) into a model and AdamW built from the
// fixed tiny configuration below (every other model key at its default),
// expecting config_hash FUZZ_CKPT_HASH.
//
// tests/fuzz/make_seeds.sh and seeds/handmade.py read the FUZZ_CKPT_* lines of
// this file: make_seeds.sh trains that configuration with ./train and sets the
// checkpoint's config_hash to FUZZ_CKPT_HASH, so the seed passes every check.
// Keep one value per line.
#include "fuzz_util.h"

#include "model/gpt.h"
#include "train/adamw.h"
#include "train/checkpoint.h"

#define FUZZ_CKPT_N_LAYER 1
#define FUZZ_CKPT_N_HEAD 1
#define FUZZ_CKPT_D_MODEL 4
#define FUZZ_CKPT_BLOCK_SIZE 8
#define FUZZ_CKPT_VOCAB_SIZE 300
#define FUZZ_CKPT_POS "learned"
#define FUZZ_CKPT_HASH 0x5eed5eed5eed5eedull

int fuzz_checkpoint_one(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file(data, size);
    char err[512];
    GPTConfig cfg = {0};
    const ModelKey *keys;   // the schemes' own keys at their defaults, from the key table (as ./train)
    for (int k = 0, n = gpt_model_keys(&keys); k < n; k++)
        if (keys[k].scheme >= 0 && gpt_config_set(&cfg, k, keys[k].def, err, sizeof err) != 0)
            fuzz_fail("checkpoint", "a default does not parse");
    cfg.n_layer = FUZZ_CKPT_N_LAYER;
    cfg.n_head = FUZZ_CKPT_N_HEAD;
    cfg.d_model = FUZZ_CKPT_D_MODEL;
    cfg.vocab_size = FUZZ_CKPT_VOCAB_SIZE;
    cfg.block_size = FUZZ_CKPT_BLOCK_SIZE;
    cfg.rope_dims = 0;   // = head_dim
    GPT *model;
    if (pos_kind_from_name(FUZZ_CKPT_POS, &cfg.pos) != 0 || gpt_create(&model, &cfg, 1, err, sizeof err) != 0)
        fuzz_fail("checkpoint", "cannot build the fixed tiny model");
    AdamW opt;
    AdamWConfig acfg = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    if (adamw_init(&opt, &acfg, gpt_num_params(model), NULL, 0) != 0) fuzz_fail("checkpoint", "adamw_init failed");
    TrainState state = {.config_hash = FUZZ_CKPT_HASH};
    checkpoint_load(path, model, &opt, &state, err, sizeof err);
    adamw_free(&opt);
    gpt_free(model);
    return 0;
}

FUZZ_TARGET(fuzz_checkpoint_one)
