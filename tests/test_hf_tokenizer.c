// test_hf_tokenizer.c: tokenizers read from other programs' files
// (src/format/hf_tokenizer.c): GPT-2's byte alphabet both ways; a
// GPT-2-shaped encoder.json + vocab.bpe with its single bytes in a shuffled
// order, against a naive encoder written here from OpenAI's encoder.py;
// tokenizer.bin version 3 and the exports of such a tokenizer (its own ids
// written back); ./export --format hf's tokenizer.json read back as the
// tokenizer.bin it came from, byte for byte, by ./prepare and ./sample too;
// ./prepare --tokenizer DIR and its data record; and every refusal, each its
// own test on a tokenizer.json written here by hand (GPT-2's real files:
// make test-llamacpp, tests/llamacpp_check.c).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/rng.h"
#include "data/bpe.h"
#include "data/data_record.h"
#include "format/bpe_gpt2.h"
#include "format/hf_tokenizer.h"
#include "util_run.h"

static char err[1024];

// ---------------------------------------------------------------- GPT-2's alphabet, written again

// bytes_to_unicode of OpenAI's encoder.py: '!'..'~', 0xA1..0xAC and
// 0xAE..0xFF stand for themselves; the other bytes, in order, for 256, 257, ...
static uint32_t cp_of[256];

static void make_alphabet(void) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int itself = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cp_of[b] = itself ? (uint32_t)b : 256u + (uint32_t)n++;
    }
}

// The alphabet's text of n bytes, as JSON string content (" and \ escaped) when json, into out.
static size_t alphabet_text(const uint8_t *b, size_t n, int json, char *out) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = cp_of[b[i]];
        if (json && (cp == '"' || cp == '\\')) out[len++] = '\\';
        if (cp < 0x80) out[len++] = (char)cp;
        else { out[len++] = (char)(0xC0 | cp >> 6); out[len++] = (char)(0x80 | (cp & 0x3F)); }
    }
    out[len] = 0;
    return len;
}

// bpe_gpt2_bytes against the table above: every code point below U+0800 (and
// some above) names the byte bytes_to_unicode gives it, or none; a whole text back.
static void test_alphabet_both_ways(void **state) {
    (void)state;
    make_alphabet();
    int named = 0;
    for (uint32_t cp = 0; cp < 0x900; cp++) {
        char text[4];
        size_t len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
        if (len == 1) text[0] = (char)cp;
        else if (len == 2) { text[0] = (char)(0xC0 | cp >> 6); text[1] = (char)(0x80 | (cp & 0x3F)); }
        else { text[0] = (char)(0xE0 | cp >> 12); text[1] = (char)(0x80 | (cp >> 6 & 0x3F)); text[2] = (char)(0x80 | (cp & 0x3F)); }
        int want = -1;
        for (int b = 0; b < 256; b++)
            if (cp_of[b] == cp) want = b;
        uint8_t got[4];
        uint32_t bad;
        int n = bpe_gpt2_bytes(text, len, got, 4, &bad);
        if (want < 0) {
            assert_int_equal(n, -1);
            assert_int_equal(bad, cp);
        } else {
            assert_int_equal(n, 1);
            assert_int_equal(got[0], want);
            assert_int_equal(bpe_gpt2_codepoint((uint8_t)want), cp);
            named++;
        }
    }
    assert_int_equal(named, 256);
    uint8_t all[256], back[256];
    char text[600];
    for (int b = 0; b < 256; b++) all[b] = (uint8_t)(255 - b);
    size_t len = alphabet_text(all, 256, 0, text);
    uint32_t bad;
    assert_int_equal(bpe_gpt2_bytes(text, len, back, 256, &bad), 256);
    assert_memory_equal(back, all, 256);
    assert_int_equal(bpe_gpt2_bytes(text, len, back, 255, &bad), -1);   // longer than the room
    assert_int_equal(bad, 0xFFFFFFFF);
    assert_int_equal(bpe_gpt2_bytes("\xC4", 1, back, 4, &bad), -1);         // cut short: not UTF-8
    assert_int_equal(bpe_gpt2_bytes("\xC0\xA1", 2, back, 4, &bad), -1);     // '!' overlong: not UTF-8
    assert_int_equal(bad, 0xFFFFFFFF);
}

// ---------------------------------------------------------------- a GPT-2-shaped vocabulary

// A vocabulary as GPT-2's files hold it: ids 0..255 the bytes order[0..255],
// 256 + i merge i's token, then <|endoftext|>. Token bytes by id.
typedef struct {
    uint8_t order[256];
    int n_merges;
    uint32_t (*merges)[2];   // ids
    uint8_t **bytes;
    int *len;
} Vocab;

// The merges of a tokenizer ropelab trains on text (GPT-2's rule), with the single bytes in the order order.
static void vocab_from_training(Vocab *v, const uint8_t *order, const char *text, int vocab_size) {
    Tokenizer t;
    size_t n = strlen(text);
    const uint8_t *p = (const uint8_t *)text;
    assert_int_equal(bpe_train_multi(&t, BPE_PRETOK_GPT2, &p, &n, 1, vocab_size, NULL, NULL, err, sizeof err), 0);
    memcpy(v->order, order, 256);
    v->n_merges = t.n_merges;
    int V = t.vocab_size;
    v->merges = malloc((size_t)t.n_merges * sizeof *v->merges);
    v->bytes = malloc((size_t)V * sizeof *v->bytes);
    v->len = malloc((size_t)V * sizeof *v->len);
    uint32_t id_of_byte[256];
    for (int id = 0; id < 256; id++) id_of_byte[order[id]] = (uint32_t)id;
    for (int id = 0; id < V; id++) {
        int len;
        const uint8_t *b = bpe_token(&t, (uint32_t)id, &len);
        v->len[id] = id < 256 ? 1 : len;
        v->bytes[id] = malloc((size_t)len + 1);
        if (id < 256) v->bytes[id][0] = order[id];
        else memcpy(v->bytes[id], b, (size_t)len);
    }
    for (int i = 0; i < t.n_merges; i++)   // ropelab's ids of the single bytes are the bytes themselves
        for (int k = 0; k < 2; k++) {
            uint32_t id = t.merges[i][k];
            v->merges[i][k] = id < 256 ? id_of_byte[id] : id;
        }
    bpe_free(&t);
}

static void vocab_free(Vocab *v) {
    for (int id = 0; id < 256 + v->n_merges + 1; id++) free(v->bytes[id]);
    free(v->bytes); free(v->len); free(v->merges);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    fclose(f);
}

// encoder.json and vocab.bpe of v into dir (under the names given).
static void write_gpt2_pair(const Vocab *v, const char *dir_path, const char *vocab_name, const char *merges_name) {
    char path[1200], text[2 * BPE_MAX_PIECE * 2 + 8];
    snprintf(path, sizeof path, "%s/%s", dir_path, vocab_name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputc('{', f);
    for (int id = 0; id < 256 + v->n_merges; id++) {
        alphabet_text(v->bytes[id], (size_t)v->len[id], 1, text);
        fprintf(f, "\"%s\": %d, ", text, id);
    }
    fprintf(f, "\"<|endoftext|>\": %d}", 256 + v->n_merges);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s", dir_path, merges_name);
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("#version: 0.2\n", f);
    for (int i = 0; i < v->n_merges; i++) {
        for (int k = 0; k < 2; k++) {
            uint32_t id = v->merges[i][k];
            alphabet_text(v->bytes[id], (size_t)v->len[id], 0, text);
            fprintf(f, "%s%s", text, k ? "\n" : " ");
        }
    }
    fclose(f);
}

// OpenAI's encoder.py, naively: each piece (GPT-2's regex, pretokenize.c) a
// list of byte strings; while a pair of neighbours is a merge, the pair of
// lowest rank is joined wherever it occurs, left to right; then each string's
// id is looked up in the vocabulary by its bytes. Returns the number of ids.
static size_t naive_encode(const Vocab *v, const uint8_t *text, size_t n, uint32_t *ids) {
    size_t n_ids = 0;
    int V = 256 + v->n_merges;
    uint8_t **part = malloc(n * sizeof *part);
    int *plen = malloc(n * sizeof *plen);
    uint8_t *buf = malloc(2 * n + 1);
    for (size_t i = 0; i < n;) {
        size_t end = pretok_piece_end(BPE_PRETOK_GPT2, text, n, i), m = end - i;
        for (size_t k = 0; k < m; k++) { part[k] = malloc(m); part[k][0] = text[i + k]; plen[k] = 1; }
        for (;;) {
            int best = -1;
            for (size_t k = 0; k + 1 < m; k++)
                for (int r = 0; r < v->n_merges && (best < 0 || r < best); r++) {
                    uint32_t l = v->merges[r][0], rr = v->merges[r][1];
                    if (v->len[l] == plen[k] && v->len[rr] == plen[k + 1] &&
                        memcmp(v->bytes[l], part[k], (size_t)plen[k]) == 0 &&
                        memcmp(v->bytes[rr], part[k + 1], (size_t)plen[k + 1]) == 0)
                        best = r;
                }
            if (best < 0) break;
            uint32_t l = v->merges[best][0], rr = v->merges[best][1];
            size_t w = 0;
            for (size_t k = 0; k < m;) {
                if (k + 1 < m && v->len[l] == plen[k] && v->len[rr] == plen[k + 1] &&
                    memcmp(v->bytes[l], part[k], (size_t)plen[k]) == 0 &&
                    memcmp(v->bytes[rr], part[k + 1], (size_t)plen[k + 1]) == 0) {
                    memcpy(buf, part[k], (size_t)plen[k]);
                    memcpy(buf + plen[k], part[k + 1], (size_t)plen[k + 1]);
                    int joined = plen[k] + plen[k + 1];
                    free(part[k + 1]);
                    memcpy(part[k], buf, (size_t)joined);
                    plen[k] = joined;
                    part[w] = part[k]; plen[w] = plen[k];
                    w++; k += 2;
                } else {
                    part[w] = part[k]; plen[w] = plen[k];
                    w++; k++;
                }
            }
            m = w;
        }
        for (size_t k = 0; k < m; k++) {
            int id = -1;
            for (int j = 0; j < V && id < 0; j++)
                if (v->len[j] == plen[k] && memcmp(v->bytes[j], part[k], (size_t)plen[k]) == 0) id = j;
            assert_true(id >= 0);
            ids[n_ids++] = (uint32_t)id;
            free(part[k]);
        }
        i = end;
    }
    free(part); free(plen); free(buf);
    return n_ids;
}

static const char CORPUS[] =
    "\xe2\x80\x9cIt\xe2\x80\x99s the LORD\xe2\x80\x99s,\xe2\x80\x9d she said; thou cam'st, 'tis we'll, they're, I'm. "
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; "
    "and darkness was upon the face of the deep.\n\n  12 The caf\xc3\xa9 na\xc3\xafve \xe1\xbc\x98\xce\xbd "
    "\xf0\x9f\x91\x8b\xf0\x9f\x8f\xbd 1234567 x\xc2\xb2 + y\xc2\xb3 \"quoted\" back\\slash\t\ttabs   \n";

// CORPUS, then lines of words made of random syllables (many pairs to merge).
static char *make_corpus(int lines) {
    static const char *const SYL[] = {"th", "e", "an", "d", "ing", "ka", "ro", "\xc3\xa9", "st", "l", "ou",
                                      "\xce\xbb", "'s", "qu", "x", "mb"};
    size_t cap = strlen(CORPUS) + (size_t)lines * 200 + 1, n = 0;
    char *t = malloc(cap);
    Rng r;
    rng_seed(&r, 17);
    n += (size_t)snprintf(t, cap, "%s", CORPUS);
    for (int i = 0; i < lines; i++) {
        for (int w = 0; w < 8; w++) {
            t[n++] = w ? ' ' : (char)('0' + i % 10);
            for (int k = 1 + (int)rng_below(&r, 3); k > 0; k--)
                n += (size_t)snprintf(t + n, cap - n, "%s", SYL[rng_below(&r, 16)]);
        }
        n += (size_t)snprintf(t + n, cap - n, "%s", i % 7 ? ".\n" : ",\n\n");
    }
    t[n] = 0;
    return t;
}

// A random order of the 256 bytes (GPT-2's own is another: the test takes any).
static void shuffled(uint8_t order[256], uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    for (int b = 0; b < 256; b++) order[b] = (uint8_t)b;
    for (int b = 255; b > 0; b--) {
        int j = (int)rng_below(&r, (uint64_t)b + 1);
        uint8_t t = order[b]; order[b] = order[j]; order[j] = t;
    }
}

static void expect_ids(const Tokenizer *t, const Vocab *v, const uint8_t *text, size_t n, const char *what) {
    uint32_t *want = malloc((n + 1) * sizeof *want), *got = malloc((n + 1) * sizeof *got);
    size_t nw = naive_encode(v, text, n, want), ng = bpe_encode(t, text, n, got);
    if (nw != ng || memcmp(want, got, nw * sizeof *want) != 0) {
        size_t k = 0;
        while (k < nw && k < ng && want[k] == got[k]) k++;
        fail_msg("%s: %zu ids, the naive encoder's %zu; first difference at id %zu (%u, want %u)", what, ng, nw, k,
                 k < ng ? got[k] : 0, k < nw ? want[k] : 0);
    }
    uint8_t *back = malloc(n + 1);
    assert_int_equal(bpe_decode(t, got, ng, back, n + 1), n);
    assert_memory_equal(back, text, n);
    free(want); free(got); free(back);
}

// GPT-2's pair with its single bytes in a shuffled order (and under Hugging
// Face's names, vocab.json and merges.txt): the ids of the naive encoder, on
// the corpus, on random bytes (invalid UTF-8 included) and on a long piece;
// tokenizer.bin version 3 (the order after the rule) read back the same;
// the GGUF's and tokenizer.json's vocabulary the files' own ids, and that
// tokenizer.json read back the same tokenizer.
static void test_gpt2_pair_shuffled(void **state) {
    (void)state;
    make_alphabet();
    char tmp[] = "/tmp/ropelab_hftok_XXXXXX", path[600];
    assert_non_null(mkdtemp(tmp));
    char *corpus = make_corpus(300);
    uint8_t order[256];
    shuffled(order, 7);
    Vocab v;
    vocab_from_training(&v, order, corpus, 700);
    assert_int_equal(v.n_merges, 700 - 257);
    for (int names = 0; names < 2; names++) {
        snprintf(path, sizeof path, "%s/%d", tmp, names);
        assert_int_equal(mkdir(path, 0700), 0);
        write_gpt2_pair(&v, path, names ? "vocab.json" : "encoder.json", names ? "merges.txt" : "vocab.bpe");
        Tokenizer t;
        if (tokenizer_read(&t, path, err, sizeof err) != 0) fail_msg("%s", err);
        assert_int_equal(t.vocab_size, 257 + v.n_merges);
        assert_int_equal(t.pretok, BPE_PRETOK_GPT2);
        assert_false(bpe_bytes_in_order(&t));
        for (int id = 0; id < 256; id++) assert_int_equal(t.byte_id[order[id]], id);
        expect_ids(&t, &v, (const uint8_t *)corpus, strlen(corpus), "the corpus");
        Rng r;
        rng_seed(&r, 11);
        uint8_t noise[3000];
        for (size_t i = 0; i < sizeof noise; i++) noise[i] = (uint8_t)rng_below(&r, 256);
        expect_ids(&t, &v, noise, sizeof noise, "random bytes");
        char long_piece[600];   // one piece longer than BPE_MAX_PIECE: merged by the heap
        for (size_t i = 0; i < sizeof long_piece; i++) long_piece[i] = "thea"[rng_below(&r, 4)];
        expect_ids(&t, &v, (const uint8_t *)long_piece, sizeof long_piece, "a piece of 600 letters");

        // tokenizer.bin version 3: the header of version 2, then the byte of each of ids 0..255
        snprintf(path, sizeof path, "%s/v3.bin", tmp);
        assert_int_equal(bpe_save(&t, path, ATOMIC_REPLACE, err, sizeof err), 0);
        FILE *f = fopen(path, "rb");
        uint8_t head[28 + 256];
        assert_int_equal(fread(head, 1, sizeof head, f), sizeof head);
        fseek(f, 0, SEEK_END);
        assert_int_equal(ftell(f), 28 + 256 + 8 * v.n_merges);
        fclose(f);
        uint32_t fields[5];
        memcpy(fields, head + 8, sizeof fields);
        assert_int_equal(fields[0], 3);
        assert_int_equal(fields[4], BPE_PRETOK_GPT2);
        assert_memory_equal(head + 28, order, 256);
        Tokenizer u;
        assert_int_equal(bpe_load(&u, path, err, sizeof err), 0);
        assert_true(bpe_checksum(&u) == bpe_checksum(&t));
        expect_ids(&u, &v, (const uint8_t *)corpus, strlen(corpus), "the corpus by the version 3 file");
        bpe_free(&u);

        // exported: each token's text at the files' own id, the merges as vocab.bpe's lines
        BpeGguf g;
        assert_int_equal(bpe_gguf(&t, &g, err, sizeof err), 0);
        char text[2 * BPE_MAX_PIECE + 1];
        for (int id = 0; id < t.vocab_size - 1; id++) {
            alphabet_text(v.bytes[id], (size_t)v.len[id], 0, text);
            assert_string_equal(g.tokens[id], text);
        }
        bpe_gguf_free(&g);
        cJSON *json;
        assert_int_equal(hf_tokenizer_json(&t, &json, err, sizeof err), 0);
        char *printed = cJSON_PrintUnformatted(json);
        cJSON_Delete(json);
        snprintf(path, sizeof path, "%s/exported.json", tmp);
        write_text(path, printed);
        free(printed);
        assert_int_equal(tokenizer_read(&u, path, err, sizeof err), 0);
        assert_true(bpe_checksum(&u) == bpe_checksum(&t));
        bpe_free(&u);
        bpe_free(&t);
    }
    vocab_free(&v);
    free(corpus);
    run_shell("rm -rf '%s'", tmp);
}

// ./prepare --tokenizer DIR (GPT-2's pair): the token files of the naive
// encoder's ids (eot first), tokenizer.bin version 3, and a data record
// naming the directory with the size and checksum of its two files read one
// after the other; --record makes the same data again, and refuses once
// vocab.bpe changed; ./sample --tokenizer DIR refused for a model of another tokenizer.
static void test_prepare_gpt2_pair(void **state) {
    (void)state;
    make_alphabet();
    snprintf(dir, sizeof dir, "/tmp/ropelab_hfprep_XXXXXX");
    assert_non_null(mkdtemp(dir));
    char corpus_path[600], tok_dir[600], path[700];
    char *corpus = make_corpus(100);
    snprintf(corpus_path, sizeof corpus_path, "%s/corpus.txt", dir);
    write_text(corpus_path, corpus);
    uint8_t order[256];
    shuffled(order, 3);
    Vocab v;
    vocab_from_training(&v, order, corpus, 400);
    snprintf(tok_dir, sizeof tok_dir, "%s/gpt2", dir);
    assert_int_equal(mkdir(tok_dir, 0700), 0);
    write_gpt2_pair(&v, tok_dir, "encoder.json", "vocab.bpe");
    if (run("./prepare --tokenizer %s --val-fraction 0.1 --out-dir %s/data %s", tok_dir, dir, corpus_path) != 0)
        fail_msg("./prepare --tokenizer DIR: %s", out);
    char summary[200];
    snprintf(summary, sizeof summary, "vocab %d (%d merges, eot %d), pre-tokenizer gpt2, loaded", v.n_merges + 257,
             v.n_merges, v.n_merges + 256);
    if (!strstr(out, summary)) fail_msg("./prepare's summary lacks \"%s\":\n%s", summary, out);
    // the tokens: eot, then the naive encoder's ids
    size_t n = strlen(corpus), n_train, n_val;
    uint32_t *want = malloc((n + 1) * sizeof *want);
    want[0] = (uint32_t)v.n_merges + 256;
    size_t n_want = 1 + naive_encode(&v, (const uint8_t *)corpus, n, want + 1);
    snprintf(path, sizeof path, "%s/data/train.bin", dir);
    FILE *f = fopen(path, "rb");
    int32_t header[256];
    assert_int_equal(fread(header, 4, 256, f), 256);
    n_train = (size_t)header[2];
    uint16_t *tokens = malloc(n_want * sizeof *tokens);
    assert_int_equal(fread(tokens, 2, n_train, f), n_train);
    fclose(f);
    snprintf(path, sizeof path, "%s/data/val.bin", dir);
    f = fopen(path, "rb");
    assert_int_equal(fread(header, 4, 256, f), 256);
    n_val = (size_t)header[2];
    assert_int_equal(n_train + n_val, n_want);
    assert_int_equal(fread(tokens + n_train, 2, n_val, f), n_val);
    fclose(f);
    for (size_t i = 0; i < n_want; i++)
        if (tokens[i] != want[i]) fail_msg("token %zu is %u, the naive encoder's %u", i, tokens[i], want[i]);
    // tokenizer.bin: version 3
    snprintf(path, sizeof path, "%s/data/tokenizer.bin", dir);
    Tokenizer t;
    assert_int_equal(bpe_load(&t, path, err, sizeof err), 0);
    assert_false(bpe_bytes_in_order(&t));
    bpe_free(&t);
    // the record: the directory, the two files as one
    char both[700];
    snprintf(both, sizeof both, "%s/both", dir);
    assert_int_equal(run_shell("cat '%s/encoder.json' '%s/vocab.bpe' > '%s'", tok_dir, tok_dir, both), 0);
    DataFile joined;
    assert_int_equal(data_file_record(&joined, both, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/data/data.txt", dir);
    DataRecord r;
    assert_int_equal(data_record_read(&r, path, err, sizeof err), 0);
    assert_string_equal(r.tokenizer_from.path, tok_dir);
    assert_true(r.tokenizer_from.bytes == joined.bytes && r.tokenizer_from.fnv1a == joined.fnv1a);
    data_record_free(&r);
    if (run("./prepare --record %s/data/data.txt --out-dir %s/again", dir, dir) != 0)
        fail_msg("./prepare --record: %s", out);
    snprintf(path, sizeof path, "%s/data/train.bin", dir);
    snprintf(both, sizeof both, "%s/again/train.bin", dir);
    assert_true(files_equal(path, both));
    assert_int_equal(run_shell("echo 'a b' >> '%s/vocab.bpe'", tok_dir), 0);   // another merge list now
    assert_int_equal(run("./prepare --record %s/data/data.txt --out-dir %s/third", dir, dir), 1);
    assert_non_null(strstr(out, "another text"));
    free(tokens); free(want); free(corpus);
    vocab_free(&v);
    remove_data_dir(NULL);
}

// ./export --format hf's tokenizer.json (of ./prepare's default, GPT-2's rule)
// read back is the tokenizer.bin it was written from, byte for byte; so the
// directory and the file serve ./prepare (the same token files) and ./sample
// (the same text) as tokenizer.bin does.
static void test_export_read_back(void **state) {
    (void)state;
    assert_int_equal(make_data_dir("hfback"), 0);
    char tok_bin[600], hf_dir[600], path[700], run_dir[600];
    snprintf(tok_bin, sizeof tok_bin, "%s/data/tokenizer.bin", dir);
    snprintf(run_dir, sizeof run_dir, "%s/run", dir);
    if (run("./train configs/tiny.ini --block=llama %s --steps=2 --eval_every=0 --save_every=0 --quiet --threads=1 "
            "--out_dir=%s", data_args, run_dir) != 0)
        fail_msg("./train: %s", out);
    snprintf(hf_dir, sizeof hf_dir, "%s/hf", dir);
    if (run("./export --weights %s/model.safetensors --tokenizer %s --format hf --out %s", run_dir, tok_bin, hf_dir))
        fail_msg("./export --format hf: %s", out);
    Tokenizer orig, back;
    assert_int_equal(bpe_load(&orig, tok_bin, err, sizeof err), 0);
    assert_int_equal(orig.pretok, BPE_PRETOK_GPT2);
    const char *as[] = {"%s", "%s/tokenizer.json"};
    for (int k = 0; k < 2; k++) {   // the directory, and its file
        snprintf(path, sizeof path, as[k], hf_dir);
        if (tokenizer_read(&back, path, err, sizeof err) != 0) fail_msg("%s", err);
        assert_true(bpe_checksum(&back) == bpe_checksum(&orig));
        assert_true(bpe_bytes_in_order(&back));
        char saved[700];
        snprintf(saved, sizeof saved, "%s/back.bin", dir);
        assert_int_equal(bpe_save(&back, saved, ATOMIC_REPLACE, err, sizeof err), 0);
        assert_true(files_equal(saved, tok_bin));
        bpe_free(&back);
    }
    bpe_free(&orig);
    if (run("./prepare --tokenizer %s/tokenizer.json --val-fraction 0.1 --out-dir %s/again %s/corpus.txt", hf_dir, dir,
            dir) != 0)
        fail_msg("./prepare --tokenizer tokenizer.json: %s", out);
    const char *files[] = {"tokenizer.bin", "train.bin", "val.bin"};
    for (int k = 0; k < 3; k++) {
        char a[700], b[700];
        snprintf(a, sizeof a, "%s/data/%s", dir, files[k]);
        snprintf(b, sizeof b, "%s/again/%s", dir, files[k]);
        if (!files_equal(a, b)) fail_msg("%s differs from %s", b, a);
    }
    static char text[3][sizeof out];
    const char *tokenizers[3] = {tok_bin, hf_dir, path};
    snprintf(path, sizeof path, "%s/tokenizer.json", hf_dir);
    for (int k = 0; k < 3; k++) {
        if (run("./sample --weights %s/model.safetensors --tokenizer %s --prompt 'the king' --tokens 40 --seed 3 "
                "--threads 1", run_dir, tokenizers[k]) != 0)
            fail_msg("./sample --tokenizer %s: %s", tokenizers[k], out);
        memcpy(text[k], out, sizeof out);
        if (k > 0) assert_string_equal(text[k], text[0]);
    }
    remove_data_dir(NULL);
}

// ---------------------------------------------------------------- refusals

// A small tokenizer.json written by hand: the 256 bytes in GPT-2's order
// (bytes_to_unicode's), the merges below, <|endoftext|> last; each part its
// own JSON text, which a refusal replaces.
static const char *const MERGES[][2] = {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"a", "n"}, {"an", "d"}, {"b", "c"}};
#define N_MERGES 6
#define EOT (256 + N_MERGES)

typedef struct {
    const char *name, *want;   // the refusal, and what its message says
    const char *extra, *truncation, *normalizer, *pre_tokenizer, *post_processor, *decoder, *added_tokens,
        *model_keys;           // replacements of the parts (NULL: the good one)
    const char *const (*merges)[2];   // another merge list (n_merges of them)
    int n_merges;
    const char *merge0;        // merge 0 as this JSON text
    int pairs;                 // the merges as ["LEFT", "RIGHT"]
    int token, token_id;       // token's id written as token_id (when token > 0)
    const char *token_text;    // token's text written as this JSON string content
    int swap[2];               // the ids of these two tokens swapped (when they differ)
    int drop_last_merge;       // the merge list one short (the vocabulary as it was)
    int eot_outside, big;      // <|endoftext|> only in added_tokens; 65,281 more tokens
    const char *raw;           // the whole file instead
    long long sparse;          // or a file of this many bytes, "{" and zeros
} Refusal;

// Byte id of the hand-made vocabulary (GPT-2's order: the bytes that stand for themselves first).
static int gpt2_id_of_byte(uint8_t b) {
    int id = 0;
    for (int k = 0; k < 256; k++) {
        int itself = (k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF);
        if (itself && k == b) return id;
        id += itself;
    }
    for (int k = 0; k < 256; k++) {
        int itself = (k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF);
        if (!itself && k == b) return id;
        id += !itself;
    }
    return -1;
}

static void write_refusal_file(const Refusal *c, const char *path) {
    if (c->raw) { write_text(path, c->raw); return; }
    if (c->sparse) {   // "{" and zeros: JSON by its first byte, refused by its size
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputc('{', f);
        fclose(f);
        assert_int_equal(truncate(path, c->sparse), 0);
        return;
    }
    const char *const (*merges)[2] = c->merges ? c->merges : MERGES;
    int n_merges = c->merges ? c->n_merges : N_MERGES, eot = 256 + n_merges;
    char text[1200];
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fprintf(f, "{\"version\": \"1.0\", %s\"truncation\": %s, \"padding\": null,\n", c->extra ? c->extra : "",
            c->truncation ? c->truncation : "null");
    if (c->added_tokens) fprintf(f, "\"added_tokens\": %s,\n", c->added_tokens);
    else fprintf(f, "\"added_tokens\": [{\"id\": %d, \"content\": \"<|endoftext|>\", \"single_word\": false, "
                 "\"lstrip\": false, \"rstrip\": false, \"normalized\": true, \"special\": true}],\n", eot);
    fprintf(f, "\"normalizer\": %s,\n\"pre_tokenizer\": %s,\n\"post_processor\": %s,\n\"decoder\": %s,\n",
            c->normalizer ? c->normalizer : "null",
            c->pre_tokenizer ? c->pre_tokenizer
                             : "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
                               "\"use_regex\": true}",
            c->post_processor ? c->post_processor
                              : "{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": false, "
                                "\"use_regex\": true}",
            c->decoder ? c->decoder
                       : "{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, "
                         "\"use_regex\": true}");
    fprintf(f, "\"model\": {%s, \"vocab\": {", c->model_keys ? c->model_keys
            : "\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": \"\", "
              "\"end_of_word_suffix\": \"\", \"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": false");
    const char *sep = "";
    for (int id = 0; id < eot; id++) {
        uint8_t bytes[64];
        int len = 0, written_id = id;
        if (id < 256) {
            for (int b = 0; b < 256; b++)
                if (gpt2_id_of_byte((uint8_t)b) == id) bytes[len++] = (uint8_t)b;
        } else {
            len = snprintf((char *)bytes, sizeof bytes, "%s%s", merges[id - 256][0], merges[id - 256][1]);
        }
        alphabet_text(bytes, (size_t)len, 1, text);
        if (c->swap[0] != c->swap[1] && (id == c->swap[0] || id == c->swap[1]))
            written_id = id == c->swap[0] ? c->swap[1] : c->swap[0];
        if (c->token > 0 && id == c->token) written_id = c->token_id;
        fprintf(f, "%s\"%s\": %d", sep, c->token > 0 && id == c->token && c->token_text ? c->token_text : text,
                written_id);
        sep = ", ";
    }
    for (int k = 0; c->big && k < 65281; k++) fprintf(f, ", \"x%d\": %d", k, eot + 1 + k);
    if (!c->eot_outside) fprintf(f, ", \"<|endoftext|>\": %d", eot);
    fprintf(f, "},\n\"merges\": [");
    for (int i = 0; i < n_merges - c->drop_last_merge; i++) {
        char l[64], r[64];
        alphabet_text((const uint8_t *)merges[i][0], strlen(merges[i][0]), 1, l);
        alphabet_text((const uint8_t *)merges[i][1], strlen(merges[i][1]), 1, r);
        fputs(i ? ", " : "", f);
        if (i == 0 && c->merge0) fprintf(f, "%s", c->merge0);
        else if (c->pairs) fprintf(f, "[\"%s\", \"%s\"]", l, r);
        else fprintf(f, "\"%s %s\"", l, r);
    }
    fprintf(f, "]}}\n");
    fclose(f);
}

// The good file (each form of it) reads, with GPT-2's ids: the hand-made merges' tokens.
static void test_hand_made_reads(void **state) {
    (void)state;
    make_alphabet();
    char tmp[] = "/tmp/ropelab_hfgood_XXXXXX", path[600];
    assert_non_null(mkdtemp(tmp));
    snprintf(path, sizeof path, "%s/tokenizer.json", tmp);
    static const char SEQUENCE[] = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\", "
                                   "\"add_prefix_space\": false, \"trim_offsets\": false}]}";
    const Refusal forms[] = {
        {.name = "as written"}, {.name = "merges as pairs", .pairs = 1}, {.name = "a Sequence", .pre_tokenizer = SEQUENCE},
        {.name = "no post-processor", .post_processor = "null"},
        {.name = "<|endoftext|> only added", .eot_outside = 1},
    };
    for (size_t k = 0; k < sizeof forms / sizeof *forms; k++) {
        Refusal c = forms[k];
        write_refusal_file(&c, path);
        Tokenizer t;
        if (tokenizer_read(&t, path, err, sizeof err) != 0) fail_msg("%s: %s", forms[k].name, err);
        assert_int_equal(t.vocab_size, EOT + 1);
        assert_int_equal(t.byte_id['!'], 0);          // GPT-2's order
        assert_int_equal(t.byte_id[' '], 188 + ' ');  // the 68 others after the 188 that stand for themselves
        uint32_t ids[16];
        size_t n = bpe_encode(&t, (const uint8_t *)"the band", 8, ids);
        assert_int_equal(n, 4);   // "the", " ", "b", "and": " the" needs a space before "the"
        assert_int_equal(ids[0], 257);
        assert_int_equal(ids[1], (uint32_t)gpt2_id_of_byte(' '));
        assert_int_equal(ids[2], (uint32_t)gpt2_id_of_byte('b'));
        assert_int_equal(ids[3], 260);
        n = bpe_encode(&t, (const uint8_t *)"a the", 5, ids);
        assert_int_equal(n, 2);
        assert_int_equal(ids[1], 258);
        bpe_free(&t);
    }
    run_shell("rm -rf '%s'", tmp);
}

static const char *const LATER[][2] = {{"a", "bc"}, {"b", "c"}};   // merge 0 joins merge 1's token

static const Refusal REFUSALS[] = {
    {.name = "malformed JSON", .raw = "{\"model\": {\"type\": \"BPE\",", .want = "not JSON (malformed at byte"},
    {.name = "a NUL in a string", .raw = "{\"model\": {\"vocab\": {\"a\\u0000b\": 0}}}", .want = "holds \\u0000"},
    {.name = "a file past the bound", .sparse = (64 << 20) + 1, .want = "67108865 bytes, more than the 64 MiB"},
    {.name = "not an object", .raw = "[1, 2]", .want = "not a JSON object"},
    {.name = "encoder.json alone", .raw = "{\"!\": 0, \"<|endoftext|>\": 1}", .want = "has no key \"model\""},
    {.name = "an unknown key", .extra = "\"fancy\": 1, ", .want = "fancy: not a key of tokenizer.json"},
    {.name = "truncation", .truncation = "{\"max_length\": 512}", .want = "truncation: not null"},
    {.name = "a normalizer", .normalizer = "{\"type\": \"NFC\"}", .want = "normalizer: NFC is not read"},
    {.name = "SentencePiece's Unigram", .model_keys = "\"type\": \"Unigram\"", .want = "model.type: Unigram is not read"},
    {.name = "WordPiece", .model_keys = "\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\"",
     .want = "model.type: WordPiece is not read"},
    {.name = "byte fallback", .model_keys = "\"type\": \"BPE\", \"byte_fallback\": true",
     .want = "model.byte_fallback: true"},
    {.name = "an unknown token", .model_keys = "\"type\": \"BPE\", \"unk_token\": \"<unk>\"",
     .want = "model.unk_token: not null"},
    {.name = "a subword prefix", .model_keys = "\"type\": \"BPE\", \"continuing_subword_prefix\": \"##\"",
     .want = "model.continuing_subword_prefix: not empty"},
    {.name = "dropout", .model_keys = "\"type\": \"BPE\", \"dropout\": 0.1", .want = "model.dropout: not null"},
    {.name = "ignore_merges", .model_keys = "\"type\": \"BPE\", \"ignore_merges\": true",
     .want = "model.ignore_merges: true"},
    {.name = "an unknown model key", .model_keys = "\"type\": \"BPE\", \"scores\": []",
     .want = "model.scores: not a key"},
    {.name = "Metaspace", .pre_tokenizer = "{\"type\": \"Metaspace\", \"replacement\": \"_\"}",
     .want = "pre_tokenizer: Metaspace is not read"},
    {.name = "a prefix space", .pre_tokenizer = "{\"type\": \"ByteLevel\", \"add_prefix_space\": true}",
     .want = "pre_tokenizer.add_prefix_space: true"},
    {.name = "no regex", .pre_tokenizer = "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}",
     .want = "pre_tokenizer.use_regex: false"},
    {.name = "a Sequence of two", .pre_tokenizer = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
     "\"Digits\"}, {\"type\": \"ByteLevel\"}]}", .want = "pre_tokenizer.pretokenizers: not a list of one"},
    {.name = "no pre-tokenizer", .pre_tokenizer = "null", .want = "pre_tokenizer: null"},
    {.name = "another decoder", .decoder = "{\"type\": \"Metaspace\"}", .want = "decoder: Metaspace is not read"},
    {.name = "another post-processor", .post_processor = "{\"type\": \"BertProcessing\", \"sep\": [\"[SEP]\", 1]}",
     .want = "post_processor: BertProcessing is not read"},
    {.name = "another template", .post_processor = "{\"type\": \"TemplateProcessing\", \"single\": []}",
     .want = "post_processor: TemplateProcessing is not read"},
    {.name = "a second special token", .added_tokens = "[{\"id\": 262, \"content\": \"<|endoftext|>\", \"special\": "
     "true}, {\"id\": 263, \"content\": \"<|pad|>\", \"special\": true}]", .want = "added_tokens: 2 tokens"},
    {.name = "another end-of-text name", .added_tokens = "[{\"id\": 262, \"content\": \"</s>\", \"special\": true}]",
     .want = "added_tokens[0].content: not <|endoftext|>"},
    {.name = "not special", .added_tokens = "[{\"id\": 262, \"content\": \"<|endoftext|>\", \"special\": false}]",
     .want = "added_tokens[0].special: false"},
    {.name = "end-of-text not last", .added_tokens = "[{\"id\": 3, \"content\": \"<|endoftext|>\", \"special\": true}]",
     .want = "added_tokens[0].id: <|endoftext|> is id 3, not the last id 262 of 263 tokens"},
    {.name = "a vocabulary past 65,536", .big = 1, .want = "model.vocab: more than 65536 tokens"},
    {.name = "a token outside the alphabet", .token = 258, .token_id = 258, .token_text = "\\u4e2d",
     .want = "token \"\xe4\xb8\xad\" (id 258) is not text of GPT-2's byte alphabet: U+4E2D names no byte"},
    {.name = "a token not UTF-8", .token = 258, .token_id = 258, .token_text = "\xff",
     .want = "token \"\\xff\" (id 258) is not UTF-8"},
    {.name = "an id given twice", .token = 5, .token_id = 6, .want = "model.vocab: id 6 is given to two tokens"},
    {.name = "an id out of range", .token = 5, .token_id = 99999, .want = "its id is not a whole number in 0..262"},
    {.name = "a merge's token among the bytes", .swap = {5, 256},
     .want = "token \"th\" has id 5 and 2 bytes: the vocabulary is not in merge order"},
    {.name = "a merge's token at another id", .swap = {256, 257},
     .want = "model.merges[0]: \"t\" \"h\" makes \"th\", id 257, not id 256: the vocabulary is not in merge order"},
    {.name = "a merge's token missing", .token = 261, .token_id = 261, .token_text = "cb",
     .want = "model.merges[5]: \"b\" \"c\" makes \"bc\", which is not in the vocabulary"},
    {.name = "a merge of unknown tokens", .merge0 = "\"t hh\"",
     .want = "model.merges[0]: \"hh\" is not a token of the vocabulary"},
    {.name = "a merge of later tokens", .merges = LATER, .n_merges = 2,
     .want = "model.merges: merge 0 refers to id 257, beyond the 256 ids defined before it"},
    {.name = "a merge not two tokens", .merge0 = "\"th\"", .want = "model.merges[0]: \"th\" is not two tokens"},
    {.name = "a merge neither form", .merge0 = "42", .want = "model.merges[0]: neither"},
    {.name = "a merge too few", .drop_last_merge = 1,
     .want = "model.merges: 5 merges, but a vocabulary of 263 tokens in merge order"},
};

static void test_refusal(void **state) {
    const Refusal *c = *state;
    make_alphabet();
    char tmp[] = "/tmp/ropelab_hfbad_XXXXXX", path[600];
    assert_non_null(mkdtemp(tmp));
    snprintf(path, sizeof path, "%s/tokenizer.json", tmp);
    write_refusal_file(c, path);
    Tokenizer t;
    err[0] = 0;
    const char *paths[2] = {path, tmp};   // the file, and the directory holding it
    for (int k = 0; k < 2; k++) {
        assert_int_equal(tokenizer_read(&t, paths[k], err, sizeof err), -1);
        if (strncmp(err, path, strlen(path)) != 0 || err[strlen(path)] != ':' || !strstr(err, c->want) ||
            strchr(err, '\n'))
            fail_msg("%s: the message \"%s\" should be one line naming %s and saying \"%s\"", c->name, err, path,
                     c->want);
    }
    print_message("%s: %s\n", c->name, err + strlen(path) + 2);
    run_shell("rm -rf '%s'", tmp);
}

// GPT-2's pair, and the directories: each refusal.
static void test_gpt2_pair_refusals(void **state) {
    (void)state;
    make_alphabet();
    char tmp[] = "/tmp/ropelab_hfpair_XXXXXX", path[700];
    assert_non_null(mkdtemp(tmp));
    char *corpus = make_corpus(50);
    uint8_t order[256];
    shuffled(order, 5);
    Vocab v;
    vocab_from_training(&v, order, corpus, 300);
    assert_int_equal(v.n_merges, 43);   // the messages below count them
    Tokenizer t;
    struct { const char *shell, *want; } cases[] = {
        {"", "holds no tokenizer.json, nor GPT-2's encoder.json (or vocab.json) with vocab.bpe (or merges.txt)"},
        {"rm '%s/vocab.bpe'", "holds no tokenizer.json, nor GPT-2's encoder.json"},
        {"cp '%1$s/encoder.json' '%1$s/vocab.json'", "holds both encoder.json and vocab.json"},
        {"sed -i 's/, \"<|endoftext|>\": 299//' '%s/encoder.json'", "encoder.json: holds no <|endoftext|>"},
        {"sed -i 's/\"<|endoftext|>\": 299/\"<|endoftext|>\": 7/' '%s/encoder.json'",
         "encoder.json: <|endoftext|> is id 7, not the last id 299"},
        {"sed -i 1d '%s/vocab.bpe'", "vocab.bpe: line 1: not \"#version: 0.2\""},
        {"sed -i '$d' '%s/vocab.bpe'", "vocab.bpe: 42 merges, but a vocabulary of 300 tokens"},
        {"sed -i '2s/.*/ab/' '%s/vocab.bpe'", "vocab.bpe: line 2: \"ab\" is not two tokens parted by one space"},
        {"sed -i '2s/$/ x/' '%s/vocab.bpe'", "is not two tokens parted by one space"},
        {"printf '{\"!\": 0, \"<|endoftext|>\": 1}' > '%s/encoder.json'",
         "encoder.json: 2 tokens, fewer than the 256 bytes"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        snprintf(path, sizeof path, "%s/%zu", tmp, k);
        assert_int_equal(mkdir(path, 0700), 0);
        if (k > 0) write_gpt2_pair(&v, path, "encoder.json", "vocab.bpe");
        if (k > 0) {
            char cmd[800];
            snprintf(cmd, sizeof cmd, cases[k].shell, path, path);
            assert_int_equal(run_shell("%s", cmd), 0);
        }
        assert_int_equal(tokenizer_read(&t, path, err, sizeof err), -1);
        if (!strstr(err, cases[k].want) || strncmp(err, path, strlen(path)) != 0)
            fail_msg("case %zu: \"%s\" should name %s and say \"%s\"", k, err, path, cases[k].want);
        print_message("%s\n", err + strlen(tmp));
    }
    // the pair's first file given alone is not a tokenizer.json
    snprintf(path, sizeof path, "%s/1/encoder.json", tmp);
    assert_int_equal(tokenizer_read(&t, path, err, sizeof err), -1);
    assert_non_null(strstr(err, "has no key \"model\": not a tokenizer.json (GPT-2's encoder.json is read with its "
                               "vocab.bpe: give the directory holding both)"));
    vocab_free(&v);
    free(corpus);
    run_shell("rm -rf '%s'", tmp);
}

int main(void) {
    enum { N = sizeof REFUSALS / sizeof *REFUSALS };
    struct CMUnitTest tests[6 + N] = {
        cmocka_unit_test(test_alphabet_both_ways), cmocka_unit_test(test_hand_made_reads),
        cmocka_unit_test(test_gpt2_pair_shuffled), cmocka_unit_test(test_prepare_gpt2_pair),
        cmocka_unit_test(test_export_read_back), cmocka_unit_test(test_gpt2_pair_refusals),
    };
    for (int k = 0; k < N; k++)
        tests[6 + k] = (struct CMUnitTest){.name = REFUSALS[k].name, .test_func = test_refusal,
                                           .initial_state = (void *)&REFUSALS[k]};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
