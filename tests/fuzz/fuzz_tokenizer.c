// fuzz_tokenizer.c: bpe_load on the bytes as a tokenizer file; if it loads,
// encode three texts and decode them again:
//   a fixed English text, the input's own bytes, and a text glued from the
//   tokenizer's own tokens (ids picked by the input bytes), so merges apply.
// Checked (abort on failure): decode(encode(x)) == x, at most one id per
// byte, no eot and no id outside the vocabulary, and a second encode (served
// from the piece cache) gives the same ids.
#include "fuzz_util.h"

#include <string.h>

#include "data/bpe.h"

static const char FUZZ_BPE_TEXT[] =
    "In the beginning God created the heaven and the earth.\n"
    "  And the earth was without form, and void; 1:2 (darkness) \t\r\n"
    "caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 1189 chapters!!  ";

static void fuzz_bpe_round_trip(const Tokenizer *tok, const uint8_t *text, size_t n) {
    uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    uint32_t *again = malloc((n ? n : 1) * sizeof *again);
    uint8_t *back = malloc(n ? n : 1);
    if (!ids || !again || !back) fuzz_fail("tokenizer", "out of memory in the harness");
    size_t m = bpe_encode(tok, text, n, ids);
    if (m > n) fuzz_fail("tokenizer", "more ids than bytes");
    for (size_t i = 0; i < m; i++)
        if (ids[i] >= (uint32_t)tok->vocab_size || (int)ids[i] == tok->eot_id)
            fuzz_fail("tokenizer", "encode produced eot or an id outside the vocabulary");
    if (bpe_decode(tok, ids, m, back, n) != n || memcmp(back, text, n) != 0)
        fuzz_fail("tokenizer", "decode(encode(text)) != text");
    if (bpe_encode(tok, text, n, again) != m || memcmp(again, ids, m * sizeof *ids) != 0)
        fuzz_fail("tokenizer", "encoding the same text twice gave different ids");
    free(ids);
    free(again);
    free(back);
}

int fuzz_tokenizer_one(const uint8_t *data, size_t size) {
    char err[512];
    Tokenizer tok;
    if (bpe_load(&tok, fuzz_write_file(data, size), err, sizeof err) != 0) return 0;
    fuzz_bpe_round_trip(&tok, (const uint8_t *)FUZZ_BPE_TEXT, sizeof FUZZ_BPE_TEXT - 1);
    fuzz_bpe_round_trip(&tok, data, size);
    // Tokens picked by pairs of input bytes (the merge table), glued together.
    size_t cap = 8192, n = 0;
    uint8_t *glued = malloc(cap);
    if (!glued) fuzz_fail("tokenizer", "out of memory in the harness");
    for (size_t i = 24; i + 1 < size; i += 2) {
        int len;
        const uint8_t *p = bpe_token(&tok, (uint32_t)(data[i] | data[i + 1] << 8) % (uint32_t)tok.vocab_size, &len);
        if (!p || n + (size_t)len > cap) break;
        memcpy(glued + n, p, (size_t)len);
        n += (size_t)len;
    }
    fuzz_bpe_round_trip(&tok, glued, n);
    free(glued);
    bpe_free(&tok);
    return 0;
}

FUZZ_TARGET(fuzz_tokenizer_one)
