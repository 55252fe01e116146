// model_overrides.c: --KEY=VALUE for a trained model's length keys (see model_overrides.h).
#include "train/model_overrides.h"

#include <stdlib.h>
#include <string.h>

#include "common/cli.h"

// The table index of a length key (not block_size: ./eval has --seq-len) named by
// text (n chars, '-' as '_'), or -1.
static int length_key(const char *text, size_t n) {
    char name[64];
    if (n >= sizeof name) return -1;
    for (size_t i = 0; i < n; i++) name[i] = text[i] == '-' ? '_' : text[i];
    name[n] = 0;
    const ModelKey *keys;
    gpt_model_keys(&keys);
    int k = gpt_model_key_find(name);
    return k >= 0 && keys[k].length_key && strcmp(name, "block_size") != 0 ? k : -1;
}

int model_overrides_take(int *argc, char **argv, ModelOverrides *o, char *err, size_t errlen) {
    o->n = 0;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        int k = strncmp(a, "--", 2) == 0 ? length_key(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2)) : -1;
        if (k < 0) { argv[out++] = argv[i]; continue; }
        const char *value = eq ? eq + 1 : (i + 1 < *argc ? argv[++i] : NULL);
        const ModelKey *keys;
        gpt_model_keys(&keys);
        if (!value) { snprintf(err, errlen, "--%s: missing value", keys[k].name); return -1; }
        if (o->n == MODEL_OVERRIDES_MAX) { snprintf(err, errlen, "--%s: too many model keys", keys[k].name); return -1; }
        GPTConfig probe;
        char msg[ERR_MAX];
        memset(&probe, 0, sizeof probe);
        if (gpt_config_set(&probe, k, value, msg, sizeof msg) != 0) {
            snprintf(err, errlen, "--%s: %s", keys[k].name, msg);
            return -1;
        }
        o->key[o->n] = k;
        o->value[o->n++] = value;
    }
    argv[out] = NULL;
    *argc = out;
    return 0;
}

void model_overrides_take_or_exit(const char *prog, int *argc, char **argv, ModelOverrides *o) {
    char err[ERR_MAX];
    if (model_overrides_take(argc, argv, o, err, sizeof err) == 0) return;
    fprintf(stderr, "%s: %s\n", prog, err);
    exit(2);
}

int model_overrides_apply(GPT *model, const ModelOverrides *o, char *err, size_t errlen) {
    if (o->n == 0) return 0;
    GPTConfig cfg = *gpt_config(model);
    const ModelKey *keys;
    gpt_model_keys(&keys);
    char msg[ERR_MAX];
    for (int i = 0; i < o->n; i++)
        if (gpt_config_set(&cfg, o->key[i], o->value[i], msg, sizeof msg) != 0) {
            snprintf(err, errlen, "--%s: %s", keys[o->key[i]].name, msg);
            return -1;
        }
    // The model's rules decide, as for ./train: a rope scaling on a model of another
    // scheme is refused there ("rope_scaling=yarn applies to pos=rope only, not pos=alibi").
    return gpt_reconfigure(model, &cfg, err, errlen);
}

void model_overrides_usage(FILE *out) {
    const ModelKey *keys;
    int n = gpt_model_keys(&keys);
    fprintf(out, "the trained model's length keys may be changed (docs/POSITIONS.md):\n");
    for (int k = 0; k < n; k++)
        if (keys[k].length_key && strcmp(keys[k].name, "block_size") != 0) {
            char head[96];
            snprintf(head, sizeof head, "  --%s=VALUE", keys[k].name);
            cli_print_entry(out, head, keys[k].help, 32);
        }
}
