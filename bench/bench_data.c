// bench_data.c: BPE training time, encoding speed and bytes per token on a
// corpus (default data/kjv.txt), for vocabularies 1,024, 4,096 and 16,384.
//
//   build/bench_data [corpus.txt]      (make bench-data runs it on the KJV text)
//
// train s: bpe_train on the whole text, best of 3 runs.
// encode MB/s: one bpe_encode pass over the whole text with a fresh tokenizer
// (a cold word cache, as ./prepare sees it); the ids are decoded back and
// compared with the text, so a fast but wrong encoder cannot pass.
//
// A second table repeats the measure on a synthetic corpus of the same size
// with far more distinct words (random syllable strings), where the KJV's small
// word list no longer keeps the work small.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/rng.h"
#include "data/bpe.h"


// Returns 0 and prints one row: vocab, train seconds (best of reps), encode MB/s, tokens, bytes/token.
static int bench_row(const uint8_t *text, size_t n, int vocab, int reps, uint8_t *back, uint32_t *ids) {
    char err[512];
    Tokenizer tok;
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = clock_seconds();
        if (bpe_train(&tok, text, n, vocab, NULL, NULL, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        double dt = clock_seconds() - t0;
        if (dt < best) best = dt;
        if (rep + 1 < reps) bpe_free(&tok);
    }
    double t0 = clock_seconds();
    size_t m = bpe_encode(&tok, text, n, ids);
    double enc = clock_seconds() - t0;
    if (bpe_decode(&tok, ids, m, back, n) != n || memcmp(back, text, n) != 0) {
        fprintf(stderr, "vocab %d: decode(encode(text)) != text\n", vocab);
        return 1;
    }
    printf("%8d %10.3f %12.1f %12zu %12.3f%s\n", tok.vocab_size, best, n / enc / 1e6, m, (double)n / m,
           tok.vocab_size < vocab ? "  (corpus ran out of pairs)" : "");
    bpe_free(&tok);
    return 0;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "data/kjv.txt";
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return 1; }
    fseek(f, 0, SEEK_END);
    size_t n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *text = malloc(n), *back = malloc(n);
    uint32_t *ids = malloc(n * sizeof *ids);
    if (fread(text, 1, n, f) != n) { fprintf(stderr, "%s: read error\n", path); return 1; }
    fclose(f);

    printf("corpus %s: %zu bytes\n", path, n);
    printf("%8s %10s %12s %12s %12s\n", "vocab", "train s", "encode MB/s", "tokens", "bytes/token");
    const int vocabs[3] = {1024, 4096, 16384};
    for (int v = 0; v < 3; v++)
        if (bench_row(text, n, vocabs[v], 3, back, ids)) return 1;

    // Synthetic: words of 1-4 random syllables from 40, so about 2.6 million
    // possible words; lines of 12 words.
    Rng r;
    rng_seed(&r, 1);
    const char *syl[40] = {"ka", "lo", "mi", "zen", "tor", "ab", "el", "iah", "ner", "zar", "ith", "ma", "ku",
                           "on", "dri", "qua", "ves", "pli", "yu", "gar", "sho", "bex", "ra", "tu", "fen", "wi",
                           "ox", "ul", "nim", "pe", "ja", "co", "lir", "da", "vu", "hes", "ty", "mo", "sa", "ge"};
    size_t k = 0;
    for (int w = 0; k + 64 < n; w++) {
        if (w % 12 == 0 && w) text[k++] = '\n'; else if (w) text[k++] = ' ';
        for (int q = 1 + (int)rng_below(&r, 4); q > 0; q--) {
            const char *s = syl[rng_below(&r, 40)];
            size_t len = strlen(s);
            memcpy(text + k, s, len);
            k += len;
        }
    }
    printf("synthetic: %zu bytes of random syllable words\n", k);
    printf("%8s %10s %12s %12s %12s\n", "vocab", "train s", "encode MB/s", "tokens", "bytes/token");
    for (int v = 0; v < 3; v++)
        if (bench_row(text, k, vocabs[v], 1, back, ids)) return 1;
    free(text); free(back); free(ids);
    return 0;
}
