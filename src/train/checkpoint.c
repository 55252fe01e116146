// checkpoint.c: training checkpoints and the debug-state file (layouts in
// checkpoint.h): weights files with extra tensors and metadata, written with
// gpt_save_with and read with gpt_read_params / gpt_read_tensor, so the
// format and its checks have one home in src/model.
#include "train/checkpoint.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/numtext.h"
#include "format/weights_file.h"
#include "train/fault_inject.h"

static StTensorOut tensor_out(const char *name, const ParamEntry *e, const float *base) {
    StTensorOut t = {.name = name, .dtype = ST_F32, .ndim = e->ndim, .data = base + e->offset};
    for (int d = 0; d < e->ndim; d++) t.shape[d] = e->shape[d];
    return t;
}

int checkpoint_save(const char *path, GPT *model, const AdamW *opt, const TrainState *state,
                    const RunRecord *record, char *err, size_t errlen) {
    const ParamEntry *entries;
    int n = gpt_param_entries(model, &entries);
    StTensorOut *t = calloc((size_t)2 * n, sizeof *t);
    char (*names)[80] = calloc((size_t)2 * n, sizeof *names);
    if (!t || !names) {
        free(t); free(names);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        snprintf(names[2 * i], 80, GPT_MOMENT_M "%s", entries[i].name);
        snprintf(names[2 * i + 1], 80, GPT_MOMENT_V "%s", entries[i].name);
        t[2 * i] = tensor_out(names[2 * i], &entries[i], opt->m);
        t[2 * i + 1] = tensor_out(names[2 * i + 1], &entries[i], opt->v);
    }
    char step[32], rng[128], elapsed[32], hash[32], world[16];
    snprintf(step, sizeof step, "%d", state->step);
    snprintf(rng, sizeof rng, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64,
             state->data_rng.s[0], state->data_rng.s[1], state->data_rng.s[2], state->data_rng.s[3]);
    snprintf(elapsed, sizeof elapsed, "%.3f", state->elapsed_s);
    snprintf(hash, sizeof hash, "%016" PRIx64, state->config_hash);
    snprintf(world, sizeof world, "%d", state->world_size);
    StMeta meta[9] = {{"ropelab_checkpoint", "1"}, {"step", step}, {"data_rng", rng},
                      {"elapsed_s", elapsed}, {"config_hash", hash}, {"run_config", record->config},
                      {"run_data", record->data}};
    int n_meta = 7;
    // world_size only for several processes, matmul_auto only where auto chose: otherwise the file
    // is the one an older ./train wrote.
    if (state->world_size > 1) meta[n_meta++] = (StMeta){"world_size", world};
    if (state->matmul_auto[0]) meta[n_meta++] = (StMeta){"matmul_auto", state->matmul_auto};
    fault_crash_in_save(path, state->step, model, t, 2 * n, meta, n_meta);   // test build only
    int rc = gpt_save_with(model, path, t, 2 * n, meta, n_meta, ATOMIC_REPLACE, err, errlen);
    free(t);
    free(names);
    return rc;
}

// Four integers (numtext.h's rule) one space apart, not all zero (the one
// state xoshiro256** never leaves: a loader would draw the same window forever).
static int parse_rng(const char *s, Rng *rng) {
    if (!s) return -1;
    for (int i = 0; i < 4; i++) {
        char word[24];
        size_t n = strcspn(s, " ");
        if (n >= sizeof word) return -1;
        memcpy(word, s, n);
        word[n] = '\0';
        if (parse_uint64(word, &rng->s[i]) != 0) return -1;
        s += n;
        if (i < 3 ? *s++ != ' ' : *s != '\0') return -1;
    }
    return (rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]) ? 0 : -1;
}

// The metadata of an open checkpoint, checked against state (config_hash,
// world_size) and read into it (step, data_rng, elapsed_s).
static int read_state(StFile *f, const char *path, TrainState *state, char *err, size_t errlen) {
    const char *marker = st_meta(f, "ropelab_checkpoint");
    const char *hash = st_meta(f, "config_hash"), *elapsed = st_meta(f, "elapsed_s");
    const char *step_text = st_meta(f, "step"), *world_text = st_meta(f, "world_size");
    long long step, world = 1;
    int want_world = state->world_size > 0 ? state->world_size : 1;
    char want_hash[32];
    double elapsed_s = 0.0;
    Rng rng;
    snprintf(want_hash, sizeof want_hash, "%016" PRIx64, state->config_hash);
    if (!marker || strcmp(marker, "1") != 0) {
        snprintf(err, errlen, "%s: not a ropelab training checkpoint (no ropelab_checkpoint = 1 metadata)", path);
        return -1;
    }
    if (!hash || strcmp(hash, want_hash) != 0) {
        snprintf(err, errlen, "%s: config_hash %s does not match the run's config.ini (%s): "
                 "the model or data settings were changed", path, hash ? hash : "(none)", want_hash);
        return -1;
    }
    // A checkpoint is written after an update, so step >= 1; the largest is the key's range.
    if (!step_text || parse_integer(step_text, 1, CHECKPOINT_MAX_STEP, &step) != 0) {
        snprintf(err, errlen, "%s: metadata 'step' is missing or not a whole number in 1..%d", path,
                 CHECKPOINT_MAX_STEP);
        return -1;
    }
    // The global batch is world_size x batch_size x grad_accum and the ranks
    // share the data stream: another world size would not continue this run.
    if (world_text && parse_integer(world_text, 1, 1 << 20, &world) != 0) {
        snprintf(err, errlen, "%s: metadata 'world_size' is not a whole number in 1..%d", path, 1 << 20);
        return -1;
    }
    if (world != want_world) {
        char how[64];
        if (world == 1) snprintf(how, sizeof how, "./train without mpirun");
        else snprintf(how, sizeof how, "mpirun -np %lld ./train", world);
        snprintf(err, errlen, "%s: written by a run of %lld process%s (world_size), this one has %d; "
                 "resume it with the same number: %s --resume", path, world, world == 1 ? "" : "es", want_world, how);
        return -1;
    }
    if (parse_rng(st_meta(f, "data_rng"), &rng) != 0) {
        snprintf(err, errlen, "%s: metadata 'data_rng' is missing or not 4 decimal uint64 (not all zero)", path);
        return -1;
    }
    if (elapsed && (parse_number(elapsed, &elapsed_s) != 0 || !(elapsed_s >= 0.0))) {
        snprintf(err, errlen, "%s: metadata 'elapsed_s' is not a non-negative number", path);
        return -1;
    }
    const char *matmul_auto = st_meta(f, "matmul_auto");
    if (matmul_auto && strcmp(matmul_auto, "openblas") != 0 && strcmp(matmul_auto, "onednn") != 0) {
        snprintf(err, errlen, "%s: metadata 'matmul_auto' is neither openblas nor onednn", path);
        return -1;
    }
    state->step = (int)step;
    state->data_rng = rng;
    state->elapsed_s = elapsed_s;
    snprintf(state->matmul_auto, sizeof state->matmul_auto, "%s", matmul_auto ? matmul_auto : "");
    return 0;
}

int checkpoint_check(const char *path, TrainState *state, char *err, size_t errlen) {
    StFile *f;
    if (st_open_header(&f, path, err, errlen)) return -1;
    int rc = read_state(f, path, state, err, errlen);
    st_close(f);
    return rc;
}

int checkpoint_read_record(const char *path, RunRecord *record, char *err, size_t errlen) {
    StFile *f;
    if (st_open_header(&f, path, err, errlen)) return -1;
    const char *config = st_meta(f, "run_config"), *data = st_meta(f, "run_data");
    int rc = 0;
    if ((config && strlen(config) >= sizeof record->config) || (data && strlen(data) >= sizeof record->data)) {
        snprintf(err, errlen, "%s: metadata run_config or run_data longer than a run's record", path);
        rc = -1;
    } else {
        snprintf(record->config, sizeof record->config, "%s", config ? config : "");
        snprintf(record->data, sizeof record->data, "%s", data ? data : "");
    }
    st_close(f);
    return rc;
}

// The header, the metadata and every tensor's name, dtype and shape are
// checked before any tensor is read (a checkpoint's size is then exactly
// three times the model's); then each tensor is read into its place.
int checkpoint_load(const char *path, GPT *model, AdamW *opt, TrainState *state,
                    char *err, size_t errlen) {
    StFile *f;
    if (st_open_header(&f, path, err, errlen)) return -1;
    int rc = -1;
    TrainState read = *state;
    const ParamEntry *entries;
    int n = gpt_param_entries(model, &entries);
    char (*names)[2][96] = calloc((size_t)n, sizeof *names);   // adamw.m.NAME, adamw.v.NAME
    if (!names) { snprintf(err, errlen, "%s: out of memory", path); goto done; }
    if (read_state(f, path, &read, err, errlen) != 0) goto done;
    if (st_num_tensors(f) != 3 * n) {
        snprintf(err, errlen, "%s: holds %d tensors, expected %d (parameters and two AdamW moments each)",
                 path, st_num_tensors(f), 3 * n);
        goto done;
    }
    if (gpt_check_file(model, f, 0, 1, err, errlen) != 0) goto done;
    for (int i = 0; i < n; i++) {
        snprintf(names[i][0], sizeof names[i][0], GPT_MOMENT_M "%s", entries[i].name);
        snprintf(names[i][1], sizeof names[i][1], GPT_MOMENT_V "%s", entries[i].name);
        if (gpt_check_tensor(f, names[i][0], &entries[i], err, errlen) ||
            gpt_check_tensor(f, names[i][1], &entries[i], err, errlen)) goto done;
    }
    if (gpt_read_params(model, f, 0, err, errlen) != 0) goto done;
    for (int i = 0; i < n; i++) {
        const ParamEntry *e = &entries[i];
        if (gpt_read_tensor(f, names[i][0], e, opt->m + e->offset, err, errlen)) goto done;
        if (gpt_read_tensor(f, names[i][1], e, opt->v + e->offset, err, errlen)) goto done;
        for (size_t k = 0; k < e->numel; k++)
            if (opt->v[e->offset + k] < 0.0f) {   // a mean of squares
                snprintf(err, errlen, "%s: tensor %s holds a negative value at index %zu", path, names[i][1], k);
                goto done;
            }
    }
    *state = read;
    rc = 0;
done:
    free(names);
    st_close(f);
    return rc;
}

int debug_state_save(const char *path, GPT *model, const int *inputs, const int *targets,
                     int B, int T, float loss, const char *precision, const char *matmul, int fused,
                     AtomicMode mode, char *err, size_t errlen) {
    const ParamEntry *entries;
    int n = gpt_param_entries(model, &entries);
    StTensorOut *t = calloc((size_t)n + 3, sizeof *t);
    char (*names)[80] = calloc((size_t)n, sizeof *names);
    if (!t || !names) {
        free(t); free(names);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        snprintf(names[i], 80, "grad.%s", entries[i].name);
        t[i] = tensor_out(names[i], &entries[i], gpt_grads(model));
    }
    t[n] = (StTensorOut){.name = "inputs", .dtype = ST_I32, .ndim = 2, .shape = {B, T}, .data = inputs};
    t[n + 1] = (StTensorOut){.name = "targets", .dtype = ST_I32, .ndim = 2, .shape = {B, T}, .data = targets};
    t[n + 2] = (StTensorOut){.name = "loss", .dtype = ST_F32, .ndim = 1, .shape = {1}, .data = &loss};
    StMeta meta[] = {{"precision", precision}, {"matmul", matmul}, {"attention", "fused"}};
    int rc = gpt_save_with(model, path, t, n + 3, meta, fused ? 3 : 2, mode, err, errlen);
    free(t);
    free(names);
    return rc;
}
