// pos.c: picks the positional scheme for a PosKind, frees scheme tables, and the
// embedding add that learned and sinusoidal share.
#include <stdlib.h>

#include "model/pos.h"

#define POS_SCHEME_ENTRY_(E, name) [POS_##E] = &pos_scheme_##name,
static const PosScheme *const SCHEMES[POS_COUNT] = {POS_SCHEME_LIST(POS_SCHEME_ENTRY_)};

const PosScheme *pos_scheme(PosKind kind) {
    return (kind >= 0 && kind < POS_COUNT) ? SCHEMES[kind] : NULL;
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
