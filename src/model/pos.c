// pos.c: the life of a PosCtx (tables built by the scheme, freed here), and
// the embedding add that learned and sinusoidal share.
#include <stdlib.h>
#include <string.h>

#include "model/pos.h"

int pos_ctx_init(PosCtx *p, const PosScheme *s, const GPTConfig *cfg, int n_pos, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    p->cfg = cfg;
    return pos_ctx_ensure(p, s, n_pos, err, errlen);
}

int pos_ctx_ensure(PosCtx *p, const PosScheme *s, int n_pos, char *err, size_t errlen) {
    if (n_pos <= p->n_pos) return 0;
    free(p->tables);
    p->tables = NULL;
    p->n_pos = n_pos;
    if (s->tables_init && s->tables_init(p, err, errlen) != 0) {
        p->n_pos = 0;
        return -1;
    }
    return 0;
}

size_t pos_tables_bytes(const PosScheme *s, const GPTConfig *cfg, int n_pos) {
    return s->tables_floats ? s->tables_floats(cfg, n_pos) * sizeof(float) : 0;
}

void pos_ctx_free(PosCtx *p) {
    free(p->tables);
    p->tables = NULL;
    p->n_pos = 0;
}

void pos_add_rows(float *x, const float *table, int B, int T, int pos0, int C) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const float *row_p = table + (size_t)(pos0 + bt % T) * C;
        float *row_x = x + (size_t)bt * C;
        for (int c = 0; c < C; c++) row_x[c] += row_p[c];
    }
}
