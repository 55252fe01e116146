// pos_sinusoidal.c: the fixed sinusoidal table of Vaswani et al., scaled:
//   PE[t, 2i] = s sin(t / 10000^(2i/C)),  PE[t, 2i+1] = s cos(t / 10000^(2i/C))
// with s = sinusoidal_scale, added to the input embedding; no parameters, so
// no backward. Why a scale: the token embedding starts at N(0, 0.02), so a
// unit-amplitude table (s = 1) is about 35 times the token signal and the
// model must first grow wte; docs/POSITIONS.md has the conventions and the
// measurement that chose the default.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/pos.h"
#include "model/pos_maths.h"

void sinusoidal_build_table(float *pe, int n_pos, int C, float scale) { sinusoidal_build_rows(pe, 0, n_pos, C, scale); }

void sinusoidal_build_rows(float *pe, int t0, int t1, int C, float scale) {
    for (int t = t0; t < t1; t++)
        for (int c = 0; c < C; c++) {
            int i2 = c - c % 2;   // the 2i of this pair
            double angle = t / pow(10000.0, (double)i2 / C);
            pe[(size_t)t * C + c] = (float)(scale * (c % 2 == 0 ? sin(angle) : cos(angle)));
        }
}

// p->tables: PE (n_pos, C).
static size_t sinusoidal_tables_floats(const GPTConfig *cfg, int n_pos) { return (size_t)n_pos * cfg->d_model; }

static int sinusoidal_tables_init(PosCtx *p, char *err, size_t errlen) {
    p->tables = malloc(pos_tables_bytes(&pos_scheme_sinusoidal, p->cfg, p->n_pos));
    if (!p->tables) {
        snprintf(err, errlen, "out of memory for the sinusoidal table (%d positions)", p->n_pos);
        return -1;
    }
    sinusoidal_build_table(p->tables, p->n_pos, p->cfg->d_model, p->cfg->sinusoidal_scale);
    return 0;
}

static void sinusoidal_embed_forward(const PosCtx *p, float *x, int B, int T, int pos0) {
    pos_add_rows(x, p->tables, B, T, pos0, p->cfg->d_model);
}

const PosScheme pos_scheme_sinusoidal = {
    .kind = POS_SINUSOIDAL,
    .tables_floats = sinusoidal_tables_floats,
    .tables_init = sinusoidal_tables_init,
    .embed_forward = sinusoidal_embed_forward,
};

// llama.cpp's gpt2 with the table written as its learned one (position_embd).
const PosExports pos_exports_sinusoidal = {
    .gguf = {[BLOCK_GPT2] = "gpt2"},
    .gguf_no_home = {[BLOCK_LLAMA] = POS_NO_GGUF_LLAMA_TABLE},
    .hf_no_home = {[BLOCK_GPT2] = POS_NO_HF_GPT2, [BLOCK_LLAMA] = POS_NO_HF_LLAMA},
};
