// pos_none.c: NoPE, no positional information besides the causal mask.
// The scheme with no hooks: everything it would do is the default.
#include "model/pos.h"

const PosScheme pos_scheme_none = {
    .kind = POS_NONE,
};

// llama.cpp's gpt2 with a table of zeros as its position_embd.
const PosExports pos_exports_none = {
    .gguf = {[BLOCK_GPT2] = "gpt2"},
    .gguf_no_home = {[BLOCK_LLAMA] = "block=llama with pos=none has no home in llama.cpp: its architectures with "
                                     "RMSNorm and SwiGLU rotate q and k in every layer, or all but every fourth "
                                     "(smollm3, llama4)"},
    .hf_no_home = {[BLOCK_GPT2] = POS_NO_HF_GPT2, [BLOCK_LLAMA] = POS_NO_HF_LLAMA},
};
