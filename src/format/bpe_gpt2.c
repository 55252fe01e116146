// bpe_gpt2.c: ropelab's byte tokens in GPT-2's byte alphabet (see bpe_gpt2.h).
#include "format/bpe_gpt2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/hashmap.h"

static int stands_for_itself(uint8_t b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

uint32_t bpe_gpt2_codepoint(uint8_t b) {
    if (stands_for_itself(b)) return b;
    uint32_t k = 0;   // the bytes before b that do not stand for themselves
    for (int c = 0; c < b; c++) k += !stands_for_itself((uint8_t)c);
    return 256 + k;
}

size_t bpe_gpt2_text(const uint8_t *bytes, size_t n, char *out) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = bpe_gpt2_codepoint(bytes[i]);
        if (cp < 0x80) out[len++] = (char)cp;
        else {   // two UTF-8 bytes: 110xxxxx 10xxxxxx (cp < 0x800)
            out[len++] = (char)(0xC0 | (cp >> 6));
            out[len++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    out[len] = 0;
    return len;
}

// The byte code point cp names, or -1: U+0100 + k is the k-th of the bytes
// that do not stand for themselves, 0x00..0x20 (k 0..32), 0x7F..0xA0 (k
// 33..66) and 0xAD (k 67).
static int byte_named(uint32_t cp) {
    if (cp < 256) return stands_for_itself((uint8_t)cp) ? (int)cp : -1;
    uint32_t k = cp - 256;
    return k <= 32 ? (int)k : k <= 66 ? 0x7F + (int)(k - 33) : k == 67 ? 0xAD : -1;
}

int bpe_gpt2_bytes(const char *text, size_t len, uint8_t *out, int cap, uint32_t *bad) {
    const uint8_t *s = (const uint8_t *)text;
    int n = 0;
    *bad = 0xFFFFFFFF;
    for (size_t i = 0; i < len; n++) {
        int extra = s[i] < 0x80 ? 0 : s[i] >= 0xC2 && s[i] <= 0xDF ? 1 : s[i] >= 0xE0 && s[i] <= 0xEF ? 2
                  : s[i] >= 0xF0 && s[i] <= 0xF4 ? 3 : -1;
        if (extra < 0 || i + (size_t)extra >= len) return -1;
        uint32_t cp = s[i] & (0x7F >> extra);
        for (int k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return -1;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        i += (size_t)extra + 1;
        static const uint32_t SHORTEST[4] = {0, 0x80, 0x800, 0x10000};   // below: an overlong form
        if (cp < SHORTEST[extra]) return -1;
        int b = byte_named(cp);
        if (b < 0) { *bad = cp; return -1; }
        if (n == cap) return -1;
        out[n] = (uint8_t)b;
    }
    return n;
}

// GGUF's token types (llama.h's llama_token_type).
enum { TOKEN_TYPE_NORMAL = 1, TOKEN_TYPE_CONTROL = 3 };
static const char EOT_TEXT[] = BPE_EOT_TEXT;

int bpe_gguf(const Tokenizer *tok, BpeGguf *g, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    int V = tok->vocab_size, M = tok->n_merges;
    size_t bytes = sizeof EOT_TEXT;
    for (int id = 0; id < V; id++) bytes += 2 * (size_t)tok->token_len[id] + 1;
    for (int i = 0; i < M; i++)
        bytes += 2 * ((size_t)tok->token_len[tok->merges[i][0]] + tok->token_len[tok->merges[i][1]]) + 2;
    g->tokens = malloc((size_t)V * sizeof *g->tokens);
    g->merges = malloc((size_t)(M ? M : 1) * sizeof *g->merges);
    g->types = malloc((size_t)V * sizeof *g->types);
    g->arena = malloc(bytes);
    if (!g->tokens || !g->merges || !g->types || !g->arena) {
        snprintf(err, errlen, "out of memory for a vocabulary of %d tokens", V);
        bpe_gguf_free(g);
        return -1;
    }
    char *p = g->arena;
    for (int id = 0; id < V; id++) {
        g->tokens[id] = p;
        g->types[id] = id == tok->eot_id ? TOKEN_TYPE_CONTROL : TOKEN_TYPE_NORMAL;
        if (id == tok->eot_id) p += sprintf(p, "%s", EOT_TEXT) + 1;
        else p += bpe_gpt2_text(tok->token_bytes[id], (size_t)tok->token_len[id], p) + 1;
    }
    for (int i = 0; i < M; i++) {
        uint32_t l = tok->merges[i][0], r = tok->merges[i][1];
        g->merges[i] = p;
        p += bpe_gpt2_text(tok->token_bytes[l], (size_t)tok->token_len[l], p);
        *p++ = ' ';
        p += bpe_gpt2_text(tok->token_bytes[r], (size_t)tok->token_len[r], p) + 1;
    }
    // Tokens with the same bytes (BPE can reach one text by two merges): counted for a warning.
    U64Map seen;
    if (u64map_init(&seen, (size_t)V) != 0) {
        snprintf(err, errlen, "out of memory for a vocabulary of %d tokens", V);
        bpe_gguf_free(g);
        return -1;
    }
    for (int id = 0; id < V - 1; id++) {
        int inserted;
        const uint8_t *b = tok->token_bytes[id];
        size_t n = (size_t)tok->token_len[id];
        uint32_t *first = u64map_put(&seen, hash_bytes(b, n), (uint32_t)id, &inserted);
        if (!first) {
            snprintf(err, errlen, "out of memory for a vocabulary of %d tokens", V);
            u64map_free(&seen);
            bpe_gguf_free(g);
            return -1;
        }
        g->n_duplicates += !inserted && (size_t)tok->token_len[*first] == n &&
                           memcmp(tok->token_bytes[*first], b, n) == 0;
    }
    u64map_free(&seen);
    static const struct { const char *key; GgufKvKind kind; } KEYS[BPE_GGUF_KV] = {
        {"tokenizer.ggml.model", GGUF_KV_STRING}, {"tokenizer.ggml.pre", GGUF_KV_STRING},
        {"tokenizer.ggml.tokens", GGUF_KV_STRINGS}, {"tokenizer.ggml.token_type", GGUF_KV_I32S},
        {"tokenizer.ggml.merges", GGUF_KV_STRINGS}, {"tokenizer.ggml.bos_token_id", GGUF_KV_U32},
        {"tokenizer.ggml.eos_token_id", GGUF_KV_U32}, {"tokenizer.ggml.add_bos_token", GGUF_KV_BOOL},
        {"tokenizer.ggml.add_eos_token", GGUF_KV_BOOL},
    };
    for (int k = 0; k < BPE_GGUF_KV; k++) {
        g->kv[k].key = KEYS[k].key;
        g->kv[k].kind = KEYS[k].kind;
    }
    g->kv[0].str = "gpt2";
    g->kv[1].str = "gpt-2";
    g->kv[2].strs = (const char *const *)g->tokens;
    g->kv[2].n = (size_t)V;
    g->kv[3].i32s = g->types;
    g->kv[3].n = (size_t)V;
    g->kv[4].strs = (const char *const *)g->merges;
    g->kv[4].n = (size_t)M;
    g->kv[5].u32 = g->kv[6].u32 = (uint32_t)tok->eot_id;
    g->kv[7].boolean = 1;
    g->kv[8].boolean = 0;
    return 0;
}

void bpe_gguf_free(BpeGguf *g) {
    free(g->tokens);
    free(g->merges);
    free(g->types);
    free(g->arena);
    memset(g, 0, sizeof *g);
}
