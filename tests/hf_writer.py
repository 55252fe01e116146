#!/usr/bin/python3
"""hf_writer.py: Hugging Face model directories written by the Hugging Face
conventions, independently of ropelab (numpy, json and struct only: not its C
writer, not scripts/torch/), for tests/test_hf_read.c.

    tests/hf_writer.py OUT_DIR VOCAB_SIZE

Random weights (seeded), under the names, layouts and configuration keys
transformers' classes use:

  gpt2/           GPT2LMHeadModel with GPT-2's real config.json keys at a smaller
                  width (n_embd 64, n_layer 2, n_head 4, n_positions 64), its
                  released file's names (no "transformer." prefix, the h.{l}.attn.bias
                  mask buffers), Conv1D weights [in, out], the head tied; sharded:
                  model.safetensors.index.json and two shards; matrices F16, vectors F32
  llama/          LlamaForCausalLM (hidden_size 64, 4 heads, 2 layers, intermediate_size
                  176), q and k in Hugging Face's rotate-half layout (the weights are
                  random: any are that layout's), BF16, tie_word_embeddings false with
                  lm_head.weight an equal copy of embed_tokens
  llama-yarn/     the same, F32, tied, rope_scaling yarn (factor 4, original length 16,
                  max_position_embeddings 64, beta_fast 8, beta_slow 0.5)
  llama-yarn-v5/  llama-yarn/ as transformers 5 writes it: rope_parameters holding the
                  scaling and rope_theta
  llama-dynamic/  the same, F32, tied, rope_scaling dynamic (factor 2,
                  max_position_embeddings 32: evaluated at 64)
  llama-linear/   the same, F32, tied, rope_scaling linear (factor 2)
  llama-pairs/    llama/ with q's and k's rows in adjacent-pair order instead (ropelab's
                  own layout): a reader that forgot the permutation would read this as
                  llama/; its loss must differ (the check can fail)
  llama-yarn-l64/ llama-yarn/ without original_max_position_embeddings: YaRN from L = 64,
                  what a reader taking max_position_embeddings as L would compute

and, each a copy of gpt2/ or llama/ with one thing wrong, the directories
ropelab must refuse (bad-*/; test_hf_read.c names each with its message).
"""
import copy
import json
import os
import shutil
import struct
import sys

import numpy as np


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> (dtype name, numpy array); written as the format says."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, arr) in tensors.items():
        raw = to_bytes(dtype, arr)
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def to_bytes(dtype, arr):
    if dtype == "F32":
        return arr.astype("<f4").tobytes()
    if dtype == "F16":
        return arr.astype("<f2").tobytes()
    if dtype == "I32":
        return arr.astype("<i4").tobytes()
    if dtype == "BF16":   # rounded to nearest even from float32's bits
        u = arr.astype("<f4").view("<u4").astype(np.uint64)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()
    raise ValueError(dtype)


def write_dir(d, config, tensors, shards=None):
    """config.json, and model.safetensors or (shards: a list of name lists) the index and its shards."""
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    meta = {"format": "pt"}
    if shards is None:
        write_safetensors(os.path.join(d, "model.safetensors"), tensors, meta)
        return
    weight_map, total = {}, 0
    for i, names in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(os.path.join(d, file), {n: tensors[n] for n in names}, meta)
        for n in names:
            weight_map[n] = file
            total += len(to_bytes(*tensors[n]))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def gpt2(V, rng):
    C, L, H, T = 64, 2, 4, 64
    # GPT-2's config.json (openai-community/gpt2) with the sizes changed
    config = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
              "bos_token_id": V - 1, "embd_pdrop": 0.1, "eos_token_id": V - 1, "initializer_range": 0.02,
              "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": T, "n_embd": C, "n_head": H,
              "n_layer": L, "n_positions": T, "resid_pdrop": 0.1, "summary_activation": None,
              "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
              "summary_use_proj": True, "task_specific_params": {"text-generation": {"do_sample": True,
                                                                                     "max_length": 50}},
              "vocab_size": V}
    t = {"wte.weight": ("F16", rng.normal(0, 0.1, (V, C))), "wpe.weight": ("F16", rng.normal(0, 0.05, (T, C)))}
    for l in range(L):
        p = f"h.{l}."
        for ln in ("ln_1", "ln_2"):
            t[p + ln + ".weight"] = ("F32", 1 + rng.normal(0, 0.1, C))
            t[p + ln + ".bias"] = ("F32", rng.normal(0, 0.05, C))
        for name, n_in, n_out in (("attn.c_attn", C, 3 * C), ("attn.c_proj", C, C), ("mlp.c_fc", C, 4 * C),
                                  ("mlp.c_proj", 4 * C, C)):   # Conv1D: [in, out]
            t[p + name + ".weight"] = ("F16", rng.normal(0, 0.15, (n_in, n_out)))
            t[p + name + ".bias"] = ("F32", rng.normal(0, 0.05, n_out))
        t[p + "attn.bias"] = ("F32", np.tril(np.ones((T, T))).reshape(1, 1, T, T))   # the causal mask buffer
    t["ln_f.weight"] = ("F32", 1 + rng.normal(0, 0.1, C))
    t["ln_f.bias"] = ("F32", rng.normal(0, 0.05, C))
    names = list(t)
    return config, t, [names[: len(names) // 2], names[len(names) // 2:]]


def llama(V, rng, dtype):
    C, L, H, F = 64, 2, 4, 176   # F: ropelab's rule, ceil(8C/3) up to a multiple of 8
    config = {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
              "bos_token_id": V - 1, "eos_token_id": V - 1, "head_dim": C // H, "hidden_act": "silu",
              "hidden_size": C, "initializer_range": 0.02, "intermediate_size": F, "max_position_embeddings": 64,
              "mlp_bias": False, "model_type": "llama", "num_attention_heads": H, "num_hidden_layers": L,
              "num_key_value_heads": H, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
              "rope_theta": 10000.0, "tie_word_embeddings": True, "torch_dtype": "float32",
              "transformers_version": "4.44.0", "use_cache": True, "vocab_size": V}
    t = {"model.embed_tokens.weight": (dtype, rng.normal(0, 0.2, (V, C)))}
    for l in range(L):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = (dtype, 1 + rng.normal(0, 0.1, C))
        for n in "qkvo":   # q and k large enough that attention is far from uniform: positions matter
            t[p + f"self_attn.{n}_proj.weight"] = (dtype, rng.normal(0, 0.4 if n in "qk" else 0.2, (C, C)))
        t[p + "post_attention_layernorm.weight"] = (dtype, 1 + rng.normal(0, 0.1, C))
        t[p + "mlp.gate_proj.weight"] = (dtype, rng.normal(0, 0.15, (F, C)))
        t[p + "mlp.up_proj.weight"] = (dtype, rng.normal(0, 0.15, (F, C)))
        t[p + "mlp.down_proj.weight"] = (dtype, rng.normal(0, 0.1, (C, F)))
    t["model.norm.weight"] = (dtype, 1 + rng.normal(0, 0.1, C))
    return config, t


def to_adjacent_pairs(w, H):
    """q's or k's rows from rotate-half order (i, i + D/2) to adjacent pairs (2i, 2i + 1) per head."""
    D = w.shape[0] // H
    out = np.empty_like(w)
    for h in range(H):
        for i in range(D // 2):
            out[h * D + 2 * i] = w[h * D + i]
            out[h * D + 2 * i + 1] = w[h * D + D // 2 + i]
    return out


def main():
    out, V = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(51)
    g_config, g_t, g_shards = gpt2(V, rng)
    write_dir(os.path.join(out, "gpt2"), g_config, g_t, g_shards)

    l_config, l_t = llama(V, rng, "BF16")
    untied = dict(l_config, tie_word_embeddings=False)
    l_head = dict(l_t, **{"lm_head.weight": l_t["model.embed_tokens.weight"]})
    write_dir(os.path.join(out, "llama"), untied, l_head)
    pairs = {n: (dt, to_adjacent_pairs(w, 4) if n.endswith(("q_proj.weight", "k_proj.weight")) else w)
             for n, (dt, w) in l_head.items()}
    write_dir(os.path.join(out, "llama-pairs"), untied, pairs)

    f_config, f_t = llama(V, rng, "F32")
    yarn = dict(f_config, rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
                                        "beta_fast": 8.0, "beta_slow": 0.5})
    write_dir(os.path.join(out, "llama-yarn"), yarn, f_t)
    yarn_64 = dict(yarn, rope_scaling={k: v for k, v in yarn["rope_scaling"].items()
                                       if k != "original_max_position_embeddings"})
    write_dir(os.path.join(out, "llama-yarn-l64"), yarn_64, f_t)
    v5 = {k: v for k, v in yarn.items() if k not in ("rope_scaling", "rope_theta")}
    write_dir(os.path.join(out, "llama-yarn-v5"), dict(v5, rope_parameters=dict(yarn["rope_scaling"],
                                                                                 rope_theta=10000.0)), f_t)
    dynamic = dict(f_config, max_position_embeddings=32, rope_scaling={"type": "dynamic", "factor": 2.0})
    write_dir(os.path.join(out, "llama-dynamic"), dynamic, f_t)
    linear = dict(f_config, rope_scaling={"rope_type": "linear", "factor": 2.0})
    write_dir(os.path.join(out, "llama-linear"), linear, f_t)

    # The refusals: each one thing wrong.
    def bad(name, config, tensors, shards=None):
        write_dir(os.path.join(out, "bad-" + name), config, tensors, shards)

    bad("arch", dict(l_config, model_type="mistral", architectures=["MistralForCausalLM"]), l_t)
    bad("class", dict(g_config, architectures=["GPT2Model"]), g_t)
    bad("gqa", dict(l_config, num_key_value_heads=2), l_t)
    bad("missing-key", {k: v for k, v in l_config.items() if k != "num_attention_heads"}, l_t)
    bad("rope-type", dict(l_config, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                  "high_freq_factor": 4.0,
                                                  "original_max_position_embeddings": 16}), l_t)
    bad("rope-key", dict(l_config, rope_scaling={"rope_type": "yarn", "factor": 4.0, "mscale": 0.7}), l_t)
    bad("yarn-factor", dict(l_config, rope_scaling={"rope_type": "yarn", "factor": 2.0,
                                                    "original_max_position_embeddings": 16}), l_t)
    bad("eps", dict(l_config, rms_norm_eps=1e-6), l_t)
    bad("intermediate", dict(l_config, intermediate_size=172), l_t)
    bad("activation", dict(g_config, activation_function="gelu"), g_t)
    other_head = dict(l_t, **{"lm_head.weight": ("BF16", rng.normal(0, 0.2, (V, 64)))})
    bad("untied", dict(l_config, tie_word_embeddings=False), other_head)
    bad("no-head", dict(l_config, tie_word_embeddings=False), l_t)
    shape = copy.copy(l_t)
    shape["model.layers.1.mlp.up_proj.weight"] = ("BF16", rng.normal(0, 0.1, (168, 64)))
    bad("shape", l_config, shape)
    bad("leftover", l_config, dict(l_t, **{"model.layers.0.self_attn.rotary_emb.inv_freq": ("F32", np.ones(8))}))
    missing = {n: w for n, w in l_t.items() if n != "model.layers.1.self_attn.v_proj.weight"}
    bad("missing-tensor", l_config, missing)
    bad("dtype", l_config, dict(l_t, **{"model.norm.weight": ("I32", np.ones(64))}))
    bad("missing-shard", g_config, g_t, g_shards)
    os.remove(os.path.join(out, "bad-missing-shard", "model-00002-of-00002.safetensors"))
    bad("index-twice", g_config, g_t, g_shards)
    index = os.path.join(out, "bad-index-twice", "model.safetensors.index.json")
    with open(index) as f:
        text = f.read()
    with open(index, "w") as f:   # wte.weight named a second time, in the other shard (json.dump cannot)
        f.write(text.replace('"weight_map": {', '"weight_map": {\n    "wte.weight": "model-00002-of-00002.safetensors",', 1))
    bad("header-size", g_config, g_t, g_shards)
    shard = os.path.join(out, "bad-header-size", "model-00001-of-00002.safetensors")
    with open(shard, "r+b") as f:   # wte's shape made larger than its bytes: the header lies
        n = struct.unpack("<Q", f.read(8))[0]
        header = f.read(n).decode()
        lie = header.replace(f'"shape": [{V}, 64]', f'"shape": [{V + 1}, 64]', 1)
        assert lie != header and len(lie) == len(header) + len(str(V + 1)) - len(str(V))
        f.seek(0)
        rest = open(shard, "rb").read()[8 + n:]
        f.write(struct.pack("<Q", len(lie)) + lie.encode() + rest)
        f.truncate()
    shutil.copytree(os.path.join(out, "llama"), os.path.join(out, "bad-both-files"))
    shutil.copy(index, os.path.join(out, "bad-both-files"))


if __name__ == "__main__":
    main()
