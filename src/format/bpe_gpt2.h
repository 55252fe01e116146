// bpe_gpt2.h: ropelab's byte-level BPE vocabulary written as GPT-2's, for
// the programs that run it elsewhere (./export: GGUF's "gpt2" tokenizer
// model, as llama.cpp and Hugging Face's byte-level BPE read it).
//
// GPT-2's vocabulary names every byte by one printable code point
// (bytes_to_unicode of OpenAI's encoder.py): the bytes '!'..'~', 0xA1..0xAC
// and 0xAE..0xFF stand for themselves, and the 68 others (0x00..0x20,
// 0x7F..0xA0, 0xAD), in increasing order, for U+0100..U+0143 ("Ġ" = U+0120
// is the space). A token is the concatenation of its bytes' code points, as
// UTF-8; a merge is "LEFT RIGHT", which is unambiguous because no code point
// of the alphabet is a space. The ids keep their values: 0..255 are the
// single bytes (the bytes themselves in ropelab's own tokenizers; in one read
// from GPT-2's files, GPT-2's order, so its ids are written back), 256 + i
// merge i.
#ifndef ROPELAB_BPE_GPT2_H
#define ROPELAB_BPE_GPT2_H

#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"
#include "data/bpe.h"

// The code point that names byte b.
uint32_t bpe_gpt2_codepoint(uint8_t b);
// The UTF-8 text of n bytes in GPT-2's alphabet into out (at most 2 n bytes
// and a NUL: every code point is below U+0800); returns its length.
size_t bpe_gpt2_text(const uint8_t *bytes, size_t n, char *out);
// The other way: the bytes a text of the alphabet names (len bytes of UTF-8)
// into out (room for cap). Returns how many, or -1 when the text is not the
// alphabet's: *bad is then the first code point that names no byte, or
// 0xFFFFFFFF where the text is not UTF-8 or names more than cap bytes.
int bpe_gpt2_bytes(const char *text, size_t len, uint8_t *out, int cap, uint32_t *bad);

// The tokenizer as GGUF's keys (tokenizer.ggml.*): model "gpt2" (byte-level
// BPE), pre-tokenizer "gpt-2": GPT-2's regex, the tokenizer's own rule when
// it is BPE_PRETOK_GPT2. For a tokenizer of the byte-class rule (every file
// of version 1) it is the nearest llama.cpp has, and ./export warns:
// llama.cpp knows no name for that rule and refuses a model with an unknown
// one, and without the key it falls back to its "default" pre-tokenizer,
// which cuts punctuation off the space before it and numbers into three
// digits, so differs from the byte classes far more than GPT-2's regex
// (docs/FORMAT.md has where those two split differently). The model itself
// runs the same in llama.cpp on the same ids. Then the tokens in the
// alphabet above, the merges in order (rank = merge index), and the
// end-of-text id as BPE_EOT_TEXT, a control token that is both bos (added
// in front of a text, as ./sample starts every sample) and eos.
#define BPE_EOT_TEXT "<|endoftext|>"   // the end-of-text token's name, GPT-2's
#define BPE_GGUF_KV 9
typedef struct {
    GgufKv kv[BPE_GGUF_KV];
    char **tokens, **merges;     // pointers into arena
    int32_t *types;
    char *arena;
    int n_duplicates;            // tokens whose bytes another token has too (llama.cpp maps a
                                 // text to one id: the last of them)
} BpeGguf;
// 0, or -1 with a message when out of memory.
int bpe_gguf(const Tokenizer *tok, BpeGguf *out, char *err, size_t errlen);
void bpe_gguf_free(BpeGguf *g);

#endif
