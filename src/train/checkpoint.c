// checkpoint.c: writes and reads training checkpoints and the debug-state
// file (layouts in checkpoint.h), on top of safetensors.h.
#include "train/checkpoint.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static StTensorOut tensor_out(const char *name, const ParamEntry *e, const float *base) {
    StTensorOut t = {.name = name, .dtype = ST_F32, .ndim = e->ndim, .data = base + e->offset};
    for (int d = 0; d < e->ndim; d++) t.shape[d] = e->shape[d];
    return t;
}

// Test hook (tests/test_train_run.c): ROPELAB_TEST_CRASH_IN_SAVE=K makes the
// process die in the middle of writing the checkpoint of step K, as a kill
// would: half of PATH.tmp is on disk, PATH itself is untouched.
static void maybe_crash_in_save(const char *path, int step, const StTensorOut *t, int n,
                                const StMeta *meta, int n_meta) {
    const char *hook = getenv("ROPELAB_TEST_CRASH_IN_SAVE");
    if (!hook || atoi(hook) != step) return;
    char full[1200], tmp[1200], err[256];
    snprintf(full, sizeof full, "%s.crashtest", path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (st_write(full, t, n, meta, n_meta, err, sizeof err) == 0) {
        FILE *in = fopen(full, "rb"), *out = fopen(tmp, "wb");
        if (in && out) {
            fseek(in, 0, SEEK_END);
            long half = ftell(in) / 2;
            fseek(in, 0, SEEK_SET);
            for (long i = 0; i < half; i++) fputc(fgetc(in), out);
        }
        if (in) fclose(in);
        if (out) fclose(out);
        remove(full);
    }
    fprintf(stderr, "ROPELAB_TEST_CRASH_IN_SAVE: dying while writing %s\n", tmp);
    _exit(1);
}

int checkpoint_save(const char *path, GPT *model, const AdamW *opt, const TrainState *state,
                    char *err, size_t errlen) {
    const ParamEntry *entries;
    int n = gpt_param_entries(model, &entries);
    StTensorOut *t = calloc((size_t)3 * n, sizeof *t);
    char (*names)[80] = calloc((size_t)2 * n, sizeof *names);
    if (!t || !names) {
        free(t); free(names);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    const float *params = gpt_params(model);
    for (int i = 0; i < n; i++) {
        snprintf(names[2 * i], 80, "adamw.m.%s", entries[i].name);
        snprintf(names[2 * i + 1], 80, "adamw.v.%s", entries[i].name);
        t[i] = tensor_out(entries[i].name, &entries[i], params);
        t[n + 2 * i] = tensor_out(names[2 * i], &entries[i], opt->m);
        t[n + 2 * i + 1] = tensor_out(names[2 * i + 1], &entries[i], opt->v);
    }
    GPTMetadata md;
    gpt_metadata(model, &md);
    StMeta meta[GPT_META_MAX + 5];
    int n_meta = md.count;
    memcpy(meta, md.items, (size_t)md.count * sizeof *meta);
    char step[32], rng[128], elapsed[32], hash[32];
    snprintf(step, sizeof step, "%d", state->step);
    snprintf(rng, sizeof rng, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64,
             state->data_rng.s[0], state->data_rng.s[1], state->data_rng.s[2], state->data_rng.s[3]);
    snprintf(elapsed, sizeof elapsed, "%.3f", state->elapsed_s);
    snprintf(hash, sizeof hash, "%016" PRIx64, state->config_hash);
    meta[n_meta++] = (StMeta){"ropelab_checkpoint", "1"};
    meta[n_meta++] = (StMeta){"step", step};
    meta[n_meta++] = (StMeta){"data_rng", rng};
    meta[n_meta++] = (StMeta){"elapsed_s", elapsed};
    meta[n_meta++] = (StMeta){"config_hash", hash};
    maybe_crash_in_save(path, state->step, t, 3 * n, meta, n_meta);
    int rc = st_write(path, t, 3 * n, meta, n_meta, err, errlen);
    free(t);
    free(names);
    return rc;
}

// Copies tensor name of f into dst after checking dtype and shape against e.
static int read_tensor(const StFile *f, const char *name, const ParamEntry *e, float *dst,
                       char *err, size_t errlen) {
    const StTensor *t = st_find(f, name);
    if (!t) {
        snprintf(err, errlen, "%s: tensor %s is missing", st_path(f), name);
        return -1;
    }
    int ok = t->dtype == ST_F32 && t->ndim == e->ndim;
    for (int d = 0; ok && d < e->ndim; d++) ok = t->shape[d] == e->shape[d];
    if (!ok || t->nbytes != e->numel * sizeof(float)) {
        snprintf(err, errlen, "%s: tensor %s has the wrong dtype or shape for this configuration", st_path(f), name);
        return -1;
    }
    memcpy(dst, t->data, t->nbytes);
    return 0;
}

static int meta_int(const StFile *f, const char *key, long long *out, char *err, size_t errlen) {
    const char *s = st_meta(f, key);
    char *end;
    if (s) *out = strtoll(s, &end, 10);
    if (!s || !*s || *end) {
        snprintf(err, errlen, "%s: metadata '%s' is missing or not an integer", st_path(f), key);
        return -1;
    }
    return 0;
}

int checkpoint_load(const char *path, GPT *model, AdamW *opt, TrainState *state,
                    char *err, size_t errlen) {
    StFile *f;
    if (st_open(&f, path, err, errlen)) return -1;
    int rc = -1;
    const char *marker = st_meta(f, "ropelab_checkpoint");
    const char *rng = st_meta(f, "data_rng"), *hash = st_meta(f, "config_hash");
    const char *elapsed = st_meta(f, "elapsed_s");
    long long step;
    char want_hash[32];
    snprintf(want_hash, sizeof want_hash, "%016" PRIx64, state->config_hash);
    const ParamEntry *entries;
    int n = gpt_param_entries(model, &entries);
    if (!marker || strcmp(marker, "1") != 0) {
        snprintf(err, errlen, "%s: not a ropelab training checkpoint (no ropelab_checkpoint = 1 metadata)", path);
        goto done;
    }
    if (!hash || strcmp(hash, want_hash) != 0) {
        snprintf(err, errlen, "%s: config_hash %s does not match the run's config.ini (%s): "
                 "the model or data settings were changed", path, hash ? hash : "(none)", want_hash);
        goto done;
    }
    if (meta_int(f, "step", &step, err, errlen)) goto done;
    if (!rng || sscanf(rng, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &state->data_rng.s[0],
                       &state->data_rng.s[1], &state->data_rng.s[2], &state->data_rng.s[3]) != 4) {
        snprintf(err, errlen, "%s: metadata 'data_rng' is missing or malformed", path);
        goto done;
    }
    if (st_num_tensors(f) != 3 * n) {
        snprintf(err, errlen, "%s: holds %d tensors, expected %d (parameters and two AdamW moments each)",
                 path, st_num_tensors(f), 3 * n);
        goto done;
    }
    float *params = gpt_params(model);
    for (int i = 0; i < n; i++) {
        char name[96];
        const ParamEntry *e = &entries[i];
        if (read_tensor(f, e->name, e, params + e->offset, err, errlen)) goto done;
        snprintf(name, sizeof name, "adamw.m.%s", e->name);
        if (read_tensor(f, name, e, opt->m + e->offset, err, errlen)) goto done;
        snprintf(name, sizeof name, "adamw.v.%s", e->name);
        if (read_tensor(f, name, e, opt->v + e->offset, err, errlen)) goto done;
    }
    state->step = (int)step;
    state->elapsed_s = elapsed ? atof(elapsed) : 0.0;
    rc = 0;
done:
    st_close(f);
    return rc;
}

int debug_state_save(const char *path, GPT *model, const int *inputs, const int *targets,
                     int B, int T, float loss, char *err, size_t errlen) {
    const ParamEntry *entries;
    int n = gpt_param_entries(model, &entries);
    StTensorOut *t = calloc((size_t)2 * n + 3, sizeof *t);
    char (*names)[80] = calloc((size_t)n, sizeof *names);
    if (!t || !names) {
        free(t); free(names);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        snprintf(names[i], 80, "grad.%s", entries[i].name);
        t[i] = tensor_out(entries[i].name, &entries[i], gpt_params(model));
        t[n + i] = tensor_out(names[i], &entries[i], gpt_grads(model));
    }
    t[2 * n] = (StTensorOut){.name = "inputs", .dtype = ST_I32, .ndim = 2, .shape = {B, T}, .data = inputs};
    t[2 * n + 1] = (StTensorOut){.name = "targets", .dtype = ST_I32, .ndim = 2, .shape = {B, T}, .data = targets};
    t[2 * n + 2] = (StTensorOut){.name = "loss", .dtype = ST_F32, .ndim = 1, .shape = {1}, .data = &loss};
    GPTMetadata md;
    gpt_metadata(model, &md);
    int rc = st_write(path, t, 2 * n + 3, md.items, md.count, err, errlen);
    free(t);
    free(names);
    return rc;
}
