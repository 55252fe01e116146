// pos_sinusoidal.c: the fixed sinusoidal table of Vaswani et al.
//   PE[t, 2i] = sin(t / 10000^(2i/C)),  PE[t, 2i+1] = cos(t / 10000^(2i/C))
// added to the input embedding; no parameters, so no backward.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/pos.h"

void sinusoidal_build_table(float *pe, int n_pos, int C) {
    for (int t = 0; t < n_pos; t++)
        for (int c = 0; c < C; c++) {
            int i2 = c - c % 2;   // the 2i of this pair
            double angle = t / pow(10000.0, (double)i2 / C);
            pe[(size_t)t * C + c] = (float)(c % 2 == 0 ? sin(angle) : cos(angle));
        }
}

static int sinusoidal_tables_init(PosCtx *p, int n_pos, char *err, size_t errlen) {
    p->sinus = malloc((size_t)n_pos * p->cfg->d_model * sizeof(float));
    if (!p->sinus) {
        snprintf(err, errlen, "out of memory for the sinusoidal table (%d positions)", n_pos);
        return -1;
    }
    sinusoidal_build_table(p->sinus, n_pos, p->cfg->d_model);
    return 0;
}

static void sinusoidal_embed_forward(const PosCtx *p, float *x, int B, int T, int pos0) {
    pos_add_rows(x, p->sinus, B, T, pos0, p->cfg->d_model);
}

const PosScheme pos_scheme_sinusoidal = {
    .kind = POS_SINUSOIDAL,
    .tables_init = sinusoidal_tables_init,
    .embed_forward = sinusoidal_embed_forward,
};
