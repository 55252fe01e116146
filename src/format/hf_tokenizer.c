// hf_tokenizer.c: tokenizer.json written and read, GPT-2's encoder.json +
// vocab.bpe read, and tokenizer_read (see hf_tokenizer.h).
//
// Both readers end in one builder (build): the vocabulary as texts by id and
// the merges as pairs of texts, each text GPT-2's alphabet for its bytes.
// It checks that the vocabulary is in merge order, which is what makes the
// file's ids ropelab's: ids 0..255 single bytes (any order: byte_id), id 256
// + i the bytes of merge i's left token then its right one, the last id the
// end-of-text token; then bpe_from_merges checks the merges as for any
// tokenizer file (earlier ids only, no pair twice, tokens of at most
// BPE_MAX_PIECE bytes).
#include "format/hf_tokenizer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs.h"
#include "data/hashmap.h"
#include "format/bpe_gpt2.h"

// ---------------------------------------------------------------- writing

static cJSON *byte_level(int add_prefix_space, int trim_offsets) {
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "ByteLevel");
    cJSON_AddBoolToObject(b, "add_prefix_space", add_prefix_space);
    cJSON_AddBoolToObject(b, "trim_offsets", trim_offsets);
    cJSON_AddTrueToObject(b, "use_regex");
    return b;
}

static cJSON *eot_token(const char *text, int id, int with_id) {
    cJSON *t = cJSON_CreateObject();
    if (with_id) cJSON_AddNumberToObject(t, "id", id);
    cJSON_AddStringToObject(t, "content", text);
    cJSON_AddFalseToObject(t, "single_word");
    cJSON_AddFalseToObject(t, "lstrip");
    cJSON_AddFalseToObject(t, "rstrip");
    cJSON_AddFalseToObject(t, "normalized");
    cJSON_AddTrueToObject(t, "special");
    return t;
}

// The post-processor: the end-of-text token (id eot) before every text, as
// ./sample starts a sample and the GGUF's add_bos_token says; the reader
// takes exactly this one.
static cJSON *template_processing(int eot) {
    const char *name = BPE_EOT_TEXT;
    cJSON *post = cJSON_CreateObject();
    cJSON_AddStringToObject(post, "type", "TemplateProcessing");
    cJSON *single = cJSON_AddArrayToObject(post, "single");
    cJSON *bos = cJSON_CreateObject(), *seq = cJSON_CreateObject(), *x;
    x = cJSON_AddObjectToObject(bos, "SpecialToken");
    cJSON_AddStringToObject(x, "id", name);
    cJSON_AddNumberToObject(x, "type_id", 0);
    x = cJSON_AddObjectToObject(seq, "Sequence");
    cJSON_AddStringToObject(x, "id", "A");
    cJSON_AddNumberToObject(x, "type_id", 0);
    cJSON_AddItemToArray(single, bos);
    cJSON_AddItemToArray(single, seq);
    cJSON *pair = cJSON_AddArrayToObject(post, "pair");
    cJSON_AddItemToArray(pair, cJSON_Duplicate(bos, 1));
    cJSON_AddItemToArray(pair, cJSON_Duplicate(seq, 1));
    x = cJSON_CreateObject();
    cJSON *xs = cJSON_AddObjectToObject(x, "Sequence");
    cJSON_AddStringToObject(xs, "id", "B");
    cJSON_AddNumberToObject(xs, "type_id", 1);
    cJSON_AddItemToArray(pair, x);
    cJSON *specials = cJSON_AddObjectToObject(post, "special_tokens"), *sp = cJSON_AddObjectToObject(specials, name);
    cJSON_AddStringToObject(sp, "id", name);
    cJSON_AddItemToObject(sp, "ids", cJSON_CreateIntArray((const int[]){eot}, 1));
    cJSON_AddItemToObject(sp, "tokens", cJSON_CreateStringArray(&name, 1));
    return post;
}

// tokenizer.json: byte-level BPE in the tokenizers library's form. The vocabulary
// and merges are the GGUF's (bpe_gguf: GPT-2's alphabet, merges "LEFT RIGHT" in
// rank order); the pre-tokenizer is the one of the GGUF's tokenizer.ggml.pre.
static cJSON *tokenizer_json(const BpeGguf *g, int V, int M, const char *pre, char *err, size_t errlen) {
    if (strcmp(pre, "gpt-2") != 0) {
        snprintf(err, errlen, "no Hugging Face pre-tokenizer is written for tokenizer.ggml.pre = %s", pre);
        return NULL;
    }
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "version", "1.0");
    cJSON_AddNullToObject(t, "truncation");
    cJSON_AddNullToObject(t, "padding");
    cJSON *added = cJSON_AddArrayToObject(t, "added_tokens");
    cJSON_AddItemToArray(added, eot_token(g->tokens[V - 1], V - 1, 1));
    cJSON_AddNullToObject(t, "normalizer");
    cJSON_AddItemToObject(t, "pre_tokenizer", byte_level(0, 1));   // GPT-2's regex, no prefix space
    cJSON_AddItemToObject(t, "post_processor", template_processing(V - 1));
    cJSON_AddItemToObject(t, "decoder", byte_level(1, 1));
    cJSON *model = cJSON_AddObjectToObject(t, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddStringToObject(model, "continuing_subword_prefix", "");
    cJSON_AddStringToObject(model, "end_of_word_suffix", "");
    cJSON_AddFalseToObject(model, "fuse_unk");
    cJSON_AddFalseToObject(model, "byte_fallback");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (int id = 0; id < V; id++) cJSON_AddNumberToObject(vocab, g->tokens[id], id);
    cJSON_AddItemToObject(model, "merges", cJSON_CreateStringArray((const char *const *)g->merges, M));
    return t;
}

int hf_tokenizer_json(const Tokenizer *tok, cJSON **out, char *err, size_t errlen) {
    *out = NULL;
    BpeGguf vocab;
    if (bpe_gguf(tok, &vocab, err, errlen)) return -2;
    const char *pre = "";
    for (int k = 0; k < BPE_GGUF_KV; k++)
        if (strcmp(vocab.kv[k].key, "tokenizer.ggml.pre") == 0) pre = vocab.kv[k].str;
    if (vocab.n_duplicates > 0) {   // a JSON vocabulary maps each text to one id
        snprintf(err, errlen, "the tokenizer has %d tokens whose bytes another token has too: tokenizer.json's "
                 "vocabulary (text -> id) cannot hold them", vocab.n_duplicates);
        bpe_gguf_free(&vocab);
        return -1;
    }
    *out = tokenizer_json(&vocab, tok->vocab_size, tok->n_merges, pre, err, errlen);
    bpe_gguf_free(&vocab);
    return *out ? 0 : -1;
}

cJSON *hf_tokenizer_config_json(const Tokenizer *tok, int model_max_length) {
    const char *eot = BPE_EOT_TEXT;
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "tokenizer_class", "PreTrainedTokenizerFast");
    cJSON_AddStringToObject(c, "bos_token", eot);
    cJSON_AddStringToObject(c, "eos_token", eot);
    cJSON_AddNullToObject(c, "unk_token");
    cJSON_AddTrueToObject(c, "add_bos_token");
    cJSON_AddFalseToObject(c, "add_eos_token");
    cJSON_AddFalseToObject(c, "clean_up_tokenization_spaces");
    cJSON_AddNumberToObject(c, "model_max_length", model_max_length);
    cJSON *decoder = cJSON_AddObjectToObject(c, "added_tokens_decoder");
    char id[16];
    snprintf(id, sizeof id, "%d", tok->eot_id);
    cJSON_AddItemToObject(decoder, id, eot_token(eot, tok->eot_id, 0));
    return c;
}

// ---------------------------------------------------------------- reading: files

typedef struct {
    const char *path;   // the file a message names
    char *err;
    size_t errlen;
} Where;

static int fail(const Where *w, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(w->err, w->errlen, "%s: %s", w->path, msg);
    return -1;
}

// The whole file, NUL-terminated, at most HF_TOKENIZER_MAX_BYTES (checked
// before it is read). NULL with a message.
static char *read_text(const Where *w, size_t *len) {
    long long size;
    FILE *f = fopen_regular_file(w->path, &size, w->err, w->errlen);
    if (!f) return NULL;
    if (size > HF_TOKENIZER_MAX_BYTES) {
        fclose(f);
        fail(w, "%lld bytes, more than the %d MiB of the largest tokenizer file read (hf_tokenizer.h)", size,
             HF_TOKENIZER_MAX_BYTES >> 20);
        return NULL;
    }
    char *text = malloc((size_t)size + 1);
    size_t got = text ? fread(text, 1, (size_t)size, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!text || got != (size_t)size || bad) {
        free(text);
        fail(w, text ? "read error" : "out of memory for %lld bytes", size);
        return NULL;
    }
    text[size] = 0;
    *len = (size_t)size;
    return text;
}

// The JSON of a file, or NULL with a message. cJSON's strings end at a NUL,
// so a \u0000 escape (which no text of GPT-2's alphabet has: byte 0 is
// U+0100) would cut a token short unseen: it is refused first.
static cJSON *read_json(const Where *w) {
    size_t len;
    char *text = read_text(w, &len);
    if (!text) return NULL;
    for (const char *p = text; (p = strstr(p, "\\u0000")) != NULL; p++) {
        const char *q = p;   // the backslashes before: an odd run escapes this one ("\\u0000" is text)
        while (q > text && q[-1] == '\\') q--;
        if ((p - q) % 2 == 0) {
            fail(w, "a string holds \\u0000 (at byte %td), which no token of GPT-2's byte alphabet has", p - text);
            free(text);
            return NULL;
        }
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);   // nothing but space after the value
    if (!root) fail(w, "not JSON (malformed at byte %td)", end ? end - text : (ptrdiff_t)0);
    free(text);
    return root;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// dir/name into out when that file exists: 1, else 0.
static int found_in(const char *dir, const char *name, char out[4096]) {
    if ((size_t)snprintf(out, 4096, "%s/%s", dir, name) >= 4096) return 0;
    return file_exists(out);
}

int tokenizer_files(const char *path, char files[TOKENIZER_MAX_FILES][4096], char *err, size_t errlen) {
    if (!is_dir(path)) {
        if (strlen(path) >= 4096) { snprintf(err, errlen, "%.200s...: path too long", path); return -1; }
        snprintf(files[0], 4096, "%s", path);
        return 1;
    }
    if (found_in(path, "tokenizer.json", files[0])) return 1;
    // GPT-2's pair, each file under OpenAI's name or Hugging Face's
    static const char *const NAMES[2][2] = {{"encoder.json", "vocab.json"}, {"vocab.bpe", "merges.txt"}};
    for (int k = 0; k < 2; k++) {
        char other[4096];
        int a = found_in(path, NAMES[k][0], files[k]), b = found_in(path, NAMES[k][1], other);
        if (a && b) {
            snprintf(err, errlen, "%s: holds both %s and %s: which is GPT-2's %s is not guessed (give a directory "
                     "with one of them)", path, NAMES[k][0], NAMES[k][1], k == 0 ? "vocabulary" : "merge list");
            return -1;
        }
        if (b) memcpy(files[k], other, sizeof other);
        if (!a && !b) {
            snprintf(err, errlen, "%s: holds no tokenizer.json, nor GPT-2's encoder.json (or vocab.json) with "
                     "vocab.bpe (or merges.txt)", path);
            return -1;
        }
    }
    return 2;
}

int tokenizer_read(Tokenizer *tok, const char *path, char *err, size_t errlen) {
    memset(tok, 0, sizeof *tok);
    char files[TOKENIZER_MAX_FILES][4096];
    int n = tokenizer_files(path, files, err, errlen);
    if (n < 0) return -1;
    if (n == 2) return hf_tokenizer_read_gpt2(tok, files[0], files[1], err, errlen);
    // a tokenizer.bin by its magic; any other file is read as tokenizer.json
    char head[64] = {0};
    long long size;
    FILE *f = fopen_regular_file(files[0], &size, err, errlen);
    if (!f) return -1;
    size_t got = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    if (got >= 8 && memcmp(head, "RLBPETOK", 8) == 0) return bpe_load(tok, files[0], err, errlen);
    const char *first = head + strspn(head, " \t\r\n");
    if (*first != '{' && (size_t)(first - head) < got) {   // neither file (a text given by mistake, say)
        snprintf(err, errlen, "%s: bad magic (not a ropelab tokenizer.bin) and not a JSON object (not a "
                 "tokenizer.json)", files[0]);
        return -1;
    }
    return hf_tokenizer_read_json(tok, files[0], err, errlen);
}

// ---------------------------------------------------------------- reading: the builder

// What the readers hand to build: the vocabulary's texts by id (n entries,
// the last the end-of-text token's, which is not decoded) and the merges'
// texts, all GPT-2's alphabet, each with its length.
typedef struct {
    Where vocab, merges;        // the files (the same one for tokenizer.json)
    int json;                   // where a message points: tokenizer.json's keys, or encoder.json and its lines
    int n;
    const char **text;
    size_t *len;
    int n_merges;
    const char *(*merge)[2];
    size_t (*merge_len)[2];
} VocabText;

// A token's text for a message, in quotes: at most 40 characters of it,
// a byte that is not printable UTF-8 as \xNN.
static const char *shown(const char *text, size_t len, char out[200]) {
    const uint8_t *s = (const uint8_t *)text;
    size_t o = 0, i = 0;
    out[o++] = '"';
    for (int chars = 0; i < len && chars < 40; chars++) {
        int extra = s[i] >= 0xC2 && s[i] <= 0xDF ? 1 : s[i] >= 0xE0 && s[i] <= 0xEF ? 2 : s[i] >= 0xF0 && s[i] <= 0xF4 ? 3 : 0;
        int ok = s[i] >= 0x20 && s[i] != 0x7F && (s[i] < 0x80 || (extra && i + (size_t)extra < len));
        for (int k = 1; ok && k <= extra; k++) ok = (s[i + k] & 0xC0) == 0x80;
        if (!ok) { o += (size_t)snprintf(out + o, 8, "\\x%02x", s[i++]); continue; }
        memcpy(out + o, s + i, (size_t)extra + 1);
        o += (size_t)extra + 1;
        i += (size_t)extra + 1;
    }
    snprintf(out + o, 6, "%s\"", i < len ? "..." : "");
    return out;
}

// Where a message points: the vocabulary ("model.vocab: " in tokenizer.json,
// nothing more in encoder.json) and merge i ("model.merges[i]", "line i + 2").
static const char *vocab_at(const VocabText *v) { return v->json ? "model.vocab: " : ""; }
static const char *merge_at(const VocabText *v, int i, char out[40]) {
    if (i < 0) snprintf(out, 40, "%s", v->json ? "model.merges: " : "");
    else snprintf(out, 40, v->json ? "model.merges[%d]: " : "line %d: ", v->json ? i : i + 2);
    return out;
}

// Where the bytes of id are in arena (off[id], blen[id]); the map: hash of the bytes -> id.
static int find_bytes(const U64Map *map, const uint8_t *arena, const size_t *off, const int *blen, const uint8_t *b,
                      int n) {
    const uint32_t *id = u64map_get(map, hash_bytes(b, (size_t)n));
    if (!id || blen[*id] != n || memcmp(arena + off[*id], b, (size_t)n) != 0) return -1;
    return (int)*id;
}

static int build(Tokenizer *tok, const VocabText *v) {
    const Where *wv = &v->vocab, *wm = &v->merges;
    int n = v->n, rc = -1;
    char s1[200], s2[200], s3[200], at[40];
    if (v->n_merges != n - 257)
        return fail(wm, "%s%d merges, but a vocabulary of %d tokens in merge order (the 256 bytes, one token per "
                    "merge, <|endoftext|>) has %d", merge_at(v, -1, at), v->n_merges, n, n - 257);
    uint8_t *arena = malloc((size_t)n * BPE_MAX_PIECE), id_byte[256], pair[2 * BPE_MAX_PIECE];
    size_t *off = malloc((size_t)n * sizeof *off);
    int *blen = malloc((size_t)n * sizeof *blen);
    uint32_t (*merges)[2] = malloc((size_t)(v->n_merges ? v->n_merges : 1) * sizeof *merges);
    U64Map map = {0};
    if (!arena || !off || !blen || !merges || u64map_init(&map, (size_t)n) != 0) {
        fail(wv, "out of memory for %d tokens", n);
        goto done;
    }
    // Each token's bytes, the single bytes' order, and the map from bytes to id.
    size_t used = 0;
    for (int id = 0; id < n - 1; id++) {
        uint32_t bad;
        int m = bpe_gpt2_bytes(v->text[id], v->len[id], arena + used, BPE_MAX_PIECE, &bad);
        if (m < 0 && bad != 0xFFFFFFFF) {
            fail(wv, "%stoken %s (id %d) is not text of GPT-2's byte alphabet: U+%04X names no byte (a byte-level "
                 "BPE's vocabulary is)", vocab_at(v), shown(v->text[id], v->len[id], s1), id, bad);
            goto done;
        }
        if (m < 0) {
            fail(wv, "%stoken %s (id %d) is not UTF-8, or longer than the %d bytes of the longest token", vocab_at(v),
                 shown(v->text[id], v->len[id], s1), id, BPE_MAX_PIECE);
            goto done;
        }
        if ((id < 256) != (m == 1)) {
            fail(wv, "%stoken %s has id %d and %d byte%s: the vocabulary is not in merge order (ids 0..255 the 256 "
                 "single bytes, then one token per merge)", vocab_at(v), shown(v->text[id], v->len[id], s1), id, m,
                 m == 1 ? "" : "s");
            goto done;
        }
        if (id < 256) id_byte[id] = arena[used];
        off[id] = used;
        blen[id] = m;
        int inserted;
        uint32_t *first = u64map_put(&map, hash_bytes(arena + used, (size_t)m), (uint32_t)id, &inserted);
        if (!first) { fail(wv, "out of memory for %d tokens", n); goto done; }
        if (!inserted) {   // the same bytes (two texts of the alphabet never are), or a 64-bit hash collision
            fail(wv, "%stokens %s (id %u) and %s (id %d) %s", vocab_at(v),
                 shown(v->text[*first], v->len[*first], s1), *first, shown(v->text[id], v->len[id], s2), id,
                 blen[*first] == m && memcmp(arena + off[*first], arena + used, (size_t)m) == 0
                     ? "are the same bytes" : "share a 64-bit hash (not read: rename one)");
            goto done;
        }
        used += (size_t)m;
    }
    // Merge i: its two tokens, and its result the token of id 256 + i.
    for (int i = 0; i < v->n_merges; i++) {
        int m[2], ids[2];
        for (int k = 0; k < 2; k++) {
            uint32_t bad;
            m[k] = bpe_gpt2_bytes(v->merge[i][k], v->merge_len[i][k], pair + (k ? m[0] : 0), BPE_MAX_PIECE, &bad);
            ids[k] = m[k] < 0 ? -1 : find_bytes(&map, arena, off, blen, pair + (k ? m[0] : 0), m[k]);
            if (ids[k] < 0) {
                fail(wm, "%s%s is not a token of the vocabulary", merge_at(v, i, at), shown(v->merge[i][k], v->merge_len[i][k], s1));
                goto done;
            }
        }
        int want = 256 + i, got = find_bytes(&map, arena, off, blen, pair, m[0] + m[1]);
        if (got != want) {
            char made[2 * 60 + 1];
            snprintf(made, sizeof made, "%.*s%.*s", (int)(v->merge_len[i][0] < 60 ? v->merge_len[i][0] : 60),
                     v->merge[i][0], (int)(v->merge_len[i][1] < 60 ? v->merge_len[i][1] : 60), v->merge[i][1]);
            if (got < 0)
                fail(wm, "%s%s %s makes %s, which is not in the vocabulary", merge_at(v, i, at),
                     shown(v->merge[i][0], v->merge_len[i][0], s1), shown(v->merge[i][1], v->merge_len[i][1], s2),
                     shown(made, strlen(made), s3));
            else
                fail(wm, "%s%s %s makes %s, id %d, not id %d: the vocabulary is not in merge order (merge i's "
                     "token at id 256 + i)", merge_at(v, i, at), shown(v->merge[i][0], v->merge_len[i][0], s1),
                     shown(v->merge[i][1], v->merge_len[i][1], s2), shown(made, strlen(made), s3), got, want);
            goto done;
        }
        merges[i][0] = (uint32_t)ids[0];
        merges[i][1] = (uint32_t)ids[1];
    }
    char why[400];
    if (bpe_from_merges(tok, BPE_PRETOK_GPT2, id_byte, (const uint32_t (*)[2])merges, v->n_merges, why, sizeof why))
        fail(wm, "%s%s", merge_at(v, -1, at), why);
    else
        rc = 0;
done:
    u64map_free(&map);
    free(arena); free(off); free(blen); free(merges);
    return rc;
}

// ---------------------------------------------------------------- reading: tokenizer.json

static int is_null(const cJSON *x) { return !x || cJSON_IsNull(x); }

// Whether every key of object x is one of names (NULL-terminated); else the first that is not, in *unknown.
static int keys_known(const cJSON *x, const char *const *names, const char **unknown) {
    for (const cJSON *c = x->child; c; c = c->next) {
        int known = 0;
        for (const char *const *k = names; *k && !known; k++) known = strcmp(c->string, *k) == 0;
        if (!known) { *unknown = c->string; return 0; }
    }
    return 1;
}

static const char *type_of(const cJSON *x) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(x, "type");
    return cJSON_IsString(t) ? t->valuestring : cJSON_IsObject(x) ? "(no type)" : "(not an object)";
}

// A flag that must be absent or the given value (a bool), else refused naming it.
static int flag_is(const Where *w, const cJSON *x, const char *key, const char *name, int want, const char *why) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(x, name);
    if (!f || (cJSON_IsBool(f) && cJSON_IsTrue(f) == want)) return 0;
    return fail(w, "%s.%s: %s %s", key, name, cJSON_IsBool(f) ? (want ? "false" : "true") : "not a boolean", why);
}

// A ByteLevel pre-tokenizer, decoder or post-processor (key names it). As a
// pre-tokenizer: GPT-2's regex (use_regex true, the default) without a
// space put before the text (add_prefix_space false); trim_offsets moves
// only offsets. The decoder's and the post-processor's flags change no id.
static int byte_level_ok(const Where *w, const cJSON *x, const char *key, int pre_tokenizer) {
    static const char *const KEYS[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL};
    const char *unknown;
    if (!keys_known(x, KEYS, &unknown)) return fail(w, "%s.%s: not a key of ByteLevel", key, unknown);
    for (int k = 1; k < 4; k++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(x, KEYS[k]);
        if (f && !cJSON_IsBool(f)) return fail(w, "%s.%s: not a boolean", key, KEYS[k]);
    }
    if (!pre_tokenizer) return 0;
    if (flag_is(w, x, key, "add_prefix_space", 0, "(a space put before every text is not ropelab's rule)") ||
        flag_is(w, x, key, "use_regex", 1, "(only GPT-2's regex is read as the pre-split rule)"))
        return -1;
    return 0;
}

static int pre_tokenizer_ok(const Where *w, const cJSON *p) {
    if (is_null(p)) return fail(w, "pre_tokenizer: null: a byte-level BPE's is ByteLevel (GPT-2's regex)");
    if (strcmp(type_of(p), "Sequence") == 0) {   // a Sequence of that one alone
        static const char *const KEYS[] = {"type", "pretokenizers", NULL};
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
        const char *unknown;
        if (!keys_known(p, KEYS, &unknown)) return fail(w, "pre_tokenizer.%s: not a key of Sequence", unknown);
        if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != 1)
            return fail(w, "pre_tokenizer.pretokenizers: not a list of one pre-tokenizer (only ByteLevel alone is "
                        "read)");
        p = list->child;
        if (strcmp(type_of(p), "ByteLevel") != 0)
            return fail(w, "pre_tokenizer.pretokenizers[0]: %s is not read (only ByteLevel, GPT-2's regex)", type_of(p));
        return byte_level_ok(w, p, "pre_tokenizer.pretokenizers[0]", 1);
    }
    if (strcmp(type_of(p), "ByteLevel") != 0)
        return fail(w, "pre_tokenizer: %s is not read (only ByteLevel, GPT-2's regex)", type_of(p));
    return byte_level_ok(w, p, "pre_tokenizer", 1);
}

// The model object's keys: a BPE without unknown-token, byte fallback,
// subword affixes, dropout or ignore_merges (each would change the ids).
static int model_ok(const Where *w, const cJSON *m) {
    static const char *const KEYS[] = {"type", "dropout", "unk_token", "continuing_subword_prefix",
                                       "end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges",
                                       "vocab", "merges", NULL};
    if (!cJSON_IsObject(m)) return fail(w, "model: missing, or not an object");
    const char *type = type_of(m), *unknown;
    if (strcmp(type, "BPE") != 0)
        return fail(w, "model.type: %s is not read (only byte-level BPE: SentencePiece's Unigram, WordPiece and "
                    "WordLevel are other algorithms)", type);
    if (!keys_known(m, KEYS, &unknown)) return fail(w, "model.%s: not a key of a BPE model read here", unknown);
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (!is_null(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
        return fail(w, "model.dropout: not null: BPE dropout encodes at random");
    if (!is_null(cJSON_GetObjectItemCaseSensitive(m, "unk_token")))
        return fail(w, "model.unk_token: not null: a byte-level BPE has no unknown token");
    static const char *const AFFIXES[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(m, AFFIXES[k]);
        if (!is_null(a) && !(cJSON_IsString(a) && a->valuestring[0] == 0))
            return fail(w, "model.%s: not empty (a subword affix is not byte-level BPE's)", AFFIXES[k]);
    }
    const cJSON *fuse = cJSON_GetObjectItemCaseSensitive(m, "fuse_unk");
    if (fuse && !cJSON_IsBool(fuse)) return fail(w, "model.fuse_unk: not a boolean");
    if (flag_is(w, m, "model", "byte_fallback", 0, "(byte fallback is SentencePiece's way to bytes, not read)") ||
        flag_is(w, m, "model", "ignore_merges", 0, "(a word of the vocabulary taken whole is not BPE's rule)"))
        return -1;
    return 0;
}

// added_tokens: exactly one, the special end-of-text token <|endoftext|>;
// its id into *id. Matched in a text only where Hugging Face splits added
// tokens out, which ropelab never does (docs/FORMAT.md).
static int added_tokens_ok(const Where *w, const cJSON *added, int *id) {
    static const char *const KEYS[] = {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special",
                                       NULL};
    if (!cJSON_IsArray(added) || cJSON_GetArraySize(added) != 1)
        return fail(w, "added_tokens: %d tokens: exactly one is read, the special end-of-text token %s",
                    cJSON_IsArray(added) ? cJSON_GetArraySize(added) : 0, BPE_EOT_TEXT);
    const cJSON *t = added->child, *x;
    const char *unknown;
    if (!cJSON_IsObject(t)) return fail(w, "added_tokens[0]: not an object");
    if (!keys_known(t, KEYS, &unknown)) return fail(w, "added_tokens[0].%s: not a key of an added token", unknown);
    x = cJSON_GetObjectItemCaseSensitive(t, "content");
    if (!cJSON_IsString(x) || strcmp(x->valuestring, BPE_EOT_TEXT) != 0)
        return fail(w, "added_tokens[0].content: not %s, the end-of-text token read", BPE_EOT_TEXT);
    if (flag_is(w, t, "added_tokens[0]", "special", 1, "(the end-of-text token is a special token)") ||
        flag_is(w, t, "added_tokens[0]", "single_word", 0, "(changes where it is matched in a text)") ||
        flag_is(w, t, "added_tokens[0]", "lstrip", 0, "(changes where it is matched in a text)") ||
        flag_is(w, t, "added_tokens[0]", "rstrip", 0, "(changes where it is matched in a text)"))
        return -1;
    x = cJSON_GetObjectItemCaseSensitive(t, "normalized");   // no normalizer: either way alike
    if (x && !cJSON_IsBool(x)) return fail(w, "added_tokens[0].normalized: not a boolean");
    x = cJSON_GetObjectItemCaseSensitive(t, "id");
    if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
        x->valuedouble >= BPE_MAX_VOCAB)
        return fail(w, "added_tokens[0].id: not an id below %d", BPE_MAX_VOCAB);
    *id = (int)x->valuedouble;
    return 0;
}

// post_processor: none, ByteLevel (offsets only), or exactly the
// TemplateProcessing --format hf writes (<|endoftext|> before every text).
static int post_processor_ok(const Where *w, const cJSON *p, int eot) {
    if (is_null(p)) return 0;
    if (strcmp(type_of(p), "ByteLevel") == 0) return byte_level_ok(w, p, "post_processor", 0);
    cJSON *ours = template_processing(eot);
    int same = ours && cJSON_Compare(p, ours, 1);
    cJSON_Delete(ours);
    if (!same)
        return fail(w, "post_processor: %s is not read (null, ByteLevel, or the TemplateProcessing ./export --format "
                    "hf writes: %s, id %d, before every text)", type_of(p), BPE_EOT_TEXT, eot);
    return 0;
}

// A token's id in the vocabulary object: a whole number in 0..n-1.
static int vocab_id(const cJSON *c, int n) {
    if (!cJSON_IsNumber(c) || c->valuedouble != floor(c->valuedouble) || c->valuedouble < 0 || c->valuedouble >= n)
        return -1;
    return (int)c->valuedouble;
}

// The vocabulary and merges of model into v (texts pointing into the JSON), then build.
static int read_vocab_merges(Tokenizer *tok, const Where *w, const cJSON *model, int eot) {
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    char s1[200];
    if (!cJSON_IsObject(vocab)) return fail(w, "model.vocab: missing, or not an object");
    if (!cJSON_IsArray(merges)) return fail(w, "model.merges: missing, or not a list");
    int n_vocab = 0, n_merges = 0, eot_in_vocab = -1;
    for (const cJSON *c = vocab->child; c; c = c->next) {   // counted before anything is sized from them
        if (++n_vocab > BPE_MAX_VOCAB)
            return fail(w, "model.vocab: more than %d tokens (ropelab's token files hold uint16 ids)", BPE_MAX_VOCAB);
        if (strcmp(c->string, BPE_EOT_TEXT) == 0) eot_in_vocab = n_vocab - 1;
    }
    for (const cJSON *c = merges->child; c; c = c->next)
        if (++n_merges > BPE_MAX_VOCAB) return fail(w, "model.merges: more than %d merges", BPE_MAX_VOCAB);
    // <|endoftext|> is the last id: in the vocabulary (GPT-2's, ours), or only an added token just past it
    int n = eot_in_vocab >= 0 ? n_vocab : n_vocab + 1;
    if (n > BPE_MAX_VOCAB)
        return fail(w, "model.vocab: %d tokens with %s, more than %d (ropelab's token files hold uint16 ids)", n,
                    BPE_EOT_TEXT, BPE_MAX_VOCAB);
    if (eot != n - 1)
        return fail(w, "added_tokens[0].id: %s is id %d, not the last id %d of %d tokens (ropelab's end-of-text "
                    "token is the last)", BPE_EOT_TEXT, eot, n - 1, n);
    if (n < BPE_MIN_VOCAB)
        return fail(w, "model.vocab: %d tokens, fewer than the 256 bytes and the end-of-text token", n_vocab);
    VocabText v = {.vocab = *w, .merges = *w, .json = 1, .n = n, .n_merges = n_merges};
    v.text = calloc((size_t)n, sizeof *v.text);
    v.len = calloc((size_t)n, sizeof *v.len);
    v.merge = calloc((size_t)(n_merges ? n_merges : 1), sizeof *v.merge);
    v.merge_len = calloc((size_t)(n_merges ? n_merges : 1), sizeof *v.merge_len);
    int rc = -1, i = 0;
    if (!v.text || !v.len || !v.merge || !v.merge_len) { fail(w, "out of memory for %d tokens", n); goto done; }
    for (const cJSON *c = vocab->child; c; c = c->next) {
        int id = vocab_id(c, n);
        if (id < 0) {
            fail(w, "model.vocab: token %s: its id is not a whole number in 0..%d", shown(c->string, strlen(c->string),
                 s1), n - 1);
            goto done;
        }
        if (v.text[id]) {
            fail(w, "model.vocab: id %d is given to two tokens, %s and \"%.60s\"", id,
                 shown(v.text[id], v.len[id], s1), c->string);
            goto done;
        }
        if (strcmp(c->string, BPE_EOT_TEXT) == 0) {
            if (id != eot) { fail(w, "model.vocab: %s is id %d, added_tokens says %d", BPE_EOT_TEXT, id, eot); goto done; }
        } else if (id == eot) {
            fail(w, "model.vocab: token %s has the id %d of %s", shown(c->string, strlen(c->string), s1), id,
                 BPE_EOT_TEXT);
            goto done;
        }
        v.text[id] = c->string;
        v.len[id] = strlen(c->string);
    }
    for (const cJSON *c = merges->child; c; c = c->next, i++) {   // "LEFT RIGHT", or ["LEFT", "RIGHT"]
        if (cJSON_IsString(c)) {
            const char *space = strchr(c->valuestring, ' ');
            if (!space || space == c->valuestring || !space[1] || strchr(space + 1, ' ')) {
                fail(w, "model.merges[%d]: %s is not two tokens parted by one space", i,
                     shown(c->valuestring, strlen(c->valuestring), s1));
                goto done;
            }
            v.merge[i][0] = c->valuestring;
            v.merge_len[i][0] = (size_t)(space - c->valuestring);
            v.merge[i][1] = space + 1;
            v.merge_len[i][1] = strlen(space + 1);
        } else if (cJSON_IsArray(c) && cJSON_GetArraySize(c) == 2 && cJSON_IsString(c->child) &&
                   cJSON_IsString(c->child->next)) {
            for (int k = 0; k < 2; k++) {
                v.merge[i][k] = (k ? c->child->next : c->child)->valuestring;
                v.merge_len[i][k] = strlen(v.merge[i][k]);
            }
        } else {
            fail(w, "model.merges[%d]: neither \"LEFT RIGHT\" nor [\"LEFT\", \"RIGHT\"]", i);
            goto done;
        }
    }
    v.text[eot] = BPE_EOT_TEXT;
    v.len[eot] = strlen(BPE_EOT_TEXT);
    rc = build(tok, &v);
done:
    free(v.text); free(v.len); free(v.merge); free(v.merge_len);
    return rc;
}

int hf_tokenizer_read_json(Tokenizer *tok, const char *path, char *err, size_t errlen) {
    memset(tok, 0, sizeof *tok);
    static const char *const KEYS[] = {"version", "truncation", "padding", "added_tokens", "normalizer",
                                       "pre_tokenizer", "post_processor", "decoder", "model", NULL};
    Where w = {path, err, errlen};
    cJSON *root = read_json(&w);
    if (!root) return -1;
    const char *unknown;
    int rc = -1, eot = -1;
    if (!cJSON_IsObject(root)) fail(&w, "not a JSON object (a tokenizer.json is one)");
    else if (!cJSON_GetObjectItemCaseSensitive(root, "model"))
        fail(&w, "has no key \"model\": not a tokenizer.json (GPT-2's encoder.json is read with its vocab.bpe: give "
             "the directory holding both)");
    else if (!keys_known(root, KEYS, &unknown)) fail(&w, "%s: not a key of tokenizer.json read here", unknown);
    else if (!is_null(cJSON_GetObjectItemCaseSensitive(root, "truncation")))
        fail(&w, "truncation: not null (ropelab encodes whole texts)");
    else if (!is_null(cJSON_GetObjectItemCaseSensitive(root, "padding"))) fail(&w, "padding: not null");
    else if (!is_null(cJSON_GetObjectItemCaseSensitive(root, "normalizer")))
        fail(&w, "normalizer: %s is not read (ropelab applies no normalizer: null only)",
             type_of(cJSON_GetObjectItemCaseSensitive(root, "normalizer")));
    else if (model_ok(&w, cJSON_GetObjectItemCaseSensitive(root, "model")) == 0 &&
             pre_tokenizer_ok(&w, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer")) == 0 &&
             added_tokens_ok(&w, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), &eot) == 0 &&
             post_processor_ok(&w, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), eot) == 0) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "decoder");
        if (strcmp(type_of(d), "ByteLevel") != 0)
            fail(&w, "decoder: %s is not read (ByteLevel: a token's text is its bytes in GPT-2's alphabet)",
                 is_null(d) ? "null" : type_of(d));
        else if (byte_level_ok(&w, d, "decoder", 0) == 0)
            rc = read_vocab_merges(tok, &w, cJSON_GetObjectItemCaseSensitive(root, "model"), eot);
    }
    cJSON_Delete(root);
    return rc;
}

// ---------------------------------------------------------------- reading: GPT-2's pair

// vocab.bpe (merges.txt): the line "#version: 0.2", then one merge a line,
// "LEFT RIGHT"; the file ends with a newline or not. Cut in place in text:
// the merges' texts point into it. The count, or -1 with a message.
static int merge_lines(const Where *w, char *text, VocabText *v, int max) {
    static const char HEADER[] = "#version: 0.2\n";
    char s1[200];
    if (strncmp(text, HEADER, sizeof HEADER - 1) != 0)
        return fail(w, "line 1: not \"#version: 0.2\" (GPT-2's merge list starts with it)");
    int n = 0;
    for (char *line = text + sizeof HEADER - 1; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char *space = memchr(line, ' ', len);
        if (n == max) return fail(w, "more than %d merges", max);
        if (!space || space == line || space + 1 == line + len || memchr(space + 1, ' ', len - (size_t)(space - line) - 1))
            return fail(w, "line %d: %s is not two tokens parted by one space", n + 2, shown(line, len, s1));
        if (v) {
            v->merge[n][0] = line;
            v->merge_len[n][0] = (size_t)(space - line);
            v->merge[n][1] = space + 1;
            v->merge_len[n][1] = len - (size_t)(space - line) - 1;
        }
        n++;
        line += len + (end != NULL);
    }
    return n;
}

int hf_tokenizer_read_gpt2(Tokenizer *tok, const char *vocab_path, const char *merges_path, char *err,
                           size_t errlen) {
    memset(tok, 0, sizeof *tok);
    Where wv = {vocab_path, err, errlen}, wm = {merges_path, err, errlen};
    VocabText v = {.vocab = wv, .merges = wm};
    size_t len;
    char s1[200], *text = NULL;
    int rc = -1, n_vocab = 0, eot = -1;
    cJSON *root = read_json(&wv);
    if (!root) return -1;
    if (!cJSON_IsObject(root)) { fail(&wv, "not a JSON object (GPT-2's encoder.json maps each token to its id)"); goto done; }
    for (const cJSON *c = root->child; c; c = c->next) {   // counted before anything is sized from it
        if (++n_vocab > BPE_MAX_VOCAB) {
            fail(&wv, "more than %d tokens (ropelab's token files hold uint16 ids)", BPE_MAX_VOCAB);
            goto done;
        }
        if (strcmp(c->string, BPE_EOT_TEXT) == 0) eot = vocab_id(c, BPE_MAX_VOCAB);
    }
    v.n = n_vocab;
    if (eot != v.n - 1) {
        fail(&wv, eot < 0 ? "holds no %s (GPT-2's end-of-text token, its last id)" : "%s is id %d, not the last id %d",
             BPE_EOT_TEXT, eot, v.n - 1);
        goto done;
    }
    if (v.n < BPE_MIN_VOCAB) { fail(&wv, "%d tokens, fewer than the 256 bytes and %s", v.n, BPE_EOT_TEXT); goto done; }
    if (!(text = read_text(&wm, &len))) goto done;
    if ((v.n_merges = merge_lines(&wm, text, NULL, BPE_MAX_VOCAB)) < 0) goto done;
    v.text = calloc((size_t)v.n, sizeof *v.text);
    v.len = calloc((size_t)v.n, sizeof *v.len);
    v.merge = calloc((size_t)(v.n_merges ? v.n_merges : 1), sizeof *v.merge);
    v.merge_len = calloc((size_t)(v.n_merges ? v.n_merges : 1), sizeof *v.merge_len);
    if (!v.text || !v.len || !v.merge || !v.merge_len) { fail(&wv, "out of memory for %d tokens", v.n); goto done; }
    merge_lines(&wm, text, &v, v.n_merges);
    for (const cJSON *c = root->child; c; c = c->next) {
        int id = vocab_id(c, v.n);
        if (id < 0) {
            fail(&wv, "token %s: its id is not a whole number in 0..%d", shown(c->string, strlen(c->string), s1), v.n - 1);
            goto done;
        }
        if (v.text[id]) {
            fail(&wv, "id %d is given to two tokens, %s and \"%.60s\"", id, shown(v.text[id], v.len[id], s1), c->string);
            goto done;
        }
        v.text[id] = c->string;
        v.len[id] = strlen(c->string);
    }
    rc = build(tok, &v);
done:
    free(v.text); free(v.len); free(v.merge); free(v.merge_len);
    free(text);
    cJSON_Delete(root);
    return rc;
}
