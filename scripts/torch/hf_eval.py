#!/usr/bin/python3
"""Loss of a Hugging Face model directory, computed the way Hugging Face's classes compute it.

    scripts/torch/hf_eval.py --dir DIR --data val.bin [--seq-len T] [--batch-size 8] [--batches K]

Reads DIR/config.json and DIR/model.safetensors (or model.safetensors.index.json
and its shards; F32, F16 or BF16 tensors) and runs, in float64, the forward
pass of the class config.json names, written here again from transformers'
modeling code (modeling_gpt2.py, modeling_llama.py, modeling_rope_utils.py),
not from ropelab's model:

  GPT2LMHeadModel   wte + wpe; per block x += c_proj(attn(ln_1 x)), x += mlp(ln_2 x) with
                    GPT-2's Conv1D (y = x W + b, W stored [in, out]), "gelu_new" (the
                    tanh GELU), attention scaled by 1/sqrt(D); ln_f; the head tied to wte
  LlamaForCausalLM  embed_tokens; per layer x += o_proj(attn(input_layernorm x)),
                    x += down_proj(silu(gate_proj y) * up_proj y), y = post_attention_layernorm x,
                    RMSNorm x / sqrt(mean(x^2) + eps) * w; q and k rotated by rotate_half:
                    cos/sin of pos * inv_freq repeated over both halves, pairs (i, i + D/2),
                    inv_freq = rope_theta^(-2i/D) or rope_scaling's (linear, dynamic, yarn, with
                    YaRN's attention factor on cos and sin); the head tied to embed_tokens, or
                    lm_head.weight when tie_word_embeddings is false

The names are loaded as from_pretrained loads them: the base model's prefix
("transformer.", "model.") added where a file has none (GPT-2's released file),
GPT-2's attention-mask buffers (h.{l}.attn.bias, .masked_bias) dropped, and a
tied head's lm_head.weight dropped (the embedding is the head). The rest must
be exactly the class's state dict (no name missing, none extra). It prints the
mean loss over ./eval's fixed windows (window w covers tokens w*T .. w*T+T,
targets shifted by one; batch k holds windows k*B .. k*B+B-1; the mean of the
batch means), so that equal losses say the names, transposes, q/k permutation
and configuration mapping are right. Only the readers (safetensors, token
file) are torch_model.py's.
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_model as tm  # noqa: E402  (readers only: load_safetensors, read_tokens)


def expected_shapes(cfg):
    """name -> shape of the class's state dict (lm_head.weight only when untied)."""
    V, L = cfg["vocab_size"], None
    if cfg["model_type"] == "gpt2":
        C, L, T = cfg["n_embd"], cfg["n_layer"], cfg["n_positions"]
        F = cfg.get("n_inner") or 4 * C
        shapes = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (T, C),
                  "transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,)}
        for l in range(L):
            p = f"transformer.h.{l}."
            shapes.update({p + "ln_1.weight": (C,), p + "ln_1.bias": (C,),
                           p + "attn.c_attn.weight": (C, 3 * C), p + "attn.c_attn.bias": (3 * C,),
                           p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
                           p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
                           p + "mlp.c_fc.weight": (C, F), p + "mlp.c_fc.bias": (F,),
                           p + "mlp.c_proj.weight": (F, C), p + "mlp.c_proj.bias": (C,)})
    else:
        C, L, F = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
        shapes = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,)}
        for l in range(L):
            p = f"model.layers.{l}."
            shapes.update({p + "input_layernorm.weight": (C,), p + "post_attention_layernorm.weight": (C,),
                           p + "self_attn.q_proj.weight": (C, C), p + "self_attn.k_proj.weight": (C, C),
                           p + "self_attn.v_proj.weight": (C, C), p + "self_attn.o_proj.weight": (C, C),
                           p + "mlp.gate_proj.weight": (F, C), p + "mlp.up_proj.weight": (F, C),
                           p + "mlp.down_proj.weight": (C, F)})
    if not tied(cfg):
        shapes["lm_head.weight"] = (V, C)
    return shapes


def tied(cfg):
    """tie_word_embeddings, absent: the class's default (GPT2Config true, LlamaConfig false)."""
    return cfg.get("tie_word_embeddings", cfg["model_type"] == "gpt2")


def load_weights(d):
    """DIR's tensors as from_pretrained finds them: model.safetensors, or the shards of
    model.safetensors.index.json's weight_map (each tensor in the shard it names)."""
    index = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(index):
        tensors, meta = tm.load_safetensors(os.path.join(d, "model.safetensors"))
        return tensors, [meta]
    with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    tensors, metas = {}, []
    for shard in sorted(set(weight_map.values())):
        got, meta = tm.load_safetensors(os.path.join(d, shard))
        if any(weight_map.get(name) != shard for name in got):
            raise ValueError(f"{shard}: holds a tensor the index does not place there")
        tensors.update(got)
        metas.append(meta)
    if set(tensors) != set(weight_map):
        raise ValueError(f"{index}: names tensors its shards do not hold")
    return tensors, metas


def loaded_names(cfg, tensors):
    """The state dict from_pretrained makes of the file's tensors: the base model's prefix added
    where missing, GPT-2's mask buffers and a tied head's lm_head.weight dropped."""
    prefix = "transformer." if cfg["model_type"] == "gpt2" else "model."
    out = {}
    for name, t in tensors.items():
        if name == "lm_head.weight":
            if not tied(cfg):
                out[name] = t
            continue
        if cfg["model_type"] == "gpt2" and re.fullmatch(r"(transformer\.)?h\.\d+\.attn\.(masked_)?bias", name):
            continue
        out[name if name.startswith(prefix) else prefix + name] = t
    return out


def check_config(cfg):
    """What this file implements; anything else is an error (exit 2)."""
    arch = cfg.get("architectures")
    want = {"gpt2": ["GPT2LMHeadModel"], "llama": ["LlamaForCausalLM"]}.get(cfg.get("model_type"))
    if want is None or arch not in (None, want):
        sys.exit(f"hf_eval.py: model_type {cfg.get('model_type')!r}, architectures {arch!r}: not GPT-2 or Llama")
    if cfg["model_type"] == "gpt2":
        if cfg.get("activation_function", "gelu_new") != "gelu_new" or not cfg.get("scale_attn_weights", True) or \
           cfg.get("scale_attn_by_inverse_layer_idx") or cfg.get("add_cross_attention"):
            sys.exit("hf_eval.py: a GPT-2 option other than gelu_new and 1/sqrt(D) attention")
    else:
        scaling = cfg.get("rope_scaling") or {}
        kind = scaling.get("rope_type", scaling.get("type", "default"))
        if cfg.get("hidden_act", "silu") != "silu" or kind not in ("default", "linear", "dynamic", "yarn") or \
           scaling.get("attention_factor") is not None or cfg.get("rope_parameters") is not None or \
           cfg.get("attention_bias") or cfg.get("mlp_bias") or \
           cfg.get("num_key_value_heads", cfg["num_attention_heads"]) != cfg["num_attention_heads"] or \
           cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"]) * cfg["num_attention_heads"] \
           != cfg["hidden_size"]:
            sys.exit("hf_eval.py: a Llama option not implemented here (act, rope_scaling kind, biases, GQA, head_dim)")


def causal_attention(q, k, v):
    """q, k, v (B, H, T, D) -> (B, H, T, D): softmax(q k^T / sqrt(D) + causal mask) v."""
    T, D = q.shape[2], q.shape[3]
    scores = q @ k.transpose(-1, -2) / math.sqrt(D)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v


def gpt2_logits(cfg, w, ids):
    """GPT2LMHeadModel's forward (modeling_gpt2.py)."""
    B, T = ids.shape
    C, H, eps = cfg["n_embd"], cfg["n_head"], cfg.get("layer_norm_epsilon", 1e-5)
    D = C // H

    def ln(x, p):
        return torch.nn.functional.layer_norm(x, (C,), w[p + ".weight"], w[p + ".bias"], eps)

    def conv1d(x, p):   # Conv1D: x W + b with W [in, out]
        return x @ w[p + ".weight"] + w[p + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][torch.arange(T)]
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        q, k, v = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn").split(C, dim=-1)
        heads = [t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v)]
        y = causal_attention(*heads).transpose(1, 2).reshape(B, T, C)
        x = x + conv1d(y, p + "attn.c_proj")
        x = x + conv1d(gelu_new(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    head = w["transformer.wte.weight"] if tied(cfg) else w["lm_head.weight"]
    return ln(x, "transformer.ln_f") @ head.T


def rope_parameters(cfg, D, T):
    """inv_freq (D/2) and the factor on cos and sin for a pass over T positions, as
    modeling_rope_utils.py computes them for rope_scaling's rope_type: default, linear,
    dynamic (the base grown for T beyond max_position_embeddings) or yarn (the ramp between
    the pairs that turn beta_fast and beta_slow times over the trained length, which is
    original_max_position_embeddings, else max_position_embeddings)."""
    scaling = cfg.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    base, max_pos = float(cfg.get("rope_theta", 10000.0)), cfg["max_position_embeddings"]
    exponents = torch.arange(0, D, 2, dtype=torch.float64) / D
    if kind == "dynamic" and T > max_pos:
        factor = scaling["factor"]
        base = base * ((factor * T / max_pos) - (factor - 1)) ** (D / (D - 2))
    inv_freq = 1.0 / (base ** exponents)
    if kind == "linear":
        return inv_freq / scaling["factor"], 1.0
    if kind != "yarn":
        return inv_freq, 1.0
    factor = scaling["factor"]
    original = scaling.get("original_max_position_embeddings") or max_pos
    beta_fast, beta_slow = scaling.get("beta_fast") or 32, scaling.get("beta_slow") or 1

    def correction_dim(rotations):
        return (D * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), D - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(D // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    extrapolation = 1 - ramp
    inv_freq = inv_freq / factor * (1 - extrapolation) + inv_freq * extrapolation
    return inv_freq, (0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)


def llama_logits(cfg, w, ids):
    """LlamaForCausalLM's forward (modeling_llama.py)."""
    B, T = ids.shape
    C, H, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["rms_norm_eps"]
    D = C // H

    def rms(x, p):   # LlamaRMSNorm
        return w[p] * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def rotate_half(x):
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return torch.cat((-x2, x1), dim=-1)

    inv_freq, attention_factor = rope_parameters(cfg, D, T)
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * attention_factor, emb.sin() * attention_factor

    x = w["model.embed_tokens.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = rms(x, p + "input_layernorm.weight")
        q, k, v = (a @ w[p + f"self_attn.{n}_proj.weight"].T for n in "qkv")
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        y = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ w[p + "self_attn.o_proj.weight"].T
        a = rms(x, p + "post_attention_layernorm.weight")
        g = a @ w[p + "mlp.gate_proj.weight"].T
        x = x + (torch.nn.functional.silu(g) * (a @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    head = w["model.embed_tokens.weight"] if tied(cfg) else w["lm_head.weight"]
    return rms(x, "model.norm.weight") @ head.T


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--seq-len", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--batches", type=int, default=1)
    args = ap.parse_args()
    try:
        with open(os.path.join(args.dir, "config.json")) as f:
            cfg = json.load(f)
        tensors, metas = load_weights(args.dir)
        tokens = tm.read_tokens(args.data)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"hf_eval.py: {e}")
    check_config(cfg)
    tensors = loaded_names(cfg, tensors)
    want = expected_shapes(cfg)
    got = {k: tuple(v.shape) for k, v in tensors.items()}
    if got != want:
        missing = sorted(set(want) - set(got))[:3]
        extra = sorted(set(got) - set(want))[:3]
        shapes = sorted(k for k in set(want) & set(got) if want[k] != got[k])[:3]
        sys.exit(f"hf_eval.py: the state dict differs from the class's: missing {missing}, extra {extra}, "
                 f"other shapes {[(k, got[k], want[k]) for k in shapes]}")
    if any(meta.get("format", "pt") != "pt" for meta in metas):
        sys.exit("hf_eval.py: a __metadata__ format other than 'pt'")
    w = {k: v.double() for k, v in tensors.items()}
    logits = gpt2_logits if cfg["model_type"] == "gpt2" else llama_logits
    T = args.seq_len or cfg.get("n_positions") or cfg["max_position_embeddings"]
    n_windows = (len(tokens) - 1) // T
    losses = []
    with torch.no_grad():
        for k in range(args.batches):
            win = [(k * args.batch_size + b) % n_windows for b in range(args.batch_size)]
            x = torch.tensor(np.stack([tokens[i * T: i * T + T].astype(np.int64) for i in win]))
            y = torch.tensor(np.stack([tokens[i * T + 1: i * T + T + 1].astype(np.int64) for i in win]))
            z = logits(cfg, w, x)
            losses.append(torch.nn.functional.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1)).item())
    print(f"hf_eval: loss={np.mean(losses):.6f}")


if __name__ == "__main__":
    main()
