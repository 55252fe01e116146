// test_export.c: ./export and its parts, without llama.cpp (tests/llamacpp_check.c
// runs the files in llama.cpp itself): the GGUF container read back by a reader
// written here from the specification, GPT-2's byte alphabet, the NEOX row
// permutation against our rotation, every block's and scheme's file
// (architecture, keys, tensors), context_length (a scaled rope's s x L), and
// every refusal (one line, exit 2; a bad file exit 1; nothing written).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "format/bpe_gpt2.h"
#include "format/gguf.h"
#include "format/gguf_model.h"
#include "format/safetensors.h"
#include "format/weights_file.h"
#include "model/pos_maths.h"
#include "util_gradcheck.h"
#include "util_run.h"

// ---------------------------------------------------------------- a GGUF reader (the spec, again)
// Written from the spec, not from the writer (src/format/gguf.c), so that a wrong
// number there fails here: GGUF's value types.
enum { GT_UINT32 = 4, GT_INT32 = 5, GT_FLOAT32 = 6, GT_BOOL = 7, GT_STRING = 8, GT_ARRAY = 9 };

typedef struct {
    uint8_t *buf;
    size_t size, data_start;
    uint64_t n_tensors, n_kv;
    struct { char key[96]; uint32_t type; size_t at; } kv[64];   // at: offset of the value
    struct { char name[64]; uint32_t n_dims, type; uint64_t ne[4], offset; } t[256];
} Gguf;

static uint64_t rd64(const Gguf *g, size_t *p) { uint64_t v; memcpy(&v, g->buf + *p, 8); *p += 8; return v; }
static uint32_t rd32(const Gguf *g, size_t *p) { uint32_t v; memcpy(&v, g->buf + *p, 4); *p += 4; return v; }
static void rdstr(const Gguf *g, size_t *p, char *out, size_t cap) {
    uint64_t n = rd64(g, p);
    if (n >= cap || *p + n > g->size) { fail_msg("a string of %llu bytes at %zu", (unsigned long long)n, *p); return; }
    memcpy(out, g->buf + *p, n);
    out[n] = 0;
    *p += n;
}
// Skips a value of type `type` (arrays of strings and of 4-byte numbers, the types written).
static void skip_value(const Gguf *g, size_t *p, uint32_t type) {
    char s[4096];
    if (type == GT_STRING) { uint64_t n; memcpy(&n, g->buf + *p, 8); *p += 8 + n; return; }
    if (type == GT_BOOL) { *p += 1; return; }
    if (type == GT_ARRAY) {
        uint32_t et = rd32(g, p);
        uint64_t n = rd64(g, p);
        for (uint64_t i = 0; i < n; i++) {
            if (et == GT_STRING) rdstr(g, p, s, sizeof s);
            else { assert_true(et == GT_UINT32 || et == GT_INT32 || et == GT_FLOAT32); *p += 4; }
        }
        return;
    }
    assert_true(type == GT_UINT32 || type == GT_INT32 || type == GT_FLOAT32);
    *p += 4;
}

static void gguf_read(Gguf *g, const char *path) {
    memset(g, 0, sizeof *g);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    g->size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    g->buf = malloc(g->size);
    assert_non_null(g->buf);
    assert_int_equal(fread(g->buf, 1, g->size, f), g->size);
    fclose(f);
    size_t p = 0;
    assert_memory_equal(g->buf, "GGUF", 4);
    p = 4;
    assert_int_equal(rd32(g, &p), 3);
    g->n_tensors = rd64(g, &p);
    g->n_kv = rd64(g, &p);
    assert_true(g->n_kv <= 64 && g->n_tensors <= 256);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        rdstr(g, &p, g->kv[i].key, sizeof g->kv[i].key);
        g->kv[i].type = rd32(g, &p);
        g->kv[i].at = p;
        skip_value(g, &p, g->kv[i].type);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        rdstr(g, &p, g->t[i].name, sizeof g->t[i].name);
        g->t[i].n_dims = rd32(g, &p);
        for (uint32_t d = 0; d < g->t[i].n_dims; d++) g->t[i].ne[d] = rd64(g, &p);
        g->t[i].type = rd32(g, &p);
        g->t[i].offset = rd64(g, &p);
        assert_int_equal(g->t[i].type, 0);              // F32
        assert_int_equal(g->t[i].offset % 32, 0);        // aligned
    }
    g->data_start = (p + 31) / 32 * 32;
    for (size_t i = p; i < g->data_start; i++) assert_int_equal(g->buf[i], 0);   // zero padding
    for (uint64_t i = 0; i < g->n_tensors; i++) {   // inside the file
        uint64_t n = 4;
        for (uint32_t d = 0; d < g->t[i].n_dims; d++) n *= g->t[i].ne[d];
        assert_true(g->data_start + g->t[i].offset + n <= g->size);
    }
}

static int has_kv(const Gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return 1;
    return 0;
}
static int kv_find(const Gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return (int)i;
    fail_msg("key %s missing", key);
    return -1;
}
// The value of key, which must have GGUF value type `type`: where its bytes start.
static const uint8_t *kv_value(const Gguf *g, const char *key, uint32_t type) {
    int i = kv_find(g, key);
    assert_int_equal(g->kv[i].type, type);
    return g->buf + g->kv[i].at;
}
static uint32_t kv_u32(const Gguf *g, const char *key) { uint32_t v; memcpy(&v, kv_value(g, key, GT_UINT32), 4); return v; }
static float kv_f32(const Gguf *g, const char *key) { float v; memcpy(&v, kv_value(g, key, GT_FLOAT32), 4); return v; }
static int kv_bool(const Gguf *g, const char *key) { return *kv_value(g, key, GT_BOOL); }
static void kv_str(const Gguf *g, const char *key, char *out, size_t cap) {
    size_t p = (size_t)(kv_value(g, key, GT_STRING) - g->buf);
    rdstr(g, &p, out, cap);
}
// Element count of an array key, and the i-th string of a string array.
static uint64_t kv_array_n(const Gguf *g, const char *key) {
    uint64_t n;
    memcpy(&n, kv_value(g, key, GT_ARRAY) + 4, 8);
    return n;
}
static void kv_array_str(const Gguf *g, const char *key, uint64_t k, char *out, size_t cap) {
    size_t p = (size_t)(kv_value(g, key, GT_ARRAY) - g->buf);
    assert_int_equal(rd32(g, &p), GT_STRING);
    uint64_t n = rd64(g, &p);
    assert_true(k < n);
    for (uint64_t j = 0; j <= k; j++) rdstr(g, &p, out, cap);
}
static const float *tensor(const Gguf *g, const char *name, uint64_t ne0, uint64_t ne1) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->t[i].name, name) == 0) {
            assert_int_equal(g->t[i].ne[0], ne0);
            assert_int_equal(g->t[i].n_dims, ne1 ? 2 : 1);
            if (ne1) assert_int_equal(g->t[i].ne[1], ne1);
            return (const float *)(g->buf + g->data_start + g->t[i].offset);
        }
    fail_msg("tensor %s missing", name);
    return NULL;
}
static int has_tensor(const Gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++) if (strcmp(g->t[i].name, name) == 0) return 1;
    return 0;
}

// ---------------------------------------------------------------- the container, the alphabet, the permutation

static void test_gguf_layout(void **state) {
    (void)state;
    char path[512], err[512], s[64];
    snprintf(path, sizeof path, "%s/t.gguf", dir);
    static const char *const strs[] = {"a", "Ġb c"};
    static const int32_t ints[] = {1, -3, 7};
    GgufKv kv[] = {
        {.key = "general.architecture", .kind = GGUF_KV_STRING, .str = "gpt2"},
        {.key = "x.u", .kind = GGUF_KV_U32, .u32 = 4000000000u},
        {.key = "x.f", .kind = GGUF_KV_F32, .f32 = 1e-5f},
        {.key = "x.b", .kind = GGUF_KV_BOOL, .boolean = 1},
        {.key = "x.ss", .kind = GGUF_KV_STRINGS, .strs = strs, .n = 2},
        {.key = "x.is", .kind = GGUF_KV_I32S, .i32s = ints, .n = 3},
    };
    float a[3] = {1, 2, 3}, b[6] = {4, 5, 6, 7, 8, 9};
    GgufTensor t[2] = {{.name = "one", .n_dims = 1, .ne = {3}, .data = a},
                       {.name = "two", .n_dims = 2, .ne = {3, 2}, .data = b}};
    assert_int_equal(gguf_write(path, kv, 6, t, 2, ATOMIC_REPLACE, NULL, err, sizeof err), 0);
    Gguf g;
    gguf_read(&g, path);
    assert_int_equal(g.n_kv, 6);
    assert_int_equal(g.n_tensors, 2);
    kv_str(&g, "general.architecture", s, sizeof s);
    assert_string_equal(s, "gpt2");
    assert_int_equal(kv_u32(&g, "x.u"), 4000000000u);
    assert_true(kv_f32(&g, "x.f") == 1e-5f);
    assert_int_equal(kv_bool(&g, "x.b"), 1);
    assert_int_equal(kv_array_n(&g, "x.ss"), 2);
    kv_array_str(&g, "x.ss", 1, s, sizeof s);
    assert_string_equal(s, "Ġb c");
    assert_int_equal(kv_array_n(&g, "x.is"), 3);
    assert_memory_equal(tensor(&g, "one", 3, 0), a, sizeof a);
    assert_memory_equal(tensor(&g, "two", 3, 2), b, sizeof b);
    assert_int_equal(g.t[1].offset, 32);   // 12 bytes, padded to 32
    assert_int_equal(g.size, g.data_start + 32 + 32);
    free(g.buf);
    // a failed write names the file and leaves what was there
    snprintf(path, sizeof path, "%s/no/such/dir/t.gguf", dir);
    assert_int_equal(gguf_write(path, kv, 6, t, 2, ATOMIC_REPLACE, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, path));
    t[0].n_dims = 5;
    snprintf(path, sizeof path, "%s/t.gguf", dir);
    assert_int_equal(gguf_write(path, kv, 6, t, 2, ATOMIC_REPLACE, NULL, err, sizeof err), -1);
    gguf_read(&g, path);   // the earlier file, whole
    assert_int_equal(g.n_tensors, 2);
    free(g.buf);
}

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the 68 others
// (0x00-0x20, 0x7F-0xA0, 0xAD) for U+0100.. in order: ' ' is U+0120 "Ġ", '\n' U+010A "Ċ".
static void test_gpt2_alphabet(void **state) {
    (void)state;
    int seen[0x200] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t cp = bpe_gpt2_codepoint((uint8_t)b);
        assert_true(cp > 0x20 && cp < 0x200 && cp != 0x7F);
        assert_int_equal(seen[cp]++, 0);
    }
    assert_int_equal(bpe_gpt2_codepoint(' '), 0x120);
    assert_int_equal(bpe_gpt2_codepoint('\n'), 0x10A);
    assert_int_equal(bpe_gpt2_codepoint(0), 0x100);
    assert_int_equal(bpe_gpt2_codepoint(0x7F), 0x121);
    assert_int_equal(bpe_gpt2_codepoint(0xA0), 0x142);
    assert_int_equal(bpe_gpt2_codepoint(0xAD), 0x143);
    assert_int_equal(bpe_gpt2_codepoint('A'), 'A');
    assert_int_equal(bpe_gpt2_codepoint(0xE9), 0xE9);
    char out[32];
    assert_int_equal(bpe_gpt2_text((const uint8_t *)"Hi \n", 4, out), 6);
    assert_string_equal(out, "Hi\xC4\xA0\xC4\x8A");   // "HiĠĊ"
}

// Rotating a head's permuted rows NEOX's way (pair i with i + R/2) gives our
// rotation's q.k (pairs 2i, 2i+1), for every R and positions; v and dims >= R stay.
static void test_neox_permutation(void **state) {
    (void)state;
    enum { H = 2, D = 8, C = H * D, NPOS = 16 };
    for (int R = 2; R <= D; R += 2) {
        int hit[3 * C] = {0};
        for (int r = 0; r < 3 * C; r++) {
            int src = gguf_neox_source_row(r, C, D, R);
            assert_true(src >= 0 && src < 3 * C && src / D == r / D);   // within its head (and q, k or v)
            hit[src]++;
            if (r >= 2 * C || r % D >= R) assert_int_equal(src, r);
        }
        for (int r = 0; r < 3 * C; r++) assert_int_equal(hit[r], 1);   // a permutation
        GPTConfig cfg = {.n_layer = 1, .n_head = H, .d_model = C, .vocab_size = 4, .block_size = NPOS, .pos = POS_ROPE};
        gc_config_defaults(&cfg);
        cfg.rope_dims = R;
        float cs[NPOS * D / 2], sn[NPOS * D / 2], q[D], k[D], qn[D], kn[D];
        rope_build_tables(cs, sn, NPOS, &cfg);
        gc_fill_normal(q, D, 0, 1, 3 + R);
        gc_fill_normal(k, D, 0, 1, 4 + R);
        for (int d = 0; d < D; d++) { qn[d] = q[gguf_neox_source_row(d, C, D, R)]; kn[d] = k[gguf_neox_source_row(C + d, C, D, R) - C]; }
        int m = 11, n = 4;
        rope_rotate(q, cs + m * (R / 2), sn + m * (R / 2), R);
        rope_rotate(k, cs + n * (R / 2), sn + n * (R / 2), R);
        for (int i = 0; i < R / 2; i++) {   // NEOX: (x_i, x_{i+R/2}) by the same angle
            float c = cs[m * (R / 2) + i], s = sn[m * (R / 2) + i], a = qn[i], b = qn[i + R / 2];
            qn[i] = a * c - b * s;
            qn[i + R / 2] = a * s + b * c;
            c = cs[n * (R / 2) + i], s = sn[n * (R / 2) + i], a = kn[i], b = kn[i + R / 2];
            kn[i] = a * c - b * s;
            kn[i + R / 2] = a * s + b * c;
        }
        double ours = 0, neox = 0;
        for (int d = 0; d < D; d++) { ours += (double)q[d] * k[d]; neox += (double)qn[d] * kn[d]; }
        assert_true(fabs(ours - neox) < 1e-5);
        if (R >= 4) {   // and without the permutation the products differ (the test can fail)
            float q0[D], k0[D];
            gc_fill_normal(q0, D, 0, 1, 3 + R);
            gc_fill_normal(k0, D, 0, 1, 4 + R);
            for (int i = 0; i < R / 2; i++) {
                float c = cs[m * (R / 2) + i], s = sn[m * (R / 2) + i], a = q0[i], b = q0[i + R / 2];
                q0[i] = a * c - b * s;
                q0[i + R / 2] = a * s + b * c;
                c = cs[n * (R / 2) + i], s = sn[n * (R / 2) + i], a = k0[i], b = k0[i + R / 2];
                k0[i] = a * c - b * s;
                k0[i + R / 2] = a * s + b * c;
            }
            double wrong = 0;
            for (int d = 0; d < D; d++) wrong += (double)q0[d] * k0[d];
            assert_true(fabs(ours - wrong) > 1e-3);
        }
    }
}

// ---------------------------------------------------------------- ./export end to end

static const char *const SCHEMES[] = {"rope", "learned", "sinusoidal", "t5", "alibi", "none"};

static void weights_of(const char *pos, char *path, size_t n) { snprintf(path, n, "%s/%s/model.safetensors", dir, pos); }

static int group_setup(void **state) {
    (void)state;
    if (make_data_dir("export") != 0) return -1;
    for (int i = 0; i < 6; i++)   // each scheme, two steps: weights that are not the initial ones
        if (run("./train configs/tiny.ini %s --pos=%s --rope_dims=4 --steps=2 --eval_every=0 --quiet --threads=1 "
                "--out_dir=%s/%s", data_args, SCHEMES[i], dir, SCHEMES[i]) != 0) {
            fprintf(stderr, "./train failed: %s\n", out);
            return -1;
        }
    // block=llama: rope over the whole head (llama.cpp's llama), alibi (refact),
    // partial rotary (chatglm), and two it refuses: a position table, no positions
    static const char *const LLAMA[][2] = {
        {"llama", "--pos=rope"}, {"llama-alibi", "--pos=alibi"}, {"llama-rope8", "--pos=rope --rope_dims=8"},
        {"llama-learned", "--pos=learned"}, {"llama-none", "--pos=none"},
    };
    for (size_t i = 0; i < sizeof LLAMA / sizeof LLAMA[0]; i++)
        if (run("./train configs/tiny.ini %s --block=llama %s --steps=2 --eval_every=0 --quiet --threads=1 "
                "--out_dir=%s/%s", data_args, LLAMA[i][1], dir, LLAMA[i][0]) != 0) {
            fprintf(stderr, "./train failed: %s\n", out);
            return -1;
        }
    // --format hf: trained long enough (60 steps) that a wrong layout moves the loss
    // far past float32 rounding, which two steps from the initial weights would not
    static const char *const HF[][2] = {{"hf-learned", "--pos=learned"}, {"hf-llama", "--block=llama --pos=rope"}};
    for (size_t i = 0; i < sizeof HF / sizeof HF[0]; i++)
        if (run("./train configs/tiny.ini %s %s --steps=60 --eval_every=0 --quiet --threads=1 --out_dir=%s/%s",
                data_args, HF[i][1], dir, HF[i][0]) != 0) {
            fprintf(stderr, "./train failed: %s\n", out);
            return -1;
        }
    return 0;
}

static void export_ok(const char *pos, const char *extra, char *gguf, size_t n) {
    char w[512];
    weights_of(pos, w, sizeof w);
    snprintf(gguf, n, "%s/%s.gguf", dir, pos);
    if (run("./export --weights %s --tokenizer %s/data/tokenizer.bin --out %s --overwrite %s", w, dir, gguf, extra) != 0)
        fail_msg("./export %s: %s", pos, out);
}

// Every exportable scheme: its architecture, keys, tokenizer and tensors.
static void test_export_schemes(void **state) {
    (void)state;
    static const char *const ARCH[] = {"gptneox", "gpt2", "gpt2", NULL, "mpt", "gpt2"};
    char gguf[600], key[128], s[256], err[256];
    for (int i = 0; i < 6; i++) {
        if (!ARCH[i]) continue;
        export_ok(SCHEMES[i], "", gguf, sizeof gguf);
        char w[512];
        weights_of(SCHEMES[i], w, sizeof w);
        GPT *m;
        assert_int_equal(gpt_load(&m, w, 0, err, sizeof err), 0);
        const GPTConfig *cfg = gpt_config(m);
        int C = cfg->d_model, V = cfg->vocab_size, T = cfg->block_size, D = C / cfg->n_head, R = cfg->rope_dims;
        const float *params = gpt_params(m);
        Gguf g;
        gguf_read(&g, gguf);
        kv_str(&g, "general.architecture", s, sizeof s);
        assert_string_equal(s, ARCH[i]);
#define ARCH_KEY(k) (snprintf(key, sizeof key, "%s.%s", ARCH[i], k), key)
        assert_int_equal(kv_u32(&g, ARCH_KEY("context_length")), T);
        assert_int_equal(kv_u32(&g, ARCH_KEY("embedding_length")), C);
        assert_int_equal(kv_u32(&g, ARCH_KEY("block_count")), cfg->n_layer);
        assert_int_equal(kv_u32(&g, ARCH_KEY("feed_forward_length")), 4 * C);
        assert_int_equal(kv_u32(&g, ARCH_KEY("attention.head_count")), cfg->n_head);
        assert_true(kv_f32(&g, ARCH_KEY("attention.layer_norm_epsilon")) == 1e-5f);
        // the tokenizer: V tokens in GPT-2's alphabet, the merges in order, eot a control token
        kv_str(&g, "tokenizer.ggml.model", s, sizeof s);
        assert_string_equal(s, "gpt2");
        kv_str(&g, "tokenizer.ggml.pre", s, sizeof s);
        assert_string_equal(s, "gpt-2");
        assert_int_equal(kv_array_n(&g, "tokenizer.ggml.tokens"), V);
        assert_int_equal(kv_array_n(&g, "tokenizer.ggml.token_type"), V);
        assert_int_equal(kv_array_n(&g, "tokenizer.ggml.merges"), V - 257);
        assert_int_equal(kv_u32(&g, "tokenizer.ggml.eos_token_id"), V - 1);
        assert_int_equal(kv_u32(&g, "tokenizer.ggml.bos_token_id"), V - 1);
        assert_int_equal(kv_bool(&g, "tokenizer.ggml.add_bos_token"), 1);
        kv_array_str(&g, "tokenizer.ggml.tokens", ' ', s, sizeof s);
        assert_string_equal(s, "\xC4\xA0");   // the space byte is "Ġ"
        kv_array_str(&g, "tokenizer.ggml.tokens", (uint64_t)V - 1, s, sizeof s);
        assert_string_equal(s, "<|endoftext|>");
        // the tensors: ours, under llama.cpp's names, ne = {in, out}
        const ParamEntry *wte = gpt_find_param(m, "wte"), *fc = gpt_find_param(m, "h.1.mlp.c_proj.weight");
        assert_memory_equal(tensor(&g, "token_embd.weight", C, V), params + wte->offset, (size_t)V * C * 4);
        assert_memory_equal(tensor(&g, "blk.1.ffn_down.weight", 4 * C, C), params + fc->offset, (size_t)4 * C * C * 4);
        const ParamEntry *attn = gpt_find_param(m, "h.0.attn.c_attn.weight");
        const float *qkv = tensor(&g, "blk.0.attn_qkv.weight", C, 3 * C);
        for (int r = 0; r < 3 * C; r++) {
            int src = cfg->pos == POS_ROPE ? gguf_neox_source_row(r, C, D, R) : r;
            assert_memory_equal(qkv + (size_t)r * C, params + attn->offset + (size_t)src * C, (size_t)C * 4);
        }
        if (cfg->pos == POS_ROPE) {
            assert_int_equal(kv_u32(&g, "gptneox.rope.dimension_count"), R);
            assert_int_equal(kv_bool(&g, "gptneox.use_parallel_residual"), 0);
            assert_true(kv_f32(&g, "gptneox.rope.freq_base") == cfg->rope_base);
            assert_memory_equal(tensor(&g, "output.weight", C, V), params + wte->offset, (size_t)V * C * 4);
        } else {
            assert_false(has_tensor(&g, "output.weight"));   // gpt2 and mpt tie the head themselves
        }
        if (cfg->pos == POS_ALIBI) {
            assert_true(kv_f32(&g, "mpt.attention.max_alibi_bias") == 8.0f);
            assert_false(has_tensor(&g, "position_embd.weight"));
        }
        if (!strcmp(ARCH[i], "gpt2")) {   // the position table: wpe, sinusoidal's PE, or zeros
            const float *pe = tensor(&g, "position_embd.weight", C, T);
            float *want = calloc((size_t)T * C, sizeof *want);
            assert_non_null(want);
            if (cfg->pos == POS_LEARNED) memcpy(want, params + gpt_find_param(m, "wpe")->offset, (size_t)T * C * 4);
            if (cfg->pos == POS_SINUSOIDAL) sinusoidal_build_table(want, T, C, cfg->sinusoidal_scale);
            assert_memory_equal(pe, want, (size_t)T * C * 4);
            free(want);
        }
#undef ARCH_KEY
        free(g.buf);
        gpt_free(m);
    }
    // sinusoidal and none may have a longer table: llama.cpp runs as many positions
    export_ok("none", "--context-length 100", gguf, sizeof gguf);
    Gguf g;
    gguf_read(&g, gguf);
    assert_int_equal(kv_u32(&g, "gpt2.context_length"), 100);
    tensor(&g, "position_embd.weight", 32, 100);
    free(g.buf);
}

// block=llama: rope as llama.cpp's llama, alibi as its refact: our fused matrices
// cut by rows (c_attn into q, k, v; c_fc into gate, then up), nothing permuted, no
// bias, no output.weight (llama.cpp ties the head to token_embd itself). Partial
// rotary as chatglm: c_attn and c_fc whole, output.weight = wte.
static void test_export_llama(void **state) {
    (void)state;
    static const char *const RUNS[] = {"llama", "llama-alibi", "llama-rope8"};
    static const char *const ARCH[] = {"llama", "refact", "chatglm"};
    char gguf[600], key[128], s[256], err[256], w[512];
    for (int i = 0; i < 3; i++) {
        int chatglm = i == 2;
        export_ok(RUNS[i], "", gguf, sizeof gguf);
        assert_non_null(strstr(out, "(block=llama, pos="));
        weights_of(RUNS[i], w, sizeof w);
        GPT *m;
        assert_int_equal(gpt_load(&m, w, 0, err, sizeof err), 0);
        const GPTConfig *cfg = gpt_config(m);
        int C = cfg->d_model, V = cfg->vocab_size, T = cfg->block_size, L = cfg->n_layer, D = C / cfg->n_head;
        int F = gpt_mlp_hidden(cfg);
        assert_int_equal(F, 88);   // tiny.ini's C = 32: 8C/3 rounded up to 8k, not 4C
        const float *params = gpt_params(m);
        Gguf g;
        gguf_read(&g, gguf);
        kv_str(&g, "general.architecture", s, sizeof s);
        assert_string_equal(s, ARCH[i]);
#define ARCH_KEY(k) (snprintf(key, sizeof key, "%s.%s", ARCH[i], k), key)
        assert_int_equal(kv_u32(&g, ARCH_KEY("context_length")), T);
        assert_int_equal(kv_u32(&g, ARCH_KEY("embedding_length")), C);
        assert_int_equal(kv_u32(&g, ARCH_KEY("block_count")), L);
        assert_int_equal(kv_u32(&g, ARCH_KEY("feed_forward_length")), F);
        assert_int_equal(kv_u32(&g, ARCH_KEY("attention.head_count")), cfg->n_head);
        assert_true(kv_f32(&g, ARCH_KEY("attention.layer_norm_rms_epsilon")) == 1e-5f);
        assert_false(has_kv(&g, ARCH_KEY("attention.layer_norm_epsilon")));
        if (cfg->pos == POS_ROPE) {
            assert_int_equal(kv_u32(&g, ARCH_KEY("rope.dimension_count")), chatglm ? 8 : D);   // R
            assert_true(kv_f32(&g, ARCH_KEY("rope.freq_base")) == cfg->rope_base);
            kv_str(&g, ARCH_KEY("rope.scaling.type"), s, sizeof s);
            assert_string_equal(s, "none");
            assert_false(has_kv(&g, ARCH_KEY("use_parallel_residual")));
        } else {
            assert_true(kv_f32(&g, ARCH_KEY("attention.max_alibi_bias")) == 8.0f);
            assert_false(has_kv(&g, ARCH_KEY("rope.dimension_count")));
        }
#undef ARCH_KEY
        kv_str(&g, "tokenizer.ggml.model", s, sizeof s);
        assert_string_equal(s, "gpt2");
        assert_int_equal(kv_array_n(&g, "tokenizer.ggml.tokens"), V);
        // the tensors: 2 + 9 per layer (chatglm: 3 + 6), each ours (or a block of its rows) as it is
        assert_int_equal(g.n_tensors, chatglm ? 3 + 6 * L : 2 + 9 * L);
#define P(name) (params + gpt_find_param(m, name)->offset)
        assert_memory_equal(tensor(&g, "token_embd.weight", C, V), P("wte"), (size_t)V * C * 4);
        assert_memory_equal(tensor(&g, "output_norm.weight", C, 0), P("ln_f.weight"), (size_t)C * 4);
        for (int l = 0; l < L; l++) {
            char ours[96], theirs[96];
#define OURS(x) (snprintf(ours, sizeof ours, "h.%d.%s", l, x), P(ours))
#define THEIRS(x) (snprintf(theirs, sizeof theirs, "blk.%d.%s", l, x), theirs)
            assert_memory_equal(tensor(&g, THEIRS("attn_norm.weight"), C, 0), OURS("ln_1.weight"), (size_t)C * 4);
            const float *qkv = OURS("attn.c_attn.weight"), *fc = OURS("mlp.c_fc.weight");
            if (chatglm) {   // fused, as ours: [q; k; v] and [gate; up]
                assert_memory_equal(tensor(&g, THEIRS("attn_qkv.weight"), C, 3 * C), qkv, (size_t)3 * C * C * 4);
                assert_memory_equal(tensor(&g, THEIRS("ffn_up.weight"), C, 2 * F), fc, (size_t)2 * F * C * 4);
                assert_false(has_tensor(&g, THEIRS("attn_q.weight")));
                assert_false(has_tensor(&g, THEIRS("ffn_gate.weight")));
                assert_memory_equal(tensor(&g, THEIRS("ffn_down.weight"), F, C), OURS("mlp.c_proj.weight"),
                                    (size_t)C * F * 4);
                continue;
            }
            assert_memory_equal(tensor(&g, THEIRS("attn_q.weight"), C, C), qkv, (size_t)C * C * 4);
            assert_memory_equal(tensor(&g, THEIRS("attn_k.weight"), C, C), qkv + (size_t)C * C, (size_t)C * C * 4);
            assert_memory_equal(tensor(&g, THEIRS("attn_v.weight"), C, C), qkv + (size_t)2 * C * C, (size_t)C * C * 4);
            assert_memory_equal(tensor(&g, THEIRS("attn_output.weight"), C, C), OURS("attn.c_proj.weight"),
                                (size_t)C * C * 4);
            assert_memory_equal(tensor(&g, THEIRS("ffn_norm.weight"), C, 0), OURS("ln_2.weight"), (size_t)C * 4);
            // fc = [gate; up]: silu's input first
            assert_memory_equal(tensor(&g, THEIRS("ffn_gate.weight"), C, F), fc, (size_t)F * C * 4);
            assert_memory_equal(tensor(&g, THEIRS("ffn_up.weight"), C, F), fc + (size_t)F * C, (size_t)F * C * 4);
            assert_memory_equal(tensor(&g, THEIRS("ffn_down.weight"), F, C), OURS("mlp.c_proj.weight"),
                                (size_t)C * F * 4);
            assert_false(has_tensor(&g, THEIRS("attn_qkv.weight")));
#undef OURS
#undef THEIRS
        }
        if (chatglm) assert_memory_equal(tensor(&g, "output.weight", C, V), P("wte"), (size_t)V * C * 4);
        else assert_false(has_tensor(&g, "output.weight"));
#undef P
        assert_false(has_tensor(&g, "position_embd.weight"));
        for (uint64_t t = 0; t < g.n_tensors; t++) assert_null(strstr(g.t[t].name, ".bias"));
        free(g.buf);
        gpt_free(m);
    }
}

// A rope model with llama.cpp's own scalings: yarn and linear as rope.scaling.*,
// ntk as the scaled base.
static void test_export_rope_scalings(void **state) {
    (void)state;
    char gguf[600], s[64];
    Gguf g;
    export_ok("rope", "--rope_scaling=yarn --rope_scaling_factor=4", gguf, sizeof gguf);
    gguf_read(&g, gguf);
    kv_str(&g, "gptneox.rope.scaling.type", s, sizeof s);
    assert_string_equal(s, "yarn");
    assert_true(kv_f32(&g, "gptneox.rope.scaling.factor") == 4.0f);
    assert_int_equal(kv_u32(&g, "gptneox.rope.scaling.original_context_length"), 32);   // tiny.ini's block_size
    free(g.buf);
    export_ok("rope", "--rope_scaling=yarn --rope_scaling_factor=4 --rope_original_length=16", gguf, sizeof gguf);
    gguf_read(&g, gguf);
    assert_int_equal(kv_u32(&g, "gptneox.rope.scaling.original_context_length"), 16);
    free(g.buf);
    export_ok("rope", "--rope_scaling=linear --rope_scaling_factor=2", gguf, sizeof gguf);
    gguf_read(&g, gguf);
    kv_str(&g, "gptneox.rope.scaling.type", s, sizeof s);
    assert_string_equal(s, "linear");
    free(g.buf);
    export_ok("rope", "--rope_scaling=ntk --rope_scaling_factor=4", gguf, sizeof gguf);
    gguf_read(&g, gguf);
    kv_str(&g, "gptneox.rope.scaling.type", s, sizeof s);
    assert_string_equal(s, "none");
    assert_true(fabsf(kv_f32(&g, "gptneox.rope.freq_base") - (float)(10000.0 * pow(4.0, 4.0 / 2.0))) < 1.0f);   // R = 4
    free(g.buf);
}

// A scaled rope's context_length is s x L (Hugging Face's max_position_embeddings
// of a scaled model), L = rope_original_length or block_size, said on stderr;
// --context-length N writes N; unscaled, block_size. Both blocks.
static void test_export_context_length(void **state) {
    (void)state;
    static const struct { const char *model, *arch, *flags; unsigned want; const char *note; } CASES[] = {
        {"rope", "gptneox", "", 32, NULL},   // tiny.ini's block_size
        {"rope", "gptneox", "--rope_scaling=yarn --rope_scaling_factor=4", 128,
         "export: note: context_length = 128, rope_scaling_factor 4 x the original length 32 (Hugging Face's "
         "convention; --context-length N writes N)\n"},
        {"rope", "gptneox", "--rope_scaling=yarn --rope_scaling_factor=4 --rope_original_length=16", 64,
         "context_length = 64, rope_scaling_factor 4 x the original length 16"},
        {"rope", "gptneox", "--rope_scaling=linear --rope_scaling_factor=2.5", 80,
         "context_length = 80, rope_scaling_factor 2.5 x the original length 32"},
        {"rope", "gptneox", "--rope_scaling=ntk --rope_scaling_factor=4", 128,
         "context_length = 128, rope_scaling_factor 4 x the original length 32"},
        {"rope", "gptneox", "--rope_scaling=yarn --rope_scaling_factor=4 --context-length 100", 100, NULL},
        {"llama", "llama", "--rope_scaling=yarn --rope_scaling_factor=8", 256,
         "context_length = 256, rope_scaling_factor 8 x the original length 32"},
    };
    char gguf[600], key[64];
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        export_ok(CASES[i].model, CASES[i].flags, gguf, sizeof gguf);
        if (CASES[i].note ? !strstr(out, CASES[i].note) : strstr(out, "note: context_length") != NULL)
            fail_msg("./export %s: want %s%s on stderr:\n%s", CASES[i].flags, CASES[i].note ? "" : "no note",
                     CASES[i].note ? CASES[i].note : "", out);
        Gguf g;
        gguf_read(&g, gguf);
        snprintf(key, sizeof key, "%s.context_length", CASES[i].arch);
        assert_int_equal(kv_u32(&g, key), CASES[i].want);
        if (strstr(CASES[i].flags, "yarn")) {   // the maths' own length stays L
            snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", CASES[i].arch);
            assert_int_equal(kv_u32(&g, key), strstr(CASES[i].flags, "original_length=16") ? 16 : 32);
        }
        free(g.buf);
    }
}

// ---------------------------------------------------------------- ./export --format hf

static void expect_one_line_exit2(const char *cmd_flags, const char *want);

static cJSON *read_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    if (!j) fail_msg("%s: not JSON", path);
    return j;
}
static double json_num(const cJSON *o, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(x)) fail_msg("%s: not a number", key);
    return x->valuedouble;
}
static const char *json_str(const cJSON *o, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(x)) fail_msg("%s: not a string", key);
    return x->valuestring;
}

// Tensor name of an open safetensors file: F32 of shape [s0] or [s0, s1]; its data.
static const float *st_tensor(const StFile *f, const char *name, int64_t s0, int64_t s1) {
    const StTensor *t = st_find(f, name);
    if (!t) fail_msg("%s missing", name);
    assert_int_equal(t->dtype, ST_F32);
    assert_int_equal(t->ndim, s1 ? 2 : 1);
    if (t->shape[0] != s0 || (s1 && t->shape[1] != s1))
        fail_msg("%s: shape [%lld, %lld], want [%lld, %lld]", name, (long long)t->shape[0],
                 (long long)(s1 ? t->shape[1] : 0), (long long)s0, (long long)s1);
    return t->data;
}

// Runs cmd and returns the number after "key=" in its output (NAN if absent).
static double number_after(const char *cmd, const char *key) {
    if (run("%s", cmd) != 0) fail_msg("%s failed:\n%s", cmd, out);
    const char *at = strstr(out, key);
    return at ? atof(at + strlen(key)) : NAN;
}

static int have_torch(void) { return system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

// The loss of ./eval on the test corpus and that of scripts/torch/hf_eval.py (Hugging
// Face's class, in float64) on the export in hf_dir, on the same windows.
static void hf_losses(const char *weights, const char *hf_dir, double *c_eval, double *hf) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "./eval --weights %s --data %s/data/val.bin --batch-size 4 --batches 2 --threads 1",
             weights, dir);
    *c_eval = number_after(cmd, " loss=");
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 scripts/torch/hf_eval.py --dir %s --data %s/data/val.bin "
             "--batch-size 4 --batches 2", hf_dir, dir);
    *hf = number_after(cmd, "hf_eval: loss=");
}

// block=gpt2 with learned positions as GPT2LMHeadModel (every linear weight
// transposed), block=llama with rope as LlamaForCausalLM (c_attn and c_fc cut,
// q and k permuted to rotate-half pairs); config, weights and tokenizer checked
// here, and the loss of Hugging Face's forward (scripts/torch/hf_eval.py, in
// float64) on the files against ./eval's, where python3-torch is installed.
static void test_export_hf(void **state) {
    (void)state;
    static const char *const RUNS[] = {"hf-learned", "hf-llama"};
    char w[512], hf_dir[600], path[800], err[256];
    for (int i = 0; i < 2; i++) {
        int llama = i == 1;
        weights_of(RUNS[i], w, sizeof w);
        snprintf(hf_dir, sizeof hf_dir, "%s/%s-out", dir, RUNS[i]);   // made by ./export
        if (run("./export --weights %s --tokenizer %s/data/tokenizer.bin --format hf --out %s", w, dir, hf_dir) != 0)
            fail_msg("./export --format hf: %s", out);
        assert_non_null(strstr(out, llama ? "Hugging Face LlamaForCausalLM" : "Hugging Face GPT2LMHeadModel"));
        GPT *m;
        assert_int_equal(gpt_load(&m, w, 0, err, sizeof err), 0);
        const GPTConfig *cfg = gpt_config(m);
        int C = cfg->d_model, V = cfg->vocab_size, T = cfg->block_size, L = cfg->n_layer, H = cfg->n_head;
        int D = C / H, F = gpt_mlp_hidden(cfg);
        const float *params = gpt_params(m);
#define P(name) (params + gpt_find_param(m, name)->offset)
        // config.json
        snprintf(path, sizeof path, "%s/config.json", hf_dir);
        cJSON *c = read_json(path);
        assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "architectures"), 0)->valuestring,
                            llama ? "LlamaForCausalLM" : "GPT2LMHeadModel");
        assert_string_equal(json_str(c, "model_type"), llama ? "llama" : "gpt2");
        assert_int_equal(json_num(c, "vocab_size"), V);
        assert_int_equal(json_num(c, "bos_token_id"), V - 1);
        assert_int_equal(json_num(c, "eos_token_id"), V - 1);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(c, "tie_word_embeddings")));
        if (llama) {
            assert_int_equal(json_num(c, "hidden_size"), C);
            assert_int_equal(json_num(c, "intermediate_size"), F);
            assert_int_equal(json_num(c, "num_hidden_layers"), L);
            assert_int_equal(json_num(c, "num_attention_heads"), H);
            assert_int_equal(json_num(c, "num_key_value_heads"), H);
            assert_int_equal(json_num(c, "max_position_embeddings"), T);
            assert_true(json_num(c, "rms_norm_eps") == 1e-5);
            assert_true(json_num(c, "rope_theta") == cfg->rope_base);
            assert_string_equal(json_str(c, "hidden_act"), "silu");
            assert_true(cJSON_IsNull(cJSON_GetObjectItem(c, "rope_scaling")));
        } else {
            assert_int_equal(json_num(c, "n_embd"), C);
            assert_int_equal(json_num(c, "n_layer"), L);
            assert_int_equal(json_num(c, "n_head"), H);
            assert_int_equal(json_num(c, "n_positions"), T);
            assert_true(json_num(c, "layer_norm_epsilon") == 1e-5);
            assert_string_equal(json_str(c, "activation_function"), "gelu_new");
        }
        cJSON_Delete(c);
        // model.safetensors: every tensor under its name, in its layout, nothing else
        StFile *f;
        snprintf(path, sizeof path, "%s/model.safetensors", hf_dir);
        assert_int_equal(st_open(&f, path, err, sizeof err), 0);
        assert_string_equal(st_meta(f, "format"), "pt");
        assert_int_equal(st_num_tensors(f), llama ? 2 + 9 * L : 4 + 12 * L);
        assert_null(st_find(f, "lm_head.weight"));   // tied
        char name[128], ours[96];
#define THEIRS(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
#define OURS(l, x) (snprintf(ours, sizeof ours, "h.%d.%s", l, x), P(ours))
        if (llama) {
            assert_memory_equal(st_tensor(f, "model.embed_tokens.weight", V, C), P("wte"), (size_t)V * C * 4);
            assert_memory_equal(st_tensor(f, "model.norm.weight", C, 0), P("ln_f.weight"), (size_t)C * 4);
            for (int l = 0; l < L; l++) {
                const float *qkv = OURS(l, "attn.c_attn.weight"), *fc = OURS(l, "mlp.c_fc.weight");
                // rotate-half: within head h, row j < D/2 is our row 2j, row D/2 + j our row 2j + 1
                for (int part = 0; part < 2; part++) {
                    const float *hf = st_tensor(f, THEIRS("model.layers.%d.self_attn.%s_proj.weight", l,
                                                          part ? "k" : "q"), C, C);
                    for (int h = 0; h < H; h++)
                        for (int j = 0; j < D; j++) {
                            int src = part * C + h * D + (j < D / 2 ? 2 * j : 2 * (j - D / 2) + 1);
                            assert_memory_equal(hf + (size_t)(h * D + j) * C, qkv + (size_t)src * C, (size_t)C * 4);
                        }
                }
                assert_memory_equal(st_tensor(f, THEIRS("model.layers.%d.self_attn.v_proj.weight", l), C, C),
                                    qkv + (size_t)2 * C * C, (size_t)C * C * 4);
                assert_memory_equal(st_tensor(f, THEIRS("model.layers.%d.self_attn.o_proj.weight", l), C, C),
                                    OURS(l, "attn.c_proj.weight"), (size_t)C * C * 4);
                assert_memory_equal(st_tensor(f, THEIRS("model.layers.%d.input_layernorm.weight", l), C, 0),
                                    OURS(l, "ln_1.weight"), (size_t)C * 4);
                assert_memory_equal(st_tensor(f, THEIRS("model.layers.%d.post_attention_layernorm.weight", l), C, 0),
                                    OURS(l, "ln_2.weight"), (size_t)C * 4);
                assert_memory_equal(st_tensor(f, THEIRS("model.layers.%d.mlp.gate_proj.weight", l), F, C), fc,
                                    (size_t)F * C * 4);
                assert_memory_equal(st_tensor(f, THEIRS("model.layers.%d.mlp.up_proj.weight", l), F, C),
                                    fc + (size_t)F * C, (size_t)F * C * 4);
                assert_memory_equal(st_tensor(f, THEIRS("model.layers.%d.mlp.down_proj.weight", l), C, F),
                                    OURS(l, "mlp.c_proj.weight"), (size_t)C * F * 4);
            }
        } else {
            assert_memory_equal(st_tensor(f, "transformer.wte.weight", V, C), P("wte"), (size_t)V * C * 4);
            assert_memory_equal(st_tensor(f, "transformer.wpe.weight", T, C), P("wpe"), (size_t)T * C * 4);
            assert_memory_equal(st_tensor(f, "transformer.ln_f.bias", C, 0), P("ln_f.bias"), (size_t)C * 4);
            static const struct { const char *name; int rows, cols; } MATS[] = {   // rows, cols in units of C
                {"attn.c_attn", 3, 1}, {"attn.c_proj", 1, 1}, {"mlp.c_fc", 4, 1}, {"mlp.c_proj", 1, 4}};
            for (int l = 0; l < L; l++)
                for (int k = 0; k < 4; k++) {   // Conv1D: [in, out], ours transposed
                    int rows = MATS[k].rows * C, cols = MATS[k].cols * C;
                    char ours_w[64];
                    snprintf(ours_w, sizeof ours_w, "%s.weight", MATS[k].name);
                    const float *o = OURS(l, ours_w);
                    const float *hf = st_tensor(f, THEIRS("transformer.h.%d.%s.weight", l, MATS[k].name), cols, rows);
                    for (int r = 0; r < rows; r++)
                        for (int cc = 0; cc < cols; cc++)
                            if (hf[(size_t)cc * rows + r] != o[(size_t)r * cols + cc])
                                fail_msg("%s [%d, %d] is not ours transposed", name, cc, r);
                    snprintf(ours_w, sizeof ours_w, "%s.bias", MATS[k].name);
                    assert_memory_equal(st_tensor(f, THEIRS("transformer.h.%d.%s.bias", l, MATS[k].name), rows, 0),
                                        OURS(l, ours_w), (size_t)rows * 4);
                }
        }
#undef THEIRS
#undef OURS
#undef P
        st_close(f);
        // tokenizer.json: the GGUF's vocabulary and merges, byte-level BPE
        BpeGguf vocab;
        Tokenizer tok;
        snprintf(path, sizeof path, "%s/data/tokenizer.bin", dir);
        assert_int_equal(bpe_load(&tok, path, err, sizeof err), 0);
        assert_int_equal(bpe_gguf(&tok, &vocab, err, sizeof err), 0);
        snprintf(path, sizeof path, "%s/tokenizer.json", hf_dir);
        cJSON *tj = read_json(path), *model = cJSON_GetObjectItem(tj, "model");
        assert_string_equal(json_str(model, "type"), "BPE");
        cJSON *vj = cJSON_GetObjectItem(model, "vocab"), *mj = cJSON_GetObjectItem(model, "merges");
        assert_int_equal(cJSON_GetArraySize(vj), V);
        int id = 0;
        for (const cJSON *x = vj->child; x; x = x->next, id++) {   // in id order, each the GGUF's text
            assert_string_equal(x->string, vocab.tokens[id]);
            assert_int_equal(x->valueint, id);
        }
        assert_int_equal(json_num(vj, "\xC4\xA0"), ' ');   // "Ġ": the space byte
        assert_int_equal(json_num(vj, "<|endoftext|>"), V - 1);
        assert_int_equal(cJSON_GetArraySize(mj), tok.n_merges);
        id = 0;
        for (const cJSON *x = mj->child; x; x = x->next, id++) assert_string_equal(x->valuestring, vocab.merges[id]);
        assert_string_equal(json_str(cJSON_GetObjectItem(tj, "pre_tokenizer"), "type"), "ByteLevel");
        const cJSON *added = cJSON_GetArrayItem(cJSON_GetObjectItem(tj, "added_tokens"), 0);
        assert_int_equal(json_num(added, "id"), V - 1);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(added, "special")));
        cJSON_Delete(tj);
        snprintf(path, sizeof path, "%s/tokenizer_config.json", hf_dir);
        tj = read_json(path);
        assert_string_equal(json_str(tj, "tokenizer_class"), "PreTrainedTokenizerFast");
        assert_string_equal(json_str(tj, "bos_token"), "<|endoftext|>");
        assert_string_equal(json_str(tj, "eos_token"), "<|endoftext|>");
        cJSON_Delete(tj);
        bpe_gguf_free(&vocab);
        bpe_free(&tok);
        // Hugging Face's forward on the files gives ./eval's loss
        if (!have_torch()) {
            fprintf(stderr, "python3-torch is not installed: Hugging Face's forward not run\n");
        } else {
            double c_eval, hf;
            hf_losses(w, hf_dir, &c_eval, &hf);
            fprintf(stderr, "%s: ./eval %.6f, Hugging Face's %s in PyTorch (float64) %.6f\n", RUNS[i], c_eval,
                    llama ? "LlamaForCausalLM" : "GPT2LMHeadModel", hf);
            assert_true(c_eval > 0.5);
            assert_float_equal(hf, c_eval, 1e-5 * c_eval);   // float32 against float64
            if (llama) {   // and q, k left in our pair order: the loss moves (the check can fail)
                StFile *good;
                snprintf(path, sizeof path, "%s/model.safetensors", hf_dir);
                assert_int_equal(st_open(&good, path, err, sizeof err), 0);
                int n = st_num_tensors(good);
                StTensorOut *t = calloc((size_t)n, sizeof *t);
                assert_non_null(t);
                for (int k = 0; k < n; k++) {
                    const StTensor *g = st_tensor_at(good, k);
                    int layer;
                    char which;
                    t[k] = (StTensorOut){.name = g->name, .dtype = g->dtype, .ndim = g->ndim, .data = g->data};
                    memcpy(t[k].shape, g->shape, sizeof t[k].shape);
                    if (sscanf(g->name, "model.layers.%d.self_attn.%c_proj.weight", &layer, &which) == 2 &&
                        (which == 'q' || which == 'k')) {
                        char nm[64];
                        snprintf(nm, sizeof nm, "h.%d.attn.c_attn.weight", layer);
                        t[k].data = params + gpt_find_param(m, nm)->offset + (which == 'k' ? (size_t)C * C : 0);
                    }
                }
                char bad_dir[700];
                snprintf(bad_dir, sizeof bad_dir, "%s-unpermuted", hf_dir);
                assert_int_equal(run("mkdir -p %s && cp %s/config.json %s/", bad_dir, hf_dir, bad_dir), 0);
                snprintf(path, sizeof path, "%s/model.safetensors", bad_dir);
                assert_int_equal(st_write(path, t, n, (const StMeta[]){{"format", "pt"}}, 1, ATOMIC_REPLACE, err,
                                          sizeof err), 0);
                free(t);
                st_close(good);
                double c2, hf_bad;
                hf_losses(w, bad_dir, &c2, &hf_bad);
                fprintf(stderr, "  q and k unpermuted: %.6f\n", hf_bad);
                assert_true(fabs(hf_bad - c_eval) > 1e-4);
            }
        }
        gpt_free(m);
    }
}

// --format hf: the other blocks and schemes, a scaled rope and --context-length
// refused in one line (exit 2), the directory's files by --out's rules.
static void test_export_hf_refusals(void **state) {
    (void)state;
    char w[512], tk[512], out_dir[600], cmd[2048];
    snprintf(tk, sizeof tk, "%s/data/tokenizer.bin", dir);
    snprintf(out_dir, sizeof out_dir, "%s/hf-refused", dir);
    static const struct { const char *model, *flags, *msg; } CASES[] = {
        {"rope", "", "--format hf: pos=rope with block=gpt2 has no home there: Hugging Face's GPT2LMHeadModel, "
                     "which --format hf writes block=gpt2 as, has a learned position table"},
        {"alibi", "", "pos=alibi with block=gpt2 has no home there"},
        {"llama-alibi", "", "--format hf: pos=alibi with block=llama has no home there: Hugging Face's "
                            "LlamaForCausalLM, which --format hf writes block=llama as, rotates q and k (rope)"},
        {"llama-rope8", "", "LlamaForCausalLM rotates every dim of a head: rope_dims = 8 of head_dim 16"},
        {"hf-llama", "--rope_scaling=yarn --rope_scaling_factor=4", "rope_scaling=yarn is not written"},
        {"hf-llama", "--context-length 64", "--context-length is for GGUF files"},
        {"hf-llama", "--format gguff", "--format: 'gguff' is not one of gguf|hf"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        weights_of(CASES[i].model, w, sizeof w);
        snprintf(cmd, sizeof cmd, "--weights %s --tokenizer %s --format hf --out %s %s", w, tk, out_dir,
                 CASES[i].flags);
        expect_one_line_exit2(cmd, CASES[i].msg);
    }
    assert_int_equal(run("test -e %s", out_dir), 1);   // nothing made
    // --out: a regular file is not a directory
    weights_of("hf-llama", w, sizeof w);
    assert_int_equal(run("echo old > %s/hf-file", dir), 0);
    snprintf(cmd, sizeof cmd, "--weights %s --tokenizer %s --format hf --out %s/hf-file", w, tk, dir);
    expect_one_line_exit2(cmd, "hf-file: exists and is not a directory");
}

// dir/NAME-ref: the export of the run NAME (hf-learned, hf-llama), made at the
// first call, whose bytes every later export of it must have.
static const char *hf_ref(const char *name) {
    static char ref[2][600];
    int k = strcmp(name, "hf-llama") == 0;
    snprintf(ref[k], sizeof ref[k], "%s/%s-ref", dir, name);
    if (run("test -d %s || ./export --weights %s/%s/model.safetensors --tokenizer %s/data/tokenizer.bin --format hf "
            "--out %s", ref[k], dir, name, dir, ref[k]) != 0)
        fail_msg("%s", out);
    return ref[k];
}

// What ./export --format hf takes as --out, each refusal one line (exit 2)
// before any work, the target as it was: never a run directory of ./train
// (train.lock, checkpoint.safetensors, or config.ini with log.csv), even with
// --overwrite; an existing directory only if it holds exactly the four files
// of an export (and then only with --overwrite), or nothing.
static void test_export_hf_targets(void **state) {
    (void)state;
    char w[512], tk[512], cmd[2048], t[600];
    weights_of("hf-llama", w, sizeof w);
    snprintf(tk, sizeof tk, "%s/data/tokenizer.bin", dir);
    assert_int_equal(run("mkdir -p %s/tg && cp -r %s/hf-learned %s/tg/run && cd %s/tg && "
                         "mkdir ckpt lock ini part other empty && cp run/checkpoint.safetensors ckpt/ && "
                         "touch lock/train.lock && cp run/config.ini run/log.csv ini/ && echo x > other/notes.txt && "
                         "mkdir linked && ln -s linked link && ls -lR > ../tg.before", dir, dir, dir, dir), 0);
    static const struct { const char *out, *msg; } CASES[] = {
        {"run", "tg/run: holds a ropelab run (train.lock); an export never replaces a run directory"},
        {"run/", "holds a ropelab run (train.lock)"},
        {"ckpt", "tg/ckpt: holds a ropelab run (checkpoint.safetensors)"},
        {"lock", "tg/lock: holds a ropelab run (train.lock)"},
        {"ini", "tg/ini: holds a ropelab run (config.ini and log.csv)"},
        {"other", "tg/other: holds notes.txt: not a directory of exactly config.json, model.safetensors, "
                  "tokenizer.json, tokenizer_config.json; not replaced"},
        {"link", "tg/link: exists and is a symbolic link (name the directory itself); not replaced"},
        {".", "not a name for a new directory"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        for (int overwrite = 0; overwrite < 2; overwrite++) {
            snprintf(cmd, sizeof cmd, "--weights %s --tokenizer %s --format hf --out %s/tg/%s%s", w, tk, dir,
                     CASES[i].out, overwrite ? " --overwrite" : "");
            expect_one_line_exit2(cmd, CASES[i].msg);
        }
    // the part of an export (a config.json alone) is not one: not replaced either
    assert_int_equal(run("cp %s/config.json %s/tg/part/", hf_ref("hf-llama"), dir), 0);
    snprintf(cmd, sizeof cmd, "--weights %s --tokenizer %s --format hf --out %s/tg/part --overwrite", w, tk, dir);
    expect_one_line_exit2(cmd, "tg/part: lacks model.safetensors: not a directory of exactly");
    assert_int_equal(run("rm %s/tg/part/config.json && cd %s/tg && ls -lR > ../tg.after && "
                         "cmp ../tg.before ../tg.after", dir, dir), 0);   // every target as it was
    // an empty directory is taken as nothing; then it is an export, replaced only with --overwrite
    snprintf(t, sizeof t, "%s/tg/empty", dir);
    if (run("./export --weights %s --tokenizer %s --format hf --out %s/", w, tk, t) != 0) fail_msg("%s", out);
    assert_int_equal(run("diff -r %s %s", t, hf_ref("hf-llama")), 0);
    snprintf(cmd, sizeof cmd, "--weights %s --tokenizer %s --format hf --out %s", w, tk, t);
    expect_one_line_exit2(cmd, "tg/empty: exists; pass --overwrite to replace it");
    weights_of("hf-learned", w, sizeof w);
    if (run("./export --weights %s --tokenizer %s --format hf --out %s --overwrite", w, tk, t) != 0)
        fail_msg("%s", out);
    assert_int_equal(run("diff -r %s %s", t, hf_ref("hf-learned")), 0);
    assert_int_equal(run("ls -A %s/tg | tr '\\n' ' '", dir), 0);   // no temporary left beside it
    assert_string_equal(out, "ckpt empty ini link linked lock other part run ");
}

// ./export --format hf of the run NAME into out (--overwrite if asked) as a
// child, killed (SIGKILL) after delay_s seconds if it still runs (never when
// delay_s < 0). Returns the seconds from its start to its end.
static double export_hf_killed_after(double delay_s, const char *name, const char *out_dir, int overwrite) {
    char w[512], tk[512];
    weights_of(name, w, sizeof w);
    snprintf(tk, sizeof tk, "%s/data/tokenizer.bin", dir);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl("./export", "./export", "--weights", w, "--tokenizer", tk, "--format", "hf", "--out", out_dir,
              overwrite ? "--overwrite" : (char *)NULL, (char *)NULL);
        _exit(127);
    }
    if (delay_s >= 0) {
        struct timespec d = {(time_t)delay_s, (long)((delay_s - (double)(time_t)delay_s) * 1e9)};
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);   // a child that has ended is a zombie until waitpid: never another process
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (delay_s < 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) fail_msg("./export --out %s failed", out_dir);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

// The kills: ./export --format hf killed (SIGKILL) at 20 moments
// spread over its run, into nothing and with --overwrite over another
// model's export. After each, --out is the old export or none, or the new
// one, byte for byte: never a part of one or a mix of two. The next export
// is not blocked by what the kills left beside it, and removes it.
static void test_export_hf_killed(void **state) {
    (void)state;
    enum { KILLS = 20 };
    const char *old_ref = hf_ref("hf-learned"), *new_ref = hf_ref("hf-llama");
    char kd[600], target[700];
    snprintf(kd, sizeof kd, "%s/killed", dir);
    snprintf(target, sizeof target, "%s/out", kd);
    assert_int_equal(run("mkdir -p %s", kd), 0);
    double whole = 1e9;   // the shortest of three whole exports: the kills spread over its time
    for (int i = 0; i < 3; i++) {
        double t = export_hf_killed_after(-1, "hf-llama", target, i > 0);
        if (t < whole) whole = t;
    }
    int as_new[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++) {   // 0: into nothing; 1: --overwrite over the old export
        for (int i = 0; i < KILLS; i++) {
            assert_int_equal(run("rm -rf %s && %s%s %s", target, pass ? "cp -r " : "true", pass ? old_ref : "",
                                 pass ? target : ""), 0);
            double at = 1.25 * whole * (i + 0.5) / KILLS;   // some after its end
            export_hf_killed_after(at, "hf-llama", target, pass);
            int is_old = pass ? run("diff -r %s %s", target, old_ref) == 0 : run("test -e %s", target) != 0;
            int is_new = run("diff -r %s %s", target, new_ref) == 0;
            if (!is_old && !is_new) {
                run("ls -lAR %s", kd);
                fail_msg("killed after %.1f ms of %.1f: %s is neither %s nor the new export:\n%s", 1e3 * at,
                         1e3 * whole, target, pass ? "the old export" : "absent", out);
            }
            as_new[pass] += is_new;
        }
        printf("  %s: %d kills in %.1f ms left the old state, %d the new export\n",
               pass ? "--overwrite" : "into nothing", KILLS - as_new[pass], 1e3 * whole, as_new[pass]);
        export_hf_killed_after(-1, "hf-llama", target, 1);
        assert_int_equal(run("diff -r %s %s && ls -A %s", target, new_ref, kd), 0);
        assert_string_equal(out, "out\n");   // the temporaries of the killed exports gone
    }
}

// A file-size limit (a full disk) fails --format hf's write like any other:
// one line naming --out's file, exit 1; the export that was there whole (the
// issue's new config.json beside the old weights is not possible), nothing
// beside it.
static void test_export_hf_file_size_limit(void **state) {
    (void)state;
    const char *old_ref = hf_ref("hf-learned");
    char w[512], kd[600];
    weights_of("hf-llama", w, sizeof w);
    snprintf(kd, sizeof kd, "%s/hf-fsize", dir);
    for (int overwrite = 1; overwrite >= 0; overwrite--) {
        assert_int_equal(run("rm -rf %s && mkdir %s && %s%s %s/out", kd, kd, overwrite ? "cp -r " : "true",
                             overwrite ? old_ref : "", overwrite ? kd : ""), 0);
        int rc = run("ulimit -f 8; ./export --weights %s --tokenizer %s/data/tokenizer.bin --format hf --out %s/out%s",
                     w, dir, kd, overwrite ? " --overwrite" : "");
        if (rc != 1 || !strstr(out, "hf-fsize/out/model.safetensors: write failed: File too large") ||
            strchr(out, '\n') != out + strlen(out) - 1)
            fail_msg("exit %d, want 1 and one line with 'out/model.safetensors: write failed: File too large':\n%s",
                     rc, out);
        if (overwrite) assert_int_equal(run("diff -r %s/out %s", kd, old_ref), 0);
        assert_int_equal(run("ls -A %s", kd), 0);
        assert_string_equal(out, overwrite ? "out\n" : "");
    }
}

// Beside --out, what killed exports leave (OUT.tmp.XXXXXX: the part of a new
// export, the old one after the exchange) is removed by the next export of
// OUT, and only that: not a directory another process locks (an export under
// way), not one holding another file, not another target's.
static void test_export_hf_debris(void **state) {
    (void)state;
    const char *old_ref = hf_ref("hf-learned"), *new_ref = hf_ref("hf-llama");
    char kd[600], path[700];
    snprintf(kd, sizeof kd, "%s/debris", dir);
    assert_int_equal(run("mkdir %s && cd %s && cp -r %s out.tmp.Aa0000 && mkdir out.tmp.Bb1111 out.tmp.Dd3333 "
                         "out.tmp.Ee4444 other.tmp.Ff5555 && cp %s/config.json out.tmp.Bb1111/ && "
                         "head -c 100 %s/model.safetensors > out.tmp.Bb1111/model.safetensors.tmp.Cc2222 && "
                         "echo x > out.tmp.Dd3333/notes.txt", kd, kd, old_ref, new_ref, new_ref), 0);
    snprintf(path, sizeof path, "%s/out.tmp.Ee4444", kd);
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0);   // as the export that made it holds it while it writes
    snprintf(path, sizeof path, "%s/out", kd);
    export_hf_killed_after(-1, "hf-llama", path, 0);
    assert_int_equal(run("diff -r %s %s && ls -A %s | tr '\\n' ' '", path, new_ref, kd), 0);
    assert_string_equal(out, "other.tmp.Ff5555 out out.tmp.Dd3333 out.tmp.Ee4444 ");
    close(fd);   // its writer gone: removed by the next export
    export_hf_killed_after(-1, "hf-llama", path, 1);
    assert_int_equal(run("ls -A %s | tr '\\n' ' '", kd), 0);
    assert_string_equal(out, "other.tmp.Ff5555 out out.tmp.Dd3333 ");
}

// Refused in one line naming the weights file (exit 2), bad files exit 1, and
// --out is left as it was, even with --overwrite.
static void test_export_refusals(void **state) {
    (void)state;
    char keep[512], w_rope[512], w[512], tk[512];
    snprintf(keep, sizeof keep, "%s/keep.gguf", dir);
    snprintf(tk, sizeof tk, "%s/data/tokenizer.bin", dir);
    weights_of("rope", w_rope, sizeof w_rope);
    FILE *f = fopen(keep, "w");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);
    static const struct { const char *model, *flags, *msg; int code; } CASES[] = {
        {"t5", "", "pos=t5 has no home in llama.cpp", 2},
        {"llama-learned", "", "block=llama with a position table has no home", 2},
        {"llama-none", "", "block=llama with pos=none has no home in llama.cpp", 2},
        {"rope", "--rope_scaling=yarn_paper --rope_scaling_factor=4", "rope_scaling=yarn_paper has no home", 2},
        {"rope", "--rope_scaling=dynamic --rope_scaling_factor=2", "rope_scaling=dynamic has no home", 2},
        {"rope", "--rope_scaling=yarn --rope_scaling_factor=4 --rope_yarn_beta_fast=16", "llama.cpp reads no beta", 2},
        {"alibi", "--rope_scaling=yarn", "rope_scaling=yarn applies to pos=rope only, not pos=alibi", 2},
        {"learned", "--context-length 64", "pos=learned has block_size = 32 rows of wpe", 2},
        {"rope", "--context-length 0", "export: --context-length: 0 is out of range [1, 1048576]", 2},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        weights_of(CASES[i].model, w, sizeof w);
        int rc = run("./export --weights %s --tokenizer %s --out %s --overwrite %s", w, tk, keep, CASES[i].flags);
        if (rc != CASES[i].code || !strstr(out, CASES[i].msg) || strchr(out, '\n') != out + strlen(out) - 1)
            fail_msg("./export %s: exit %d, want %d and one line with '%s':\n%s", CASES[i].flags, rc, CASES[i].code,
                     CASES[i].msg, out);
    }
    // bad or missing files: exit 1
    assert_int_equal(run("./export --weights %s/none.safetensors --tokenizer %s --out %s --overwrite", dir, tk, keep), 1);
    assert_non_null(strstr(out, "none.safetensors"));
    assert_int_equal(run("./export --weights %s --tokenizer %s/corpus.txt --out %s --overwrite", w_rope, dir, keep), 1);
    assert_int_equal(run("./prepare --vocab-size 300 --out-dir %s/data300 %s/corpus.txt", dir, dir), 0);
    assert_int_equal(run("./export --weights %s --tokenizer %s/data300/tokenizer.bin --out %s --overwrite", w_rope,
                         dir, keep), 1);
    assert_non_null(strstr(out, "does not match the tokenizer"));
    assert_int_equal(run("./export --weights %s --tokenizer %s --out %s/no/dir/x.gguf", w_rope, tk, dir), 1);
    // the command line: exit 2
    assert_int_equal(run("./export --weights %s --tokenizer %s", w_rope, tk), 2);
    assert_int_equal(run("./export --weights %s --tokenizer %s --out %s --overwrite --bogus", w_rope, tk, keep), 2);
    assert_int_equal(run("./export --weights %s --tokenizer %s --out %s --overwrite --rope_scaling=nope", w_rope, tk,
                         keep), 2);
    size_t len;
    f = fopen(keep, "r");
    char buf[8] = {0};
    len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    assert_int_equal(len, 3);
    assert_string_equal(buf, "old");   // every refusal left --out alone
    assert_int_equal(run("ls %s | grep -c tmp", dir), 1);   // and no temporary behind
    assert_string_equal(out, "0\n");
}

// One line, exit 2: what getopt would have said, and the usage, are not printed.
static void expect_one_line_exit2(const char *cmd_flags, const char *want) {
    int rc = run("./export %s", cmd_flags);
    if (rc != 2 || !strstr(out, want) || strchr(out, '\n') != out + strlen(out) - 1)
        fail_msg("./export %s: exit %d, want 2 and one line with '%s':\n%s", cmd_flags, rc, want, out);
}

static void test_export_unknown_option_one_line(void **state) {
    (void)state;
    expect_one_line_exit2("--bogus", "export: unknown option '--bogus' (see ./export --help)");
    expect_one_line_exit2("--weights x --tokenizer y --out z --frob=3", "export: unknown option '--frob'");
    expect_one_line_exit2("--weights x --tokenizer y --out", "export: option '--out' needs a value");
    expect_one_line_exit2("-x", "export: unknown option '-x'");
    expect_one_line_exit2("--weights x --tokenizer y", "export: --out: required, not given (see ./export --help)");
}

// --context-length by numtext.h's rule, whole and range-checked: one line
// naming the flag, exit 2, before any file is read.
static void test_export_strict_numbers(void **state) {
    (void)state;
    static const struct { const char *value, *want; } cases[] = {
        {"1e3", "export: --context-length: '1e3' is not an integer\n"},
        {"12abc", "export: --context-length: '12abc' is not an integer\n"},
        {"0x40", "export: --context-length: '0x40' is not an integer\n"},
        {"064", "export: --context-length: '064' is not an integer\n"},
        {"-1", "export: --context-length: -1 is out of range [1, 1048576]\n"},
        {"1048577", "export: --context-length: 1048577 is out of range [1, 1048576]\n"},
        {"99999999999999999999", "export: --context-length: 99999999999999999999 is out of range [1, 1048576]\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = run("./export --weights %s/none.safetensors --tokenizer %s/none.bin --out %s/none.gguf "
                     "--context-length '%s'", dir, dir, dir, cases[i].value);
        if (rc != 2 || strcmp(out, cases[i].want) != 0)
            fail_msg("--context-length %s: exit %d, want 2 and %s", cases[i].value, rc, cases[i].want);
    }
    assert_int_equal(run("./export --help"), 0);
    assert_non_null(strstr(out, "--context-length N"));
    assert_non_null(strstr(out, "--rope_scaling=VALUE"));
}

// Whether path still holds exactly the bytes of copy (a file saved before the run).
static int unchanged(const char *path, const char *copy) { return run("cmp -s '%s' '%s'", path, copy) == 0; }

// --out: an existing file only with --overwrite; never an input (by another
// spelling, or through a link, even with --overwrite); never a FIFO,
// directory or a link to one. Each refused in one line (exit 2) before any
// work, the target as it was, no temporary left.
static void test_export_output_rules(void **state) {
    (void)state;
    char w[512], tk[512], target[600], cmd[2048];
    weights_of("rope", w, sizeof w);
    snprintf(tk, sizeof tk, "%s/data/tokenizer.bin", dir);
    assert_int_equal(run("mkdir -p %s/out && cp %s %s/out/weights.copy && cp %s %s/out/tokenizer.copy && "
                         "echo old > %s/out/old.gguf && mkfifo %s/out/fifo && mkdir %s/out/d && "
                         "ln -s fifo %s/out/link-to-fifo && ln -s %s %s/out/link-to-tokenizer",
                         dir, w, dir, tk, dir, dir, dir, dir, dir, tk, dir), 0);
    static const struct { const char *out, *flags, *msg; } CASES[] = {
        {"out/old.gguf", "", "out/old.gguf: exists; pass --overwrite to replace it"},
        {"WEIGHTS", "--overwrite", "the same file as the input"},
        {"rope/../rope/model.safetensors", "--overwrite", "the same file as the input"},
        {"data/./tokenizer.bin", "", "the same file as the input"},
        {"out/link-to-tokenizer", "--overwrite", "the same file as the input"},
        {"out/fifo", "--overwrite", "exists and is not a regular file (a FIFO)"},
        {"out/d", "--overwrite", "exists and is not a regular file (a directory)"},
        {"out/link-to-fifo", "--overwrite", "(a symbolic link to a FIFO)"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        if (!strcmp(CASES[i].out, "WEIGHTS")) snprintf(target, sizeof target, "%s", w);
        else snprintf(target, sizeof target, "%s/%s", dir, CASES[i].out);
        snprintf(cmd, sizeof cmd, "--weights %s --tokenizer %s --out %s %s", w, tk, target, CASES[i].flags);
        expect_one_line_exit2(cmd, CASES[i].msg);
    }
    char copy[600];
    snprintf(copy, sizeof copy, "%s/out/weights.copy", dir);
    assert_true(unchanged(w, copy));
    snprintf(copy, sizeof copy, "%s/out/tokenizer.copy", dir);
    assert_true(unchanged(tk, copy));
    assert_int_equal(run("cat %s/out/old.gguf", dir), 0);
    assert_string_equal(out, "old\n");
    assert_int_equal(run("test -p %s/out/fifo && test -d %s/out/d && test -L %s/out/link-to-fifo", dir, dir, dir), 0);
    // --overwrite replaces a regular file; a link to one is replaced as a
    // link, and the file it named keeps its bytes
    assert_int_equal(run("cp %s/out/old.gguf %s/out/other && ln -s other %s/out/link-to-other", dir, dir, dir), 0);
    assert_int_equal(run("./export --weights %s --tokenizer %s --out %s/out/old.gguf --overwrite", w, tk, dir), 0);
    assert_int_equal(run("./export --weights %s --tokenizer %s --out %s/out/link-to-other --overwrite", w, tk, dir), 0);
    assert_int_equal(run("test ! -L %s/out/link-to-other && cmp -s %s/out/old.gguf %s/out/link-to-other && "
                         "cat %s/out/other", dir, dir, dir, dir), 0);
    assert_string_equal(out, "old\n");
    assert_int_equal(run("ls %s/out | grep -c tmp", dir), 1);
    assert_string_equal(out, "0\n");
}

// The issue's /dev/null: a character device made with mknod (root only).
static void test_export_refuses_device(void **state) {
    (void)state;
    if (geteuid() != 0) {
        fprintf(stderr, "not root: no device node can be made; skipped\n");
        skip();
    }
    char w[512], cmd[2048];
    weights_of("rope", w, sizeof w);
    assert_int_equal(run("rm -f %s/null && mknod %s/null c 1 3", dir, dir), 0);
    snprintf(cmd, sizeof cmd, "--weights %s --tokenizer %s/data/tokenizer.bin --out %s/null --overwrite", w, dir, dir);
    expect_one_line_exit2(cmd, "exists and is not a regular file (a character device)");
    assert_int_equal(run("test -c %s/null", dir), 0);
}

// A file-size limit (ulimit -f) fails the write like a full disk: one line,
// exit 1, no file and no temporary (SIGXFSZ would kill ./export and leave
// out.gguf.tmp.XXXXXX).
static void test_export_file_size_limit(void **state) {
    (void)state;
    char w[512];
    weights_of("rope", w, sizeof w);
    assert_int_equal(run("mkdir -p %s/fsize", dir), 0);
    int rc = run("ulimit -f 8; ./export --weights %s --tokenizer %s/data/tokenizer.bin --out %s/fsize/out.gguf",
                 w, dir, dir);
    if (rc != 1 || !strstr(out, "out.gguf: write failed: File too large") || strchr(out, '\n') != out + strlen(out) - 1)
        fail_msg("exit %d, want 1 and one line with 'write failed: File too large':\n%s", rc, out);
    assert_int_equal(run("ls -A %s/fsize | wc -l", dir), 0);
    assert_string_equal(out, "0\n");
}

// The tokenizer's pre-split rule: GPT-2's (./prepare's default) is exported as
// llama.cpp's "gpt-2" without a word; a byte-class one (version 1, every
// tokenizer made before the rule was recorded) as "gpt-2" all the same, the
// nearest llama.cpp has, with a warning that llama.cpp cuts text otherwise;
// and so for --format hf, whose tokenizer.json cuts text by GPT-2's regex.
static void test_export_pretokenizer(void **state) {
    (void)state;
    char w[512], gguf[600], s[64];
    weights_of("rope", w, sizeof w);
    snprintf(gguf, sizeof gguf, "%s/pre.gguf", dir);
    assert_int_equal(run("./export --weights %s --tokenizer %s/data/tokenizer.bin --out %s --overwrite", w, dir,
                         gguf), 0);
    assert_null(strstr(out, "warning"));
    assert_int_equal(run("./prepare --vocab-size 320 --val-fraction 0.1 --pretokenizer byte-classes --out-dir "
                         "%s/data_bc %s/corpus.txt", dir, dir), 0);
    assert_int_equal(run("./train configs/tiny.ini --tokenizer=%s/data_bc/tokenizer.bin --train_file=%s/data_bc/train.bin "
                         "--val_file=%s/data_bc/val.bin --block=llama --steps=1 --eval_every=0 --quiet --threads=1 "
                         "--out_dir=%s/bc", dir, dir, dir, dir), 0);
    assert_int_equal(run("./export --weights %s/bc/model.safetensors --tokenizer %s/data_bc/tokenizer.bin --out %s "
                         "--overwrite", dir, dir, gguf), 0);
    if (!strstr(out, "export: warning: ") || !strstr(out, "by the byte-classes rule") ||
        !strstr(out, "other ids in llama.cpp"))
        fail_msg("./export of a byte-class tokenizer: no warning that llama.cpp cuts text otherwise:\n%s", out);
    Gguf g;
    gguf_read(&g, gguf);
    kv_str(&g, "tokenizer.ggml.pre", s, sizeof s);
    assert_string_equal(s, "gpt-2");
    free(g.buf);
    // --format hf: tokenizer.json's ByteLevel pre-tokenizer is GPT-2's regex too, with the same warning
    assert_int_equal(run("./export --weights %s/bc/model.safetensors --tokenizer %s/data_bc/tokenizer.bin --format hf "
                         "--out %s/bc-hf", dir, dir, dir), 0);
    if (!strstr(out, "export: warning: ") || !strstr(out, "by the byte-classes rule") ||
        !strstr(out, "other ids in Hugging Face"))
        fail_msg("./export --format hf of a byte-class tokenizer: no warning that Hugging Face cuts text otherwise:\n%s",
                 out);
    assert_int_equal(run("./export --weights %s/hf-llama/model.safetensors --tokenizer %s/data/tokenizer.bin "
                         "--format hf --out %s/gpt2-rule-hf", dir, dir, dir), 0);
    assert_null(strstr(out, "warning"));   // GPT-2's rule: not a word
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_layout), cmocka_unit_test(test_gpt2_alphabet),
        cmocka_unit_test(test_neox_permutation), cmocka_unit_test(test_export_schemes),
        cmocka_unit_test(test_export_llama), cmocka_unit_test(test_export_rope_scalings),
        cmocka_unit_test(test_export_context_length), cmocka_unit_test(test_export_hf),
        cmocka_unit_test(test_export_hf_refusals), cmocka_unit_test(test_export_hf_targets),
        cmocka_unit_test(test_export_hf_killed), cmocka_unit_test(test_export_hf_file_size_limit),
        cmocka_unit_test(test_export_hf_debris),
        cmocka_unit_test(test_export_refusals),
        cmocka_unit_test(test_export_unknown_option_one_line),
        cmocka_unit_test(test_export_strict_numbers), cmocka_unit_test(test_export_output_rules),
        cmocka_unit_test(test_export_refuses_device), cmocka_unit_test(test_export_file_size_limit),
        cmocka_unit_test(test_export_pretokenizer),
    };
    return cmocka_run_group_tests(tests, group_setup, remove_data_dir);
}
