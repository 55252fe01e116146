// pos.c: picks the positional scheme for a PosKind, frees scheme tables, and the
// embedding add that learned and sinusoidal share.
#include <stdlib.h>

#include "model/pos.h"

const PosScheme *pos_scheme(PosKind kind) {
    switch (kind) {
    case POS_ROPE: return &pos_scheme_rope;
    case POS_LEARNED: return &pos_scheme_learned;
    case POS_SINUSOIDAL: return &pos_scheme_sinusoidal;
    case POS_T5: return &pos_scheme_t5;
    case POS_ALIBI: return &pos_scheme_alibi;
    case POS_NONE: return &pos_scheme_none;
    default: return NULL;
    }
}

void pos_tables_free(PosCtx *p) {
    free(p->rope_cos);
    free(p->rope_sin);
    free(p->sinus);
    p->rope_cos = p->rope_sin = p->sinus = NULL;
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
