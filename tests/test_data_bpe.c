// test_data_bpe.c: the BPE tokenizer: hand-worked merges, the fast trainer
// against a naive full-recount reference, encode against a naive
// merge-by-merge reference (long pieces too), round trips, determinism, the
// file of each pre-tokenizer and of another byte order (version 3), and bad
// tokenizer files; with both pre-split rules (their pieces:
// test_data_pretokenize.c).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/rng.h"
#include "data/bpe.h"

static char err[1024];

// ---------------------------------------------------------------- helpers

static const BpePretok RULES[2] = {BPE_PRETOK_BYTE_CLASSES, BPE_PRETOK_GPT2};

static void train_rule(Tokenizer *tok, BpePretok rule, const uint8_t *text, size_t n, int vocab) {
    int rc = bpe_train_multi(tok, rule, &text, &n, 1, vocab, NULL, NULL, err, sizeof err);
    if (rc) print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(tok->pretok, rule);
}

static void train_text(Tokenizer *tok, const char *text, int vocab) {
    int rc = bpe_train(tok, (const uint8_t *)text, strlen(text), vocab, NULL, NULL, err, sizeof err);
    if (rc) print_error("%s\n", err);
    assert_int_equal(rc, 0);
}

// Pseudo-text over a small alphabet with spaces and newlines, so many pairs repeat.
static uint8_t *random_text(Rng *r, size_t n, const char *alphabet) {
    uint8_t *t = malloc(n);
    size_t a = strlen(alphabet);
    for (size_t i = 0; i < n; i++) t[i] = alphabet[rng_below(r, a)];
    return t;
}

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n + 1);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

// ---------------------------------------------------------------- hand-worked merges

// Corpus "aaab aab ab". Pieces: "aaab", " aab", " ab" (one each).
// Pair counts (overlapping pairs count: "aaa" holds (a,a) twice):
//   (a,a) = 2 + 1 = 3     (a,b) = 1 + 1 + 1 = 3     (' ',a) = 1 + 1 = 2
// merge 256 = (a,a): tie at 3 with (a,b); lowest ids win, 'a' 97 < 'b' 98.
//   words: [256,a,b]  [' ',256,b]  [' ',a,b]
//   (a,b) = 2, (256,a) = 1, (' ',256) = 1, (256,b) = 1, (' ',a) = 1
// merge 257 = (a,b), count 2.
//   words: [256,257]  [' ',256,b]  [' ',257]
//   every pair now counts 1: (256,257) (' ',256) (256,b) (' ',257)
// merge 258 = (' ',256): lowest left id 32, then lowest right 256 < 257.
// merge 259 = (' ',257): left 32 again.
// merge 260 = (256,257), merge 261 = (258,b). No pair is left: the training
// stops at 6 merges and the vocabulary is 256 + 6 + 1 = 263, whatever was asked.
static void test_hand_worked_merges(void **state) {
    Tokenizer tok;
    train_text(&tok, "aaab aab ab", 300);
    const uint32_t want[6][2] = {{'a', 'a'}, {'a', 'b'}, {' ', 256}, {' ', 257}, {256, 257}, {258, 'b'}};
    assert_int_equal(tok.n_merges, 6);
    assert_int_equal(tok.vocab_size, 263);
    assert_int_equal(tok.eot_id, 262);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(tok.merges[i][0], want[i][0]);
        assert_int_equal(tok.merges[i][1], want[i][1]);
    }
    int len;
    const uint8_t *p = bpe_token(&tok, 261, &len);
    assert_int_equal(len, 4);
    assert_memory_equal(p, " aab", 4);
    // The training words encode to one token each.
    uint32_t ids[16];
    assert_int_equal(bpe_encode(&tok, (const uint8_t *)"aaab aab ab", 11, ids), 3);
    assert_int_equal(ids[0], 260);
    assert_int_equal(ids[1], 261);
    assert_int_equal(ids[2], 259);
    bpe_free(&tok);
}

// Corpus "ab ab ab cd": pieces "ab" x1, " ab" x2, " cd" x1.
//   (a,b) = 3, (' ',a) = 2, (' ',c) = 1, (c,d) = 1   -> 256 = (a,b)
//   (' ',256) = 2, (' ',c) = 1, (c,d) = 1            -> 257 = (' ',256)
//   (' ',c) = 1, (c,d) = 1: tie, ' ' 32 < 'c' 99      -> 258 = (' ',c)
//   (258,d) = 1                                       -> 259 = (258,d)
// Asking for vocab 259 stops after 2 merges (259 = 256 + 2 + eot).
static void test_counts_weight_merges(void **state) {
    Tokenizer tok;
    train_text(&tok, "ab ab ab cd", 400);
    const uint32_t want[4][2] = {{'a', 'b'}, {' ', 256}, {' ', 'c'}, {258, 'd'}};
    assert_int_equal(tok.n_merges, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tok.merges[i][0], want[i][0]);
        assert_int_equal(tok.merges[i][1], want[i][1]);
    }
    bpe_free(&tok);
    train_text(&tok, "ab ab ab cd", 259);
    assert_int_equal(tok.n_merges, 2);
    assert_int_equal(tok.vocab_size, 259);
    assert_int_equal(tok.merges[1][1], 256);
    bpe_free(&tok);
}

// ---------------------------------------------------------------- naive references

typedef struct { uint32_t *s; size_t len; } RefWord;

// Every piece of the text as its own word (no dedup, no incremental counts);
// a piece longer than max_len as parts of max_len bytes, as training counts it.
static RefWord *ref_words(BpePretok rule, const uint8_t *text, size_t n, size_t max_len, size_t *n_words) {
    RefWord *w = malloc((n + 1) * sizeof *w);
    size_t k = 0;
    for (size_t i = 0, end = 0; i < n;) {
        if (i == end) end = pretok_piece_end(rule, text, n, i);
        size_t j = end - i > max_len ? i + max_len : end;
        w[k].s = malloc((j - i) * sizeof(uint32_t));
        w[k].len = j - i;
        for (size_t q = i; q < j; q++) w[k].s[q - i] = text[q];
        k++;
        i = j;
    }
    *n_words = k;
    return w;
}

static void ref_merge(RefWord *w, uint32_t l, uint32_t r, uint32_t id) {
    size_t m = 0;
    for (size_t i = 0; i < w->len;) {
        if (i + 1 < w->len && w->s[i] == l && w->s[i + 1] == r) { w->s[m++] = id; i += 2; }
        else w->s[m++] = w->s[i++];
    }
    w->len = m;
}

// Textbook BPE: recount every pair of every word before each merge, take the
// highest count, ties to the lowest (left, right). A dense count table: small vocab only.
static int ref_train(BpePretok rule, const uint8_t *text, size_t n, int vocab, uint32_t (*merges)[2]) {
    size_t n_words;
    RefWord *w = ref_words(rule, text, n, BPE_MAX_PIECE, &n_words);
    const int V = vocab;   // ids stay below vocab
    int64_t *count = malloc((size_t)V * V * sizeof *count);
    int n_merges = 0;
    while (n_merges < vocab - 257) {
        memset(count, 0, (size_t)V * V * sizeof *count);
        for (size_t k = 0; k < n_words; k++)
            for (size_t i = 0; i + 1 < w[k].len; i++) count[w[k].s[i] * V + w[k].s[i + 1]]++;
        int64_t best = 0;
        uint32_t bl = 0, br = 0;
        for (uint32_t l = 0; l < (uint32_t)V; l++)
            for (uint32_t r = 0; r < (uint32_t)V; r++)
                if (count[l * V + r] > best) { best = count[l * V + r]; bl = l; br = r; }
        if (best == 0) break;
        merges[n_merges][0] = bl;
        merges[n_merges][1] = br;
        for (size_t k = 0; k < n_words; k++) ref_merge(&w[k], bl, br, 256 + n_merges);
        n_merges++;
    }
    for (size_t k = 0; k < n_words; k++) free(w[k].s);
    free(w);
    free(count);
    return n_merges;
}

// Reference encoder: apply every merge in rank order to every piece, whole.
static size_t ref_encode(const Tokenizer *tok, const uint8_t *text, size_t n, uint32_t *out) {
    size_t n_words, n_out = 0;
    RefWord *w = ref_words(tok->pretok, text, n, SIZE_MAX, &n_words);
    for (size_t k = 0; k < n_words; k++) {
        for (int m = 0; m < tok->n_merges; m++) ref_merge(&w[k], tok->merges[m][0], tok->merges[m][1], 256 + m);
        memcpy(out + n_out, w[k].s, w[k].len * sizeof *out);
        n_out += w[k].len;
        free(w[k].s);
    }
    free(w);
    return n_out;
}

// Random texts over small alphabets, so many pairs repeat; the last ones hold
// contractions' letters and the bytes of UTF-8 (in random order: valid and
// invalid sequences both), which the two rules cut differently.
static const char *const ALPHABETS[] = {"ab ", "abc \n", "aab  b.", "xyzzy, \n0", "s't \n\n", "a\xc3\xa9\xe2\x80\x99s \n"};
#define N_ALPHABETS 6

static void test_train_matches_reference(void **state) {
    Rng r;
    rng_seed(&r, 7);
    uint32_t (*want)[2] = malloc(1024 * sizeof *want);
    for (int trial = 0; trial < 12; trial++) {
        BpePretok rule = RULES[trial % 2];
        size_t n = 500 + rng_below(&r, 3000);
        uint8_t *text = random_text(&r, n, ALPHABETS[trial % N_ALPHABETS]);
        int vocab = 300 + (int)rng_below(&r, 400);
        int n_want = ref_train(rule, text, n, vocab, want);
        Tokenizer tok;
        train_rule(&tok, rule, text, n, vocab);
        assert_int_equal(tok.n_merges, n_want);
        for (int i = 0; i < n_want; i++) {
            if (tok.merges[i][0] != want[i][0] || tok.merges[i][1] != want[i][1]) {
                print_error("trial %d merge %d: (%u,%u) want (%u,%u)\n", trial, i,
                            tok.merges[i][0], tok.merges[i][1], want[i][0], want[i][1]);
                fail();
            }
        }
        // Encoding: lowest-rank-first with the cache == every merge in order.
        uint32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        uint8_t *other = random_text(&r, n, ALPHABETS[(trial + 1) % N_ALPHABETS]);
        for (int pass = 0; pass < 2; pass++) {   // pass 1 reads from the cache
            const uint8_t *t = pass ? other : text;
            size_t na = bpe_encode(&tok, t, n, a), nb = ref_encode(&tok, t, n, b);
            assert_int_equal(na, nb);
            assert_memory_equal(a, b, na * sizeof *a);
            na = bpe_encode(&tok, t, n, a);
            assert_int_equal(na, nb);
            assert_memory_equal(a, b, na * sizeof *a);
        }
        free(a); free(b); free(other); free(text);
        bpe_free(&tok);
    }
    free(want);
}

// GPT-2's rule does not cut its pieces: one longer than BPE_MAX_PIECE is
// encoded by the heap (bpe.c, merge_heap), which must give the ids of the
// reference, every merge in rank order over the whole piece. Texts of a few
// long pieces: letter runs without spaces, white space, punctuation.
static void test_long_pieces_match_reference(void **state) {
    const char *alphabets[] = {"ab", "aab", "abcab", " \t", " \n\n", ".,-", "abcdefgh"};
    Rng r;
    rng_seed(&r, 17);
    for (int trial = 0; trial < 14; trial++) {
        const char *alphabet = alphabets[trial % 7];
        size_t n = 2000 + rng_below(&r, 6000);
        uint8_t *text = random_text(&r, n, alphabet);
        Tokenizer tok;
        train_rule(&tok, BPE_PRETOK_GPT2, text, n, 300 + (int)rng_below(&r, 300));
        uint8_t *other = random_text(&r, n, alphabet);
        uint32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        size_t longest = 0;
        for (size_t i = 0; i < n;) {
            size_t j = pretok_piece_end(tok.pretok, other, n, i);
            longest = j - i > longest ? j - i : longest;
            i = j;
        }
        assert_true(longest > BPE_MAX_PIECE);
        for (int pass = 0; pass < 2; pass++) {
            const uint8_t *t = pass ? other : text;
            size_t na = bpe_encode(&tok, t, n, a), nb = ref_encode(&tok, t, n, b);
            assert_int_equal(na, nb);
            assert_memory_equal(a, b, na * sizeof *a);
            uint8_t *back = malloc(n);
            assert_int_equal(bpe_decode(&tok, a, na, back, n), n);
            assert_memory_equal(back, t, n);
            free(back);
        }
        // no merge is longer than BPE_MAX_PIECE: training counts long pieces in parts
        for (int id = 0; id < tok.vocab_size; id++) assert_true(tok.token_len[id] <= BPE_MAX_PIECE);
        free(a); free(b); free(other); free(text);
        bpe_free(&tok);
    }
}

// ---------------------------------------------------------------- round trips

static const char *ENGLISH =
    "In the beginning God created the heaven and the earth. And the earth was without form, "
    "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon "
    "the face of the waters.\n  3 And God said, Let there be light: and there was light.\n";

static void test_roundtrip_random_bytes(void **state) {
    for (int k = 0; k < 2; k++) {
    Tokenizer tok;
    train_rule(&tok, RULES[k], (const uint8_t *)ENGLISH, strlen(ENGLISH), 400);
    Rng r;
    rng_seed(&r, 11);
    uint8_t buf[4096], back[4096];
    uint32_t ids[4096];
    for (int trial = 0; trial < 200; trial++) {
        size_t n = rng_below(&r, sizeof buf);
        for (size_t i = 0; i < n; i++) {
            // Mix raw bytes (NUL, invalid UTF-8) with English, so merges fire too.
            buf[i] = rng_below(&r, 3) ? (uint8_t)ENGLISH[rng_below(&r, strlen(ENGLISH))] : (uint8_t)rng_below(&r, 256);
        }
        size_t m = bpe_encode(&tok, buf, n, ids);
        assert_true(m <= n);
        for (size_t i = 0; i < m; i++) assert_true(ids[i] < (uint32_t)tok.eot_id);
        assert_int_equal(bpe_decode(&tok, ids, m, back, sizeof back), n);
        assert_memory_equal(back, buf, n);
    }
    // Decoding reports the bytes needed even when the buffer is too small.
    size_t m = bpe_encode(&tok, (const uint8_t *)ENGLISH, strlen(ENGLISH), ids);
    assert_true(m < strlen(ENGLISH));   // the merges compress
    memset(back, 0, sizeof back);
    assert_int_equal(bpe_decode(&tok, ids, m, back, 10), strlen(ENGLISH));
    assert_memory_equal(back, ENGLISH, 10);
    assert_int_equal(back[10], 0);
    bpe_free(&tok);
    }
}

static void test_eot_and_token_lookup(void **state) {
    Tokenizer tok;
    train_text(&tok, ENGLISH, 300);
    int len = -1;
    assert_non_null(bpe_token(&tok, tok.eot_id, &len));
    assert_int_equal(len, 0);
    assert_null(bpe_token(&tok, tok.vocab_size, &len));
    const uint8_t *p = bpe_token(&tok, 'A', &len);
    assert_int_equal(len, 1);
    assert_int_equal(p[0], 'A');
    // Every merged token is the concatenation of its two parts.
    for (int i = 0; i < tok.n_merges; i++) {
        int ll, lr, lm;
        const uint8_t *l = bpe_token(&tok, tok.merges[i][0], &ll), *rr = bpe_token(&tok, tok.merges[i][1], &lr);
        const uint8_t *m = bpe_token(&tok, 256 + i, &lm);
        assert_int_equal(lm, ll + lr);
        assert_memory_equal(m, l, ll);
        assert_memory_equal(m + ll, rr, lr);
    }
    uint32_t ids[3] = {'h', (uint32_t)tok.eot_id, 'i'};
    uint8_t out[8];
    assert_int_equal(bpe_decode(&tok, ids, 3, out, sizeof out), 2);
    assert_memory_equal(out, "hi", 2);
    bpe_free(&tok);
}

// The text the cuts are tried on: ENGLISH and what GPT-2's rule looks ahead
// for (white space before a word or at the end, contractions, non-ASCII).
static const char CUT_TEXT[] =
    "In the beginning God created the heaven and the earth. And the earth was without form, "
    "and void.\n\nExodus 1\n\n  1 Now these are the names   of the children of Israel; LORD's 'tis "
    "we'll \t\tcaf\xc3\xa9 x\xc2\xb2 it\xe2\x80\x99s \xc2\xa0 \xf0\x9f\x91\x8b!  \n \n\n";

static void test_chunked_encoding_matches_whole(void **state) {
    for (int k = 0; k < 2; k++) {
        Tokenizer tok;
        train_rule(&tok, RULES[k], (const uint8_t *)CUT_TEXT, strlen(CUT_TEXT), 350);
        Rng r;
        rng_seed(&r, 5);
        const uint8_t *t = (const uint8_t *)CUT_TEXT;
        size_t n = strlen(CUT_TEXT);
        uint32_t whole[1024], parts[1024];
        size_t n_whole = bpe_encode(&tok, t, n, whole);
        for (int trial = 0; trial < 50; trial++) {
            size_t n_parts = 0;
            for (size_t start = 0; start < n;) {   // parts of random lengths
                size_t end = pretok_chunk_end(tok.pretok, t, n, start, rng_below(&r, 20));
                n_parts += bpe_encode(&tok, t + start, end - start, parts + n_parts);
                start = end;
            }
            assert_int_equal(n_parts, n_whole);
            assert_memory_equal(parts, whole, n_whole * sizeof *whole);
        }
        bpe_free(&tok);
    }
}

// ---------------------------------------------------------------- files

// FNV-1a, 64 bits, written from its definition (Fowler, Noll, Vo): the
// test's own, checked on the published vectors.
static uint64_t fnv1a64(const uint8_t *p, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

// Each rule's file: byte classes as version 1 (a 24-byte header: the files
// made before the rule was recorded), GPT-2's as version 2 (28 bytes: the
// rule's number at 24).
static void test_deterministic_files(void **state) {
    Rng r;
    rng_seed(&r, 3);
    size_t n = 200000;
    uint8_t *text = random_text(&r, n, "etaoin shrdlu\n,.'");
    assert_true(fnv1a64((const uint8_t *)"", 0) == 0xcbf29ce484222325ull);   // the published test vectors
    assert_true(fnv1a64((const uint8_t *)"a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(fnv1a64((const uint8_t *)"foobar", 6) == 0x85944171f73967e8ull);
    uint64_t checksum[2];
    for (int k = 0; k < 2; k++) {
        BpePretok rule = RULES[k];
        size_t header = rule == BPE_PRETOK_BYTE_CLASSES ? 24 : 28;
        Tokenizer a, b;
        train_rule(&a, rule, text, n, 2000);
        train_rule(&b, rule, text, n, 2000);
        assert_int_equal(bpe_save(&a, "build/test_bpe_a.bin", ATOMIC_REPLACE, err, sizeof err), 0);
        assert_int_equal(bpe_save(&b, "build/test_bpe_b.bin", ATOMIC_REPLACE, err, sizeof err), 0);
        size_t na, nb;
        uint8_t *fa = read_all("build/test_bpe_a.bin", &na), *fb = read_all("build/test_bpe_b.bin", &nb);
        assert_int_equal(na, header + 8 * (size_t)a.n_merges);
        assert_int_equal(na, nb);
        assert_memory_equal(fa, fb, na);
        // The layout: magic, version, vocab, eot, n_merges, (version 2: the rule), then the merges.
        assert_memory_equal(fa, "RLBPETOK", 8);
        uint32_t head[5];
        memcpy(head, fa + 8, header - 8);
        assert_int_equal(head[0], header == 24 ? 1 : 2);
        assert_int_equal(head[1], a.vocab_size);
        assert_int_equal(head[2], a.vocab_size - 1);
        assert_int_equal(head[3], a.n_merges);
        if (header == 28) assert_int_equal(head[4], 1);
        uint32_t m0[2];
        memcpy(m0, fa + header, 8);
        assert_int_equal(m0[0], a.merges[0][0]);
        assert_int_equal(m0[1], a.merges[0][1]);

        // Load gives the same tokenizer, rule included, and the same encoding.
        Tokenizer c;
        assert_int_equal(bpe_load(&c, "build/test_bpe_a.bin", err, sizeof err), 0);
        assert_int_equal(c.pretok, rule);
        assert_int_equal(c.vocab_size, a.vocab_size);
        assert_memory_equal(c.merges, a.merges, a.n_merges * sizeof *a.merges);
        uint32_t *ia = malloc(n * sizeof *ia), *ic = malloc(n * sizeof *ic);
        size_t ma = bpe_encode(&a, text, n, ia), mc = bpe_encode(&c, text, n, ic);
        assert_int_equal(ma, mc);
        assert_memory_equal(ia, ic, ma * sizeof *ia);

        // The checksum is FNV-1a 64 of the file's bytes, the same whether the
        // tokenizer was trained or loaded; another tokenizer has another one.
        assert_true(bpe_checksum(&a) == fnv1a64(fa, na));
        assert_true(bpe_checksum(&c) == fnv1a64(fa, na));
        checksum[k] = bpe_checksum(&a);
        Tokenizer d;
        train_rule(&d, rule, text, n, 1999);
        assert_true(bpe_checksum(&d) != bpe_checksum(&a));
        free(ia); free(ic); free(fa); free(fb);
        bpe_free(&a); bpe_free(&b); bpe_free(&c); bpe_free(&d);
    }
    assert_true(checksum[0] != checksum[1]);
    // The same merges under the other rule are another tokenizer: the rule is in the file.
    Tokenizer e, f;
    const uint32_t merges[2][2] = {{'a', 'b'}, {256, 'c'}};
    assert_int_equal(bpe_from_merges(&e, BPE_PRETOK_BYTE_CLASSES, NULL, merges, 2, err, sizeof err), 0);
    assert_int_equal(bpe_from_merges(&f, BPE_PRETOK_GPT2, NULL, merges, 2, err, sizeof err), 0);
    assert_true(bpe_checksum(&e) != bpe_checksum(&f));
    bpe_free(&e); bpe_free(&f);
    free(text);
}

// Writes a tokenizer file with the given header and merges; loads it; expects
// failure with `want` in the message.
// bytes NULL: the file at path is already written.
static void expect_bad_file(const char *path, const void *bytes, size_t n, const char *want) {
    if (bytes) write_all(path, bytes, n);
    Tokenizer tok;
    err[0] = 0;
    assert_int_equal(bpe_load(&tok, path, err, sizeof err), -1);
    if (!strstr(err, want) || strncmp(err, path, strlen(path)) != 0) {
        print_error("error \"%s\" should name %s and say \"%s\"\n", err, path, want);
        fail();
    }
}

static void test_bad_tokenizer_files(void **state) {
    const char *path = "build/test_bpe_bad.bin";
    uint8_t f[24 + 16];
    uint32_t v[4] = {1, 259, 258, 2}, m[4] = {'a', 'b', 256, 'c'};
    memcpy(f, "RLBPETOK", 8);
    memcpy(f + 8, v, 16);
    memcpy(f + 24, m, 16);
    Tokenizer tok;
    write_all(path, f, sizeof f);   // the good file first
    assert_int_equal(bpe_load(&tok, path, err, sizeof err), 0);
    assert_int_equal(tok.vocab_size, 259);
    int len;
    assert_memory_equal(bpe_token(&tok, 257, &len), "abc", 3);
    assert_int_equal(tok.pretok, BPE_PRETOK_BYTE_CLASSES);   // version 1: the byte classes
    bpe_free(&tok);
    // The same as version 2, GPT-2's rule: the rule's number (1) after the header's five fields.
    uint8_t f2[28 + 16];
    uint32_t v2[5] = {2, 259, 258, 2, 1};
    memcpy(f2, "RLBPETOK", 8);
    memcpy(f2 + 8, v2, 20);
    memcpy(f2 + 28, m, 16);
    write_all(path, f2, sizeof f2);
    assert_int_equal(bpe_load(&tok, path, err, sizeof err), 0);
    assert_int_equal(tok.pretok, BPE_PRETOK_GPT2);
    assert_memory_equal(bpe_token(&tok, 257, &len), "abc", 3);
    bpe_free(&tok);

    assert_int_equal(bpe_load(&tok, "build/no_such_tokenizer.bin", err, sizeof err), -1);
    assert_non_null(strstr(err, "build/no_such_tokenizer.bin: No such file"));

    uint8_t g[sizeof f];
    memcpy(g, f, sizeof f); g[0] = 'X';
    expect_bad_file(path, g, sizeof g, "bad magic");
    memcpy(g, f, sizeof f); g[8] = 4;
    expect_bad_file(path, g, sizeof g, "version 4 is not supported (expected 1, 2 or 3)");
    expect_bad_file(path, f, 20, "too short");
    expect_bad_file(path, f, sizeof f - 4, "file is 36 bytes, expected 40 for 2 merges");
    memcpy(g, f, sizeof f); g[13] = 0;   // vocab 259 = 0x103 -> 3: out of range
    expect_bad_file(path, g, sizeof g, "vocabulary size 3 out of range");
    memcpy(g, f, sizeof f); g[12] = 4; g[16] = 3;   // vocab 260 with 2 merges
    expect_bad_file(path, g, sizeof g, "does not match 2 merges");
    memcpy(g, f, sizeof f); g[16] = 7;   // eot 263
    expect_bad_file(path, g, sizeof g, "eot id");
    memcpy(g, f, sizeof f); g[24 + 8] = 1; g[24 + 9] = 1;   // merge 1 left = 257: itself
    expect_bad_file(path, g, sizeof g, "merge 1 refers to id 257");
    // version 2: a rule it holds (the byte classes are written as version 1), its header whole
    uint8_t g2[sizeof f2];
    memcpy(g2, f2, sizeof f2); g2[24] = 0;
    expect_bad_file(path, g2, sizeof g2, "pre-tokenizer 0 is not one of version 2 (1: gpt2)");
    memcpy(g2, f2, sizeof f2); g2[24] = 7;
    expect_bad_file(path, g2, sizeof g2, "pre-tokenizer 7 is not one of version 2");
    expect_bad_file(path, f2, 26, "file is 26 bytes, shorter than the 28 of a version 2 header");
    memcpy(g, f, sizeof f); g[8] = 2;   // a version 1 file that says 2: its first merge read as the rule
    expect_bad_file(path, g, sizeof g, "pre-tokenizer 97 is not one of version 2");
    expect_bad_file(path, f2, sizeof f2 - 8, "file is 36 bytes, expected 44 for 2 merges");
}

// Version 3: ids 0..255 holding the bytes in another order (a tokenizer read
// from GPT-2's files, format/hf_tokenizer.h): encoding starts from each
// byte's id, decoding gives each id's bytes; the file is version 2's header,
// then the byte of each of ids 0..255, then the merges, and only such a
// tokenizer is written so (the same order given explicitly is version 1's or
// 2's file, byte for byte); each bad version 3 file refused.
static void test_version3_byte_order(void **state) {
    const char *path = "build/test_bpe_v3.bin";
    uint8_t order[256];
    for (int id = 0; id < 256; id++) order[id] = (uint8_t)(255 - id);   // id 0 is byte 0xFF
    const uint32_t merges[2][2] = {{255 - 'a', 255 - 'b'}, {256, 255 - 'c'}};
    Tokenizer t, u;
    assert_int_equal(bpe_from_merges(&t, BPE_PRETOK_GPT2, order, merges, 2, err, sizeof err), 0);
    assert_false(bpe_bytes_in_order(&t));
    assert_int_equal(t.byte_id['x'], 255 - 'x');
    uint32_t ids[8];
    assert_int_equal(bpe_encode(&t, (const uint8_t *)"abcx", 4, ids), 2);
    assert_int_equal(ids[0], 257);
    assert_int_equal(ids[1], 255 - 'x');
    uint8_t back[8];
    assert_int_equal(bpe_decode(&t, ids, 2, back, sizeof back), 4);
    assert_memory_equal(back, "abcx", 4);
    assert_int_equal(bpe_save(&t, path, ATOMIC_REPLACE, err, sizeof err), 0);
    size_t n;
    uint8_t *f = read_all(path, &n);
    assert_int_equal(n, 28 + 256 + 16);
    uint32_t head[5];
    memcpy(head, f + 8, sizeof head);
    assert_int_equal(head[0], 3);
    assert_int_equal(head[4], BPE_PRETOK_GPT2);
    assert_memory_equal(f + 28, order, 256);
    uint32_t m[4];
    memcpy(m, f + 28 + 256, 16);
    assert_memory_equal(m, merges, 16);
    assert_true(bpe_checksum(&t) == fnv1a64(f, n));
    assert_int_equal(bpe_load(&u, path, err, sizeof err), 0);
    assert_true(bpe_checksum(&u) == bpe_checksum(&t));
    assert_int_equal(bpe_encode(&u, (const uint8_t *)"abcx", 4, ids), 2);
    assert_int_equal(ids[0], 257);
    bpe_free(&u);
    // the byte classes in that order: version 3 too, rule 0
    assert_int_equal(bpe_from_merges(&u, BPE_PRETOK_BYTE_CLASSES, order, merges, 2, err, sizeof err), 0);
    assert_int_equal(bpe_save(&u, path, ATOMIC_REPLACE, err, sizeof err), 0);
    bpe_free(&u);
    assert_int_equal(bpe_load(&u, path, err, sizeof err), 0);
    assert_int_equal(u.pretok, BPE_PRETOK_BYTE_CLASSES);
    assert_false(bpe_bytes_in_order(&u));
    bpe_free(&u);
    // the identity order given explicitly: the file of NULL's, version 1 or 2
    uint8_t identity[256];
    for (int id = 0; id < 256; id++) identity[id] = (uint8_t)id;
    const uint32_t plain[2][2] = {{'a', 'b'}, {256, 'c'}};
    for (int k = 0; k < 2; k++) {
        Tokenizer a, b;
        assert_int_equal(bpe_from_merges(&a, RULES[k], identity, plain, 2, err, sizeof err), 0);
        assert_int_equal(bpe_from_merges(&b, RULES[k], NULL, plain, 2, err, sizeof err), 0);
        assert_true(bpe_bytes_in_order(&a));
        assert_true(bpe_checksum(&a) == bpe_checksum(&b));
        bpe_free(&a); bpe_free(&b);
    }
    // an order that holds a byte twice
    uint8_t twice[256];
    memcpy(twice, order, 256);
    twice[7] = twice[3];
    assert_int_equal(bpe_from_merges(&u, BPE_PRETOK_GPT2, twice, merges, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "ids 3 and 7 are both the byte 0xfc"));
    // bad files
    uint8_t g[28 + 256 + 16];
    memcpy(g, f, n);
    g[28 + 7] = g[28 + 3];
    expect_bad_file(path, g, n, "ids 3 and 7 are both the byte 0xfc");
    memcpy(g, f, n);
    memcpy(g + 28, identity, 256);
    expect_bad_file(path, g, n, "version 3 with ids 0..255 in byte order (such a tokenizer is written as version 1 or 2)");
    memcpy(g, f, n);
    g[24] = 7;
    expect_bad_file(path, g, n, "pre-tokenizer 7 is not one ropelab knows");
    expect_bad_file(path, f, 200, "file is 200 bytes, shorter than the 284 of a version 3 header");
    expect_bad_file(path, f, n - 8, "file is 292 bytes, expected 300 for 2 merges");
    free(f);
    bpe_free(&t);
}

// A chain of self-doubling merges: (a,a) -> 2 bytes, (256,256) -> 4, ...
// merge k makes a token of 2^(k+1) bytes. Writes n_merges of them to path.
static void write_doubling_chain(const char *path, int n_merges) {
    size_t n = 24 + 8 * (size_t)n_merges;
    uint8_t *f = malloc(n);
    uint32_t head[4] = {1, 257u + n_merges, 256u + n_merges, (uint32_t)n_merges};
    memcpy(f, "RLBPETOK", 8);
    memcpy(f + 8, head, 16);
    for (int k = 0; k < n_merges; k++) {
        uint32_t id = k == 0 ? 'a' : 256u + k - 1, pair[2] = {id, id};
        memcpy(f + 24 + 8 * k, pair, 8);
    }
    write_all(path, f, n);
    free(f);
}

// The audit's reproducer: 31 self-doubling merges overflowed the int token
// length and wrote past the arena; 30 made the loader allocate 2.1 GB. Every
// token is bounded by the longest a tokenizer can learn (BPE_MAX_PIECE = 256
// bytes: training counts pairs in parts of pieces of at most that), so 8
// doublings (256 bytes) load and the 9th is refused, before any allocation
// sized from the lengths.
static void test_token_length_is_bounded(void **state) {
    const char *path = "build/test_bpe_chain.bin";
    Tokenizer tok;
    write_doubling_chain(path, 8);
    assert_int_equal(bpe_load(&tok, path, err, sizeof err), 0);
    int len;
    assert_non_null(bpe_token(&tok, 263, &len));
    assert_int_equal(len, BPE_MAX_PIECE);
    uint32_t ids[300];
    uint8_t text[BPE_MAX_PIECE];
    memset(text, 'a', sizeof text);
    assert_int_equal(bpe_encode(&tok, text, sizeof text, ids), 1);   // the whole piece is one token
    assert_int_equal(ids[0], 263);
    bpe_free(&tok);
    for (int n = 9; n <= 31; n += 22) {   // 9: the first too long; 31: the audit's file
        write_doubling_chain(path, n);
        expect_bad_file(path, NULL, 0, "merge 8 makes a token of 512 bytes");
    }
    // A directory is not a tokenizer file (it used to report an absurd size).
    assert_int_equal(bpe_load(&tok, "build", err, sizeof err), -1);
    assert_string_equal(err, "build: not a regular file");
}

static void test_bad_training_arguments(void **state) {
    Tokenizer tok;
    assert_int_equal(bpe_train(&tok, (const uint8_t *)"abc", 3, 256, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "vocabulary size 256 out of range"));
    assert_int_equal(bpe_train(&tok, (const uint8_t *)"abc", 3, 65537, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "vocabulary size 65537 out of range"));
    assert_int_equal(bpe_train(&tok, (const uint8_t *)"", 0, 300, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "empty"));
    // 257: bytes and eot only, no merges.
    train_text(&tok, "abc", 257);
    assert_int_equal(tok.n_merges, 0);
    assert_int_equal(tok.eot_id, 256);
    bpe_free(&tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_worked_merges),
        cmocka_unit_test(test_counts_weight_merges),
        cmocka_unit_test(test_train_matches_reference),
        cmocka_unit_test(test_long_pieces_match_reference),
        cmocka_unit_test(test_roundtrip_random_bytes),
        cmocka_unit_test(test_eot_and_token_lookup),
        cmocka_unit_test(test_chunked_encoding_matches_whole),
        cmocka_unit_test(test_deterministic_files),
        cmocka_unit_test(test_bad_tokenizer_files),
        cmocka_unit_test(test_version3_byte_order),
        cmocka_unit_test(test_token_length_is_bounded),
        cmocka_unit_test(test_bad_training_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
