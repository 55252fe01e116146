// test_hf_read.c: a Hugging Face model directory read wherever a weights
// file is (src/format/hf_read.c, through weights_file.c): ./export --format
// hf's directories read back bit for bit and evaluated to the same loss;
// directories of an independent writer (tests/hf_writer.py: numpy, by
// Hugging Face's conventions) evaluated to the loss of Hugging Face's forward
// in float64 (scripts/torch/hf_eval.py); and each refusal, one line naming
// the file and the key, exit status 1, before anything the files size.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format/safetensors.h"
#include "format/weights_file.h"
#include "util_run.h"

// Python, for the writer (numpy) and the reference (torch): Debian's.
#define PYTHON "/usr/bin/python3"
static int have_numpy, have_torch;

// RUNS[i]: a run trained here, its weights dir/RUN/model.safetensors and its
// export dir/RUN-hf (./export --format hf).
static const char *const RUNS[][2] = {{"gpt2", "--pos=learned"}, {"llama", "--block=llama --pos=rope"}};

static int group_setup(void **state) {
    (void)state;
    if (make_data_dir("hf_read") != 0) return -1;
    for (int i = 0; i < 2; i++) {
        // trained long enough (60 steps) that the weights are far from their initial values
        if (run("./train configs/tiny.ini %s %s --steps=60 --eval_every=0 --quiet --threads=1 --out_dir=%s/%s",
                data_args, RUNS[i][1], dir, RUNS[i][0]) != 0 ||
            run("./export --weights %s/%s/model.safetensors --tokenizer %s/data/tokenizer.bin --format hf --out "
                "%s/%s-hf", dir, RUNS[i][0], dir, dir, RUNS[i][0]) != 0) {
            fprintf(stderr, "./train or ./export failed: %s\n", out);
            return -1;
        }
    }
    have_numpy = system(PYTHON " -c 'import numpy' >/dev/null 2>&1") == 0;
    have_torch = have_numpy && system(PYTHON " -c 'import torch' >/dev/null 2>&1") == 0;
    if (have_numpy && run(PYTHON " tests/hf_writer.py %s/w 320", dir) != 0) {   // 320: make_data_dir's vocabulary
        fprintf(stderr, "tests/hf_writer.py failed: %s\n", out);
        return -1;
    }
    return 0;
}

static void need_numpy(void) {
    if (!have_numpy) {
        fprintf(stderr, "numpy is not installed for %s: the independent writer's directories are not made\n", PYTHON);
        skip();
    }
}

// ---------------------------------------------------------------- the round trip

// The directory ./export wrote, read back: the configuration of the file (but
// the tokenizer's checksum, which a directory does not record) and every
// tensor of the original model.safetensors, byte for byte.
static void test_round_trip_bits(void **state) {
    (void)state;
    char path[600], err[512];
    for (int i = 0; i < 2; i++) {
        GPT *from_file, *from_dir;
        StFile *f;
        snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, RUNS[i][0]);
        assert_int_equal(gpt_load(&from_file, path, 0, err, sizeof err), 0);
        assert_int_equal(st_open(&f, path, err, sizeof err), 0);
        snprintf(path, sizeof path, "%s/%s-hf", dir, RUNS[i][0]);
        if (gpt_load(&from_dir, path, 0, err, sizeof err) != 0) fail_msg("%s", err);
        const char *key;
        assert_int_equal(gpt_config_diff(gpt_config(from_dir), gpt_config(from_file), 0, &key), 0);
        assert_true(gpt_config(from_file)->tokenizer_checksum != 0);
        assert_true(gpt_config(from_dir)->tokenizer_checksum == 0);   // not recorded
        const ParamEntry *entries;
        assert_int_equal(st_num_tensors(f), gpt_param_entries(from_dir, &entries));
        for (int k = 0; k < st_num_tensors(f); k++) {
            const StTensor *t = st_tensor_at(f, k);
            const ParamEntry *e = gpt_find_param(from_dir, t->name);
            assert_non_null(e);
            assert_int_equal(t->nbytes, e->numel * sizeof(float));
            if (memcmp(t->data, gpt_params(from_dir) + e->offset, t->nbytes) != 0)
                fail_msg("%s: tensor %s differs after the round trip", RUNS[i][0], t->name);
        }
        fprintf(stderr, "%s: %d tensors read back from %s-hf bit for bit\n", RUNS[i][0], st_num_tensors(f),
                RUNS[i][0]);
        st_close(f);
        gpt_free(from_file);
        gpt_free(from_dir);
    }
}

// The text of "loss=..." in the output of the last command.
static void loss_text(char buf[64]) {
    const char *at = strstr(out, " loss=");
    if (!at || sscanf(at, " %63s", buf) != 1) fail_msg("no loss in: %s", out);
}

// ./eval on the export gives the file's loss to the last digit printed.
static void test_round_trip_eval(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++) {
        char from_file[64], from_dir[64];
        assert_int_equal(run("./eval --weights %s/%s/model.safetensors --data %s/data/val.bin --threads 1", dir,
                             RUNS[i][0], dir), 0);
        loss_text(from_file);
        assert_int_equal(run("./eval --weights %s/%s-hf --data %s/data/val.bin --threads 1", dir, RUNS[i][0], dir), 0);
        loss_text(from_dir);
        fprintf(stderr, "%s: ./eval %s (model.safetensors), %s (%s-hf)\n", RUNS[i][0], from_file, from_dir,
                RUNS[i][0]);
        assert_string_equal(from_dir, from_file);
    }
}

// Tensor by tensor, the data of two weights files (their metadata may differ).
static void same_tensors(const char *a_path, const char *b_path) {
    StFile *a, *b;
    char err[512];
    assert_int_equal(st_open(&a, a_path, err, sizeof err), 0);
    assert_int_equal(st_open(&b, b_path, err, sizeof err), 0);
    assert_int_equal(st_num_tensors(a), st_num_tensors(b));
    for (int k = 0; k < st_num_tensors(a); k++) {
        const StTensor *x = st_tensor_at(a, k), *y = st_find(b, x->name);
        if (!y || x->nbytes != y->nbytes || memcmp(x->data, y->data, x->nbytes) != 0)
            fail_msg("%s and %s differ in tensor %s", a_path, b_path, x->name);
    }
    st_close(a);
    st_close(b);
}

// Every program takes the directory: ./sample writes the file's text, ./export
// the same directory again, ./train --init-from starts from the file's weights
// (lr 0: one step changes nothing) and refuses a directory of another model.
static void test_round_trip_programs(void **state) {
    (void)state;
    static char text[2][sizeof out];
    char a[600], b[600];
    for (int i = 0; i < 2; i++) {
        const char *name = RUNS[i][0];
        snprintf(a, sizeof a, "%s/%s/model.safetensors", dir, name);
        snprintf(b, sizeof b, "%s/%s-hf", dir, name);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(run("./sample --weights %s --tokenizer %s/data/tokenizer.bin --prompt 'the king' "
                                 "--tokens 40 --seed 5 --threads 1 2>/dev/null", k ? b : a, dir), 0);
            memcpy(text[k], out, sizeof out);
        }
        assert_string_equal(text[1], text[0]);
        // Without --tokenizer: the directory's tokenizer.json, the same text;
        // a weights file has no tokenizer beside it to default to.
        assert_int_equal(run("./sample --weights %s --prompt 'the king' --tokens 40 --seed 5 --threads 1 2>/dev/null",
                             b), 0);
        assert_string_equal(out, text[0]);
        assert_int_equal(run("./sample --weights %s --prompt 'the king' --threads 1", a), 2);
        assert_non_null(strstr(out, "--tokenizer is required with a weights file"));
        assert_int_equal(run("./export --weights %s --tokenizer %s/data/tokenizer.bin --format hf --out %s-again",
                             b, dir, b), 0);
        assert_int_equal(run("cmp %s/model.safetensors %s-again/model.safetensors && cmp %s/config.json "
                             "%s-again/config.json", b, b, b, b), 0);
        assert_int_equal(run("./train configs/tiny.ini %s %s --init-from %s --steps=1 --lr=0 --min_lr=0 "
                             "--eval_every=0 --quiet --threads=1 --out_dir=%s/%s-ft", data_args, RUNS[i][1], b, dir,
                             name), 0);
        snprintf(b, sizeof b, "%s/%s-ft/model.safetensors", dir, name);
        same_tensors(a, b);
    }
    assert_int_equal(run("./train configs/tiny.ini %s --block=llama --pos=rope --n_layer=3 --init-from %s/llama-hf "
                         "--steps=1 --quiet --threads=1 --out_dir=%s/llama-ft3", data_args, dir, dir), 2);
    assert_non_null(strstr(out, "llama-hf: n_layer is 2 in the file but 3 in this run"));
}

// ---------------------------------------------------------------- the independent writer

// The loss of ./eval and of Hugging Face's forward in float64 on directory
// dir/w/name, at T positions over ./eval's first 2 batches of 4 windows.
static void losses(const char *eval_dir, const char *hf_dir, int T, double *c_eval, double *hf) {
    assert_int_equal(run("./eval --weights %s/w/%s --data %s/data/val.bin --batch-size 4 --batches 2 --seq-len %d "
                         "--threads 1", dir, eval_dir, dir, T), 0);
    const char *at = strstr(out, " loss=");
    assert_non_null(at);
    *c_eval = atof(at + 6);
    if (run(PYTHON " scripts/torch/hf_eval.py --dir %s/w/%s --data %s/data/val.bin --batch-size 4 --batches 2 "
            "--seq-len %d", dir, hf_dir, dir, T) != 0)
        fail_msg("hf_eval.py %s: %s", hf_dir, out);
    at = strstr(out, "hf_eval: loss=");
    assert_non_null(at);
    *hf = atof(at + 14);
}

// What config.json was mapped to: the sizes, the class's block and scheme,
// each rope scaling with its trained length (YaRN's from
// original_max_position_embeddings, dynamic's max_position_embeddings).
static void test_writer_configs(void **state) {
    (void)state;
    need_numpy();
    char path[600], err[512];
    GPTConfig c;
    snprintf(path, sizeof path, "%s/w/gpt2", dir);
    if (gpt_config_at(path, &c, err, sizeof err) != 0) fail_msg("%s", err);
    assert_true(c.block == BLOCK_GPT2 && c.pos == POS_LEARNED && c.d_model == 64 && c.n_layer == 2 &&
                c.n_head == 4 && c.block_size == 64 && c.vocab_size == 320 && c.tokenizer_checksum == 0);
    snprintf(path, sizeof path, "%s/w/llama-yarn", dir);
    if (gpt_config_at(path, &c, err, sizeof err) != 0) fail_msg("%s", err);
    assert_true(c.block == BLOCK_LLAMA && c.pos == POS_ROPE && c.rope_dims == 16 && c.rope_base == 10000.0f &&
                c.block_size == 64 && c.rope_scaling == ROPE_SCALING_YARN && c.rope_scaling_factor == 4.0f &&
                c.rope_original_length == 16 && c.rope_yarn_beta_fast == 8.0f && c.rope_yarn_beta_slow == 0.5f);
    GPTConfig v5;   // the same from transformers 5's rope_parameters
    snprintf(path, sizeof path, "%s/w/llama-yarn-v5", dir);
    if (gpt_config_at(path, &v5, err, sizeof err) != 0) fail_msg("%s", err);
    const char *key;
    assert_int_equal(gpt_config_diff(&v5, &c, 0, &key), 0);
    snprintf(path, sizeof path, "%s/w/llama-linear", dir);
    if (gpt_config_at(path, &c, err, sizeof err) != 0) fail_msg("%s", err);
    assert_true(c.rope_scaling == ROPE_SCALING_LINEAR && c.rope_scaling_factor == 2.0f && c.block_size == 64);
    snprintf(path, sizeof path, "%s/w/llama-dynamic", dir);
    if (gpt_config_at(path, &c, err, sizeof err) != 0) fail_msg("%s", err);
    assert_true(c.rope_scaling == ROPE_SCALING_DYNAMIC && c.rope_scaling_factor == 2.0f && c.block_size == 32 &&
                c.rope_original_length == 32);
}

// Each directory's loss in ./eval (float32) against Hugging Face's forward
// written again in PyTorch (float64) from the same files: F16 and BF16
// values are widened exactly on both sides, so what differs is float32
// rounding. The tolerance is the PyTorch cross-check's for the loss (1e-5
// relative, LOSS_REL_TOL of scripts/torch/check_debug_state.py, derived in
// docs/TORCH.md: float32 gives about 1e-7 relative on a mean of B*T terms);
// measured here: at most 1.4e-7, one unit of the sixth decimal both print. A
// wrong layout or mapping moves the loss by over 100 tolerances (the last
// loop: q and k read in ropelab's pair order by 0.029 nats, 4e-3 relative;
// YaRN's trained length taken as max_position_embeddings by 0.085).
static void test_writer_losses(void **state) {
    (void)state;
    need_numpy();
    if (!have_torch) {
        fprintf(stderr, "python3-torch is not installed: Hugging Face's forward not run\n");
        skip();
    }
    static const struct { const char *name; int T; } DIRS[] = {
        {"gpt2", 64},             // sharded (index + 2 shards), F16 matrices, GPT-2's released names
        {"llama", 64},            // BF16, untied with an equal lm_head.weight
        {"llama-yarn", 64},       // YaRN from L = 16: positions 16..63 scaled
        {"llama-dynamic", 64},    // dynamic NTK past max_position_embeddings = 32
        {"llama-linear", 64},     // position interpolation by 2
    };
    double worst = 0.0;
    for (size_t i = 0; i < sizeof DIRS / sizeof DIRS[0]; i++) {
        double c_eval, hf;
        losses(DIRS[i].name, DIRS[i].name, DIRS[i].T, &c_eval, &hf);
        double rel = fabs(c_eval - hf) / hf;
        fprintf(stderr, "%-14s ./eval %.6f, Hugging Face's forward (float64) %.6f, relative difference %.1e\n",
                DIRS[i].name, c_eval, hf, rel);
        assert_true(hf > 1.0);
        assert_true(rel <= 1e-5);
        if (rel > worst) worst = rel;
    }
    // The check can fail: Hugging Face's forward on a directory a wrong reader would
    // take for the one ./eval read misses ./eval's loss by 100 tolerances and more.
    static const struct { const char *eval_dir, *hf_dir, *what; } WRONG[] = {
        {"llama", "llama-pairs", "q and k in ropelab's adjacent pairs"},
        {"llama-yarn", "llama-yarn-l64", "YaRN's L as max_position_embeddings (64), not 16"},
    };
    for (size_t i = 0; i < sizeof WRONG / sizeof WRONG[0]; i++) {
        double c_eval, wrong;
        losses(WRONG[i].eval_dir, WRONG[i].hf_dir, 64, &c_eval, &wrong);
        fprintf(stderr, "%s: ./eval %.6f, Hugging Face's forward with %s %.6f\n", WRONG[i].eval_dir, c_eval,
                WRONG[i].what, wrong);
        assert_true(fabs(wrong - c_eval) > 100 * 1e-5 * c_eval);
    }
    fprintf(stderr, "worst relative difference %.1e (tolerance 1e-5)\n", worst);
}

// ---------------------------------------------------------------- the refusals

// ./eval on directory dir/w/bad-NAME: exit status 1 and one line, "eval:
// DIR/FILE: problem" naming the file the problem is in (want: what follows
// "bad-NAME/").
static void expect_refused(const char *name, const char *want) {
    need_numpy();
    int rc = run("./eval --weights %s/w/bad-%s --data %s/data/val.bin --threads 1", dir, name, dir);
    char prefix[600];
    snprintf(prefix, sizeof prefix, "eval: %s/w/bad-%s%s", dir, name, want[0] == ':' ? "" : "/");
    if (rc != 1 || strncmp(out, prefix, strlen(prefix)) != 0 || !strstr(out, want) ||
        strchr(out, '\n') != out + strlen(out) - 1)
        fail_msg("bad-%s: exit %d, want 1 and one line with '%s':\n%s", name, rc, want, out);
}

static void test_refuses_another_architecture(void **s) {
    expect_refused("arch", "config.json: model_type is \"mistral\": ropelab reads gpt2 (GPT2LMHeadModel) and llama "
                           "(LlamaForCausalLM)");
}
static void test_refuses_another_class(void **s) {
    expect_refused("class", "config.json: architectures is not [\"GPT2LMHeadModel\"] (model_type gpt2): it names "
                            "GPT2Model");
}
static void test_refuses_gqa(void **s) {
    expect_refused("gqa", "config.json: num_key_value_heads is 2, not num_attention_heads 4: grouped-query "
                          "attention is not supported");
}
static void test_refuses_missing_key(void **s) {
    expect_refused("missing-key", "config.json: num_attention_heads is missing");
}
static void test_refuses_unknown_rope_type(void **s) {
    expect_refused("rope-type", "config.json: rope_scaling.rope_type \"llama3\" is not one ropelab computes "
                                "(default, linear, dynamic, yarn)");
}
static void test_refuses_unknown_rope_key(void **s) {
    expect_refused("rope-key", "config.json: rope_scaling.mscale is refused: ropelab's rope_type yarn takes factor, "
                               "original_max_position_embeddings, beta_fast, beta_slow, truncate, attention_factor");
}
static void test_refuses_yarn_factor(void **s) {
    expect_refused("yarn-factor", "config.json: rope_scaling.factor 2 is not max_position_embeddings / "
                                  "original_max_position_embeddings = 64 / 16");
}
static void test_refuses_eps(void **s) {
    expect_refused("eps", "config.json: rms_norm_eps is 1e-06: ropelab's RMSNorm uses eps 1e-05");
}
static void test_refuses_intermediate_size(void **s) {
    expect_refused("intermediate", "config.json: intermediate_size is 172: ropelab's llama MLP is 176 wide for "
                                   "hidden_size 64");
}
static void test_refuses_activation(void **s) {
    expect_refused("activation", "config.json: activation_function is \"gelu\": only \"gelu_new\"");
}
static void test_refuses_untied_head(void **s) {
    expect_refused("untied", "model.safetensors: lm_head.weight differs from model.embed_tokens.weight "
                             "(tie_word_embeddings false): ropelab's head is the embedding");
}
static void test_refuses_missing_head(void **s) {
    expect_refused("no-head", "config.json: tie_word_embeddings is false but ");
}
static void test_refuses_shape(void **s) {
    expect_refused("shape", "model.safetensors: tensor model.layers.1.mlp.up_proj.weight has shape [168, 64], "
                            "expected [176, 64] from config.json");
}
static void test_refuses_leftover_tensor(void **s) {
    expect_refused("leftover", "model.safetensors: tensor model.layers.0.self_attn.rotary_emb.inv_freq is not one "
                               "of LlamaForCausalLM's as ropelab reads it");
}
static void test_refuses_missing_tensor(void **s) {
    expect_refused("missing-tensor", "model.safetensors: missing tensor model.layers.1.self_attn.v_proj.weight");
}
static void test_refuses_dtype(void **s) {
    expect_refused("dtype", "model.safetensors: tensor model.norm.weight has dtype I32; F32, F16 and BF16 are read");
}
static void test_refuses_missing_shard(void **s) {
    expect_refused("missing-shard", "model.safetensors.index.json: names shard model-00002-of-00002.safetensors "
                                    "(for tensor h.1.ln_1.weight), which is missing");
}
static void test_refuses_index_naming_twice(void **s) {
    expect_refused("index-twice", "model.safetensors.index.json: weight_map names tensor wte.weight twice");
}
static void test_refuses_header_lying(void **s) {
    expect_refused("header-size", "model-00001-of-00002.safetensors: tensor wte.weight has data_offsets [0, 40960] "
                                  "(40960 bytes) but its shape needs 41088 bytes");
}
static void test_refuses_both_weight_files(void **s) {
    expect_refused("both-files", ": holds both model.safetensors and model.safetensors.index.json");
}

// A run directory is not a Hugging Face directory; and a configuration of a
// 6.7-billion-parameter Llama over a file of one small tensor is refused
// from the headers under a 2 GB address-space limit, not by the allocation
// of its 27 GB.
static void test_refuses_before_allocating(void **state) {
    (void)state;
    assert_int_equal(run("./eval --weights %s/gpt2 --data %s/data/val.bin", dir, dir), 1);
    assert_non_null(strstr(out, "gpt2: a directory without config.json: not a Hugging Face model directory"));
    char big[600], path[700], err[512];
    snprintf(big, sizeof big, "%s/big", dir);
    assert_int_equal(run("mkdir -p %s", big), 0);
    snprintf(path, sizeof path, "%s/config.json", big);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"model_type\": \"llama\", \"vocab_size\": 32000, \"hidden_size\": 4096, \"intermediate_size\": "
               "10928, \"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"max_position_embeddings\": 4096, "
               "\"rms_norm_eps\": 1e-05}\n");
    fclose(f);
    float one[4] = {1, 1, 1, 1};
    StTensorOut t = {.name = "model.norm.weight", .dtype = ST_F32, .ndim = 1, .shape = {4}, .data = one};
    snprintf(path, sizeof path, "%s/model.safetensors", big);
    assert_int_equal(st_write(path, &t, 1, NULL, 0, ATOMIC_REPLACE, err, sizeof err), 0);
    // 2 GB of address space cannot hold the 27 GB model (ASan reserves terabytes of shadow: no limit there)
    assert_int_equal(run("%s ./eval --weights %s --data %s/data/val.bin --threads 1",
                         UNDER_ASAN ? "" : "ulimit -v 2000000 &&", big, dir), 1);
    assert_non_null(strstr(out, "big/model.safetensors: missing tensor model.embed_tokens.weight"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_bits),
        cmocka_unit_test(test_round_trip_eval),
        cmocka_unit_test(test_round_trip_programs),
        cmocka_unit_test(test_writer_configs),
        cmocka_unit_test(test_writer_losses),
        cmocka_unit_test(test_refuses_another_architecture),
        cmocka_unit_test(test_refuses_another_class),
        cmocka_unit_test(test_refuses_gqa),
        cmocka_unit_test(test_refuses_missing_key),
        cmocka_unit_test(test_refuses_unknown_rope_type),
        cmocka_unit_test(test_refuses_unknown_rope_key),
        cmocka_unit_test(test_refuses_yarn_factor),
        cmocka_unit_test(test_refuses_eps),
        cmocka_unit_test(test_refuses_intermediate_size),
        cmocka_unit_test(test_refuses_activation),
        cmocka_unit_test(test_refuses_untied_head),
        cmocka_unit_test(test_refuses_missing_head),
        cmocka_unit_test(test_refuses_shape),
        cmocka_unit_test(test_refuses_leftover_tensor),
        cmocka_unit_test(test_refuses_missing_tensor),
        cmocka_unit_test(test_refuses_dtype),
        cmocka_unit_test(test_refuses_missing_shard),
        cmocka_unit_test(test_refuses_index_naming_twice),
        cmocka_unit_test(test_refuses_header_lying),
        cmocka_unit_test(test_refuses_both_weight_files),
        cmocka_unit_test(test_refuses_before_allocating),
    };
    return cmocka_run_group_tests(tests, group_setup, remove_data_dir);
}
