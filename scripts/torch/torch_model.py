#!/usr/bin/python3
"""torch_model.py: the ropelab model contract (docs/FORMAT.md) in PyTorch.

An independent, plain re-implementation used to cross-check the C program
(scripts/torch/check_debug_state.py) and to benchmark against it
(scripts/torch/torch_baseline.py). It is also the one home, for every script, of:
  - the safetensors reader/writer (struct + json + numpy, no third-party
    package) and its dtype map (ST_DTYPES, st_dtype_name; F16 and BF16 are
    read as float32, HALF_DTYPES);
  - the llm.c token-file reader (read_tokens);
  - which parameters AdamW decays (decay_param_names, adamw_param_groups).

Shapes: B batch, T sequence length, C = d_model, H = n_head, D = C/H,
V = vocab_size, L = n_layer, R = rope_dims.

The parameter names of GPT.state_dict() are exactly the contract's safetensors
names: wte, wpe (learned), rel_bias (t5), h.{l}.ln_1.weight, ...,
h.{l}.attn.c_attn.weight, ..., h.{l}.mlp.c_proj.bias, ln_f.weight, ln_f.bias
(block=llama: the same without any .bias).

Two blocks (the model key `block`): gpt2 (LayerNorm, GELU MLP of width 4C,
biases) and llama (RMSNorm, SwiGLU MLP of width F = mlp_hidden(cfg) with
c_fc's weight (2F, C) holding the gate's rows then the up projection's, no
biases).
"""

import json
import math
import os
import struct
import tempfile
from dataclasses import dataclass, fields

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

POS_KINDS = ("rope", "learned", "sinusoidal", "t5", "alibi", "none")
BLOCKS = ("gpt2", "llama")


# ----------------------------------------------------------------------------
# Configuration

# What a file written before a key existed means by its absence (the C table's if_absent).
IF_ABSENT = {"block": "gpt2", "sinusoidal_scale": 1.0, "rope_scaling": "none", "rope_scaling_factor": 1.0,
             "rope_original_length": 0, "rope_yarn_beta_fast": 32.0, "rope_yarn_beta_slow": 1.0}
ROPE_SCALINGS = ("none", "linear", "ntk", "yarn", "yarn_paper", "dynamic")


@dataclass
class GPTConfig:
    """The model keys. Their defaults are the C table's (src/model/config.c,
    printed by `./train --help`); tests/test_torch_model.py checks that they
    agree. vocab_size comes from the tokenizer: 0 means "not set yet"."""
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    vocab_size: int = 0
    block_size: int = 128
    block: str = "gpt2"             # one of BLOCKS
    pos: str = "rope"
    rope_base: float = 10000.0
    rope_dims: int = 0          # 0 means "all of D" (resolved by validate())
    t5_num_buckets: int = 32
    t5_max_distance: int = 128
    sinusoidal_scale: float = 0.02  # PE is multiplied by it (files without the key: 1)
    rope_scaling: str = "none"      # one of ROPE_SCALINGS (beyond the training length)
    rope_scaling_factor: float = 1.0
    rope_original_length: int = 0   # yarn, yarn_paper, dynamic: the trained length L (0: block_size)
    rope_yarn_beta_fast: float = 32.0
    rope_yarn_beta_slow: float = 1.0

    @property
    def head_dim(self):
        return self.d_model // self.n_head

    @property
    def mlp_hidden(self):
        """The MLP's hidden width F: 4C (gpt2); 8C/3 rounded up, then up to a multiple of 8 (llama)."""
        if self.block == "llama":
            f = -(-8 * self.d_model // 3)      # ceil(8C/3)
            return -(-f // 8) * 8              # up to a multiple of 8
        return 4 * self.d_model

    def validate(self):
        """Checks what the maths of this file needs; resolves rope_dims 0 -> D.
        Returns self; raises ValueError.

        The ranges of single keys (rope_base > 1, n_layer <= 256, ...) are
        the C program's: their one home is the table in src/model/config.c
        (`./train --help` prints each key with its default and range), and
        every file ./train writes satisfies them. Checked here only: sizes
        positive (tensor shapes), pos a known scheme, d_model divisible by
        n_head, and a scheme's own rules when that scheme is used, as in C:
        rope needs rope_dims even and <= head_dim (an odd head_dim is fine
        for the other schemes); t5 needs t5_num_buckets >= 2 and
        t5_max_distance > t5_num_buckets/2 (its log-spaced buckets).
        """
        for name in ("n_layer", "n_head", "d_model", "vocab_size", "block_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} ({getattr(self, name)}) must be positive")
        if self.block not in BLOCKS:
            raise ValueError(f"unknown block '{self.block}' (expected one of {', '.join(BLOCKS)})")
        if self.pos not in POS_KINDS:
            raise ValueError(f"unknown pos '{self.pos}' (expected one of {', '.join(POS_KINDS)})")
        if self.d_model % self.n_head != 0:
            raise ValueError(f"d_model ({self.d_model}) is not divisible by n_head ({self.n_head})")
        if self.rope_dims == 0:
            self.rope_dims = self.head_dim
        if self.pos == "rope" and (self.rope_dims < 0 or self.rope_dims % 2 or self.rope_dims > self.head_dim):
            raise ValueError(f"rope_dims ({self.rope_dims}) must be even and in 2..head_dim ({self.head_dim})"
                             + (" (head_dim is odd: set rope_dims)" if self.head_dim % 2 else ""))
        if self.pos == "rope" and self.rope_scaling not in ROPE_SCALINGS:
            raise ValueError(f"rope_scaling '{self.rope_scaling}' is not one of {', '.join(ROPE_SCALINGS)}")
        if self.pos == "rope" and self.rope_scaling in ("ntk", "dynamic") and self.rope_dims <= 2:
            raise ValueError(f"rope_scaling={self.rope_scaling} needs rope_dims > 2 (its base is raised to R/(R-2))")
        if (self.pos == "rope" and self.rope_scaling in ("yarn", "yarn_paper")
                and not self.rope_yarn_beta_fast > self.rope_yarn_beta_slow):
            raise ValueError(f"rope_yarn_beta_fast ({self.rope_yarn_beta_fast}) must be larger than "
                             f"rope_yarn_beta_slow ({self.rope_yarn_beta_slow})")
        if self.pos == "t5" and (self.t5_num_buckets < 2 or self.t5_max_distance <= self.t5_num_buckets // 2):
            raise ValueError(f"t5_num_buckets ({self.t5_num_buckets}) must be >= 2 and "
                             f"t5_max_distance ({self.t5_max_distance}) > t5_num_buckets/2")
        return self

    def to_metadata(self):
        """The contract's __metadata__ map (all values strings)."""
        return {f.name: (repr(float(getattr(self, f.name))) if f.type is float
                         else str(getattr(self, f.name))) for f in fields(self)}

    @classmethod
    def from_metadata(cls, meta):
        """Builds a config from a safetensors __metadata__ map. Raises ValueError."""
        kw = {}
        for f in fields(cls):
            if f.name not in meta and f.name in IF_ABSENT:
                kw[f.name] = IF_ABSENT[f.name]   # written before the key existed
                continue
            if f.name not in meta:
                raise ValueError(f"metadata key '{f.name}' missing")
            raw = meta[f.name]
            try:
                if f.type is str:
                    kw[f.name] = str(raw)
                elif f.type is float:
                    kw[f.name] = float(raw)
                else:
                    kw[f.name] = int(raw)
            except ValueError:
                raise ValueError(f"metadata '{f.name}' has a bad value '{raw}'") from None
        return cls(**kw).validate()


# ----------------------------------------------------------------------------
# Positional schemes: fixed tables, computed in float64 then cast


def rope_cos_sin(T, R, rope_base, scaling="none", factor=1.0, original_length=0, beta_fast=32.0, beta_slow=1.0):
    """cos, sin of m * theta_i for m = 0..T-1, each (T, R/2), float64.

    theta_i = rope_base^(-2i/R), then, beyond the training length (factor s):
      linear: theta_i / s  (position interpolation: m reads as m/s)
      ntk:    rope_base * s^(R/(R-2)) as the base (NTK-aware)
      yarn:   as Hugging Face's _compute_yarn_parameters: the pair index that turns
              beta times over the trained length L (original_length) is
              d(beta) = R ln(L / (2 pi beta)) / (2 ln rope_base); low = max(floor(d(beta_fast)), 0),
              high = min(ceil(d(beta_slow)), R - 1), kept share g_i = 1 - clamp((i - low) /
              (high - low), 0, 1) (high - low at least 0.001), theta_i' = (1 - g_i) theta_i / s
              + g_i theta_i, and cos, sin times 0.1 ln s + 1 (YaRN's sqrt(1/t)).
      yarn_paper: the paper's ramp, in turns r_i = L theta_i / (2 pi):
              g_i = clamp((r_i - beta_slow) / (beta_fast - beta_slow), 0, 1), the same theta_i'
              and temperature.
      dynamic: Hugging Face's dynamic NTK for a pass over T positions: when T > L,
              rope_base (s T / L - (s - 1))^(R/(R-2)) as the base.
    """
    i = torch.arange(R // 2, dtype=torch.float64)
    L = original_length
    base = rope_base
    if scaling == "ntk":
        base = rope_base * factor ** (R / (R - 2))
    if scaling == "dynamic" and T > L:
        base = rope_base * (factor * T / L - (factor - 1)) ** (R / (R - 2))
    theta = base ** (-2.0 * i / R)
    scale = 1.0
    if scaling == "linear":
        theta = theta / factor
    elif scaling in ("yarn", "yarn_paper"):
        if scaling == "yarn":
            def dim(turns):
                return R * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(rope_base))
            low, high = max(math.floor(dim(beta_fast)), 0), min(math.ceil(dim(beta_slow)), R - 1)
            keep = 1 - ((i - low) / max(high - low, 0.001)).clamp(0.0, 1.0)
        else:
            turns = L * theta / (2 * math.pi)
            keep = ((turns - beta_slow) / (beta_fast - beta_slow)).clamp(0.0, 1.0)
        theta = (1 - keep) * theta / factor + keep * theta
        if factor > 1:
            scale = 0.1 * math.log(factor) + 1.0
    m = torch.arange(T, dtype=torch.float64)
    angle = m[:, None] * theta[None, :]
    return scale * torch.cos(angle), scale * torch.sin(angle)


def apply_rope(u, cos, sin):
    """RoFormer rotation of adjacent pairs (2i, 2i+1) of the first R dims.

    u (B,H,T,D), cos/sin (T,R/2) -> (B,H,T,D); dims >= R pass through.
      u'[2i]   = u[2i] cos - u[2i+1] sin
      u'[2i+1] = u[2i] sin + u[2i+1] cos
    """
    R = 2 * cos.shape[1]
    pairs = u[..., :R].reshape(*u.shape[:-1], R // 2, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    return torch.cat((out.reshape(*u.shape[:-1], R), u[..., R:]), dim=-1)


def sinusoidal_table(T, C, scale=1.0):
    """PE (T,C), float64: PE[t,2i] = s sin(t/10000^(2i/C)), PE[t,2i+1] = s cos(same), s = scale."""
    t = torch.arange(T, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, C, 2, dtype=torch.float64)[None, :]
    angle = t / (10000.0 ** (two_i / C))
    pe = torch.zeros(T, C, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)[:, : C // 2]
    return scale * pe


def t5_bucket(n, num_buckets, max_distance):
    """Causal T5 bucket of a distance n = i - j >= 0 (float64 log, then floor).

    e = num_buckets // 2 exact buckets; beyond, log-spaced up to max_distance,
    capped at num_buckets - 1 (Hugging Face's _relative_position_bucket with
    bidirectional=False).
    """
    e = num_buckets // 2
    if n < e:
        return n
    b = e + math.floor(math.log(n / e) / math.log(max_distance / e) * (num_buckets - e))
    return min(num_buckets - 1, b)


def alibi_slopes(H):
    """Head slopes m_h of ALiBi (Press et al., reference get_slopes).

    H a power of two: m_h = 2^(-8(h+1)/H). Otherwise: slopes of the closest
    lower power of two n, followed by every other slope of 2n (the first H-n).
    """
    def power_of_two(n):
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    if H & (H - 1) == 0:
        return power_of_two(H)
    n = 2 ** int(math.floor(math.log2(H)))
    return power_of_two(n) + alibi_slopes(2 * n)[0::2][: H - n]


# ----------------------------------------------------------------------------
# Model


def bf16_round(x):
    """x rounded to bfloat16 (to nearest, ties to even) and back to x's dtype."""
    return x.to(torch.bfloat16).to(x.dtype)


class Bf16Linear(torch.autograd.Function):
    """The C program's products with precision=bf16 (src/engine/engine_onednn.c): the
    inputs of each product rounded to bf16, the sums exact (here float64):
      forward   y = bf16(x) bf16(W)^T + b
      backward  dx = bf16(dy) bf16(W),  dW = bf16(dy)^T bf16(x),  db = sum dy
    (dy is rounded once per backward and serves both products, as in C).
    Not the autograd of the rounded forward (whose rounding has no gradient):
    this is the computation the C program does, so the two can be compared."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        xr, wr = bf16_round(x), bf16_round(weight)
        ctx.save_for_backward(xr, wr)
        ctx.has_bias = bias is not None
        y = xr @ wr.t()
        return y + bias if bias is not None else y

    @staticmethod
    def backward(ctx, dy):
        xr, wr = ctx.saved_tensors
        dyr = bf16_round(dy)
        dx = dyr @ wr
        dw = dyr.reshape(-1, dyr.shape[-1]).t() @ xr.reshape(-1, xr.shape[-1])
        db = dy.reshape(-1, dy.shape[-1]).sum(0) if ctx.has_bias else None
        return dx, dw, db


def linear(module_or_weight, x, bf16, bias=None):
    """nn.Linear's product (or x W^T for a bare weight), in bf16 products when bf16 is set."""
    if isinstance(module_or_weight, nn.Linear):
        weight, bias = module_or_weight.weight, module_or_weight.bias
    else:
        weight = module_or_weight
    if bf16:
        return Bf16Linear.apply(x, weight, bias)
    y = x @ weight.t()
    return y + bias if bias is not None else y


class Bf16Attention(torch.autograd.Function):
    """Causal attention as the C program computes it with precision=bf16
    (src/engine/onednn_attention.c): the inputs of its five products rounded
    to bf16, the sums exact (here float64), scores, softmax and dS unrounded:
      forward   s = scale bf16(q) bf16(k)^T + bias, masked;  p = softmax(s);
                y = bf16(p) bf16(v)
      backward  dp = bf16(dy) bf16(v)^T;  ds = p (dp - rowsum(p dp));
                dq = scale bf16(ds) bf16(k);  dk = scale bf16(ds)^T bf16(q);
                dv = bf16(p)^T bf16(dy);  dbias = sum over the batch of ds
    q, k, v (B,H,T,D) (q and k already rotated by rope, in full precision);
    bias (H,T,T) or None."""

    @staticmethod
    def forward(ctx, q, k, v, bias, scale):
        qr, kr, vr = bf16_round(q), bf16_round(k), bf16_round(v)
        T = q.shape[-2]
        s = (qr @ kr.transpose(-2, -1)) * scale
        if bias is not None:
            s = s + bias
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        p = F.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)
        ctx.save_for_backward(qr, kr, vr, p)
        ctx.scale, ctx.has_bias = scale, bias is not None
        return bf16_round(p) @ vr

    @staticmethod
    def backward(ctx, dy):
        qr, kr, vr, p = ctx.saved_tensors
        dyr = bf16_round(dy)
        dp = dyr @ vr.transpose(-2, -1)
        ds = p * (dp - (p * dp).sum(-1, keepdim=True))
        dsr = bf16_round(ds)
        dq = ctx.scale * (dsr @ kr)
        dk = ctx.scale * (dsr.transpose(-2, -1) @ qr)
        dv = bf16_round(p).transpose(-2, -1) @ dyr
        dbias = ds.sum(0) if ctx.has_bias else None
        return dq, dk, dv, dbias, None


ATT_BLOCK = 64   # the C program's blocks of query rows and, fused, of keys (src/engine/kernels.h)


class Bf16FusedAttention(torch.autograd.Function):
    """Causal attention as the C program's fused attention computes it with
    precision=bf16 (src/engine/onednn_attention.c): Bf16Attention's rounded
    product inputs, but the keys in blocks of nb = min(T, ATT_BLOCK) with an
    online softmax, so the forward rounds w = exp(s - m), m the running max
    over the key blocks so far (not p = exp(s - lse)), and backward takes
    rho = dy . y from the unrounded dy and the forward's own output:
      forward, per query block I and key block J <= I in order:
                m' = max(m, max_J s), y = y exp(m - m') + bf16(exp(s_J - m')) bf16(v_J),
                l = l exp(m - m') + sum_J exp(s_J - m');  at the end y / l, lse = m + log l
      backward  p = exp(s - lse);  dp = bf16(dy) bf16(v)^T;  ds = p (dp - rho),
                rho = rowsum(dy * y);  dq, dk, dv, dbias as Bf16Attention's."""

    @staticmethod
    def forward(ctx, q, k, v, bias, scale):
        qr, kr, vr = bf16_round(q), bf16_round(k), bf16_round(v)
        T = q.shape[-2]
        nb = min(T, ATT_BLOCK)
        s = (qr @ kr.transpose(-2, -1)) * scale
        if bias is not None:
            s = s + bias
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~causal, float("-inf"))
        y = torch.zeros_like(q)
        lse = torch.empty(q.shape[:-1], dtype=q.dtype, device=q.device)
        for i0 in range(0, T, nb):
            i1 = min(i0 + nb, T)
            m = l = yi = None
            for j0 in range(0, i0 + 1, nb):
                j1 = min(j0 + nb, i1)
                sb = s[..., i0:i1, j0:j1]
                mb = sb.max(-1, keepdim=True).values
                m_new = mb if m is None else torch.maximum(m, mb)
                w = torch.exp(sb - m_new)
                part = bf16_round(w) @ vr[..., j0:j1, :]
                if m is None:
                    yi, l = part, w.sum(-1, keepdim=True)
                else:
                    r = torch.exp(m - m_new)
                    yi, l = yi * r + part, l * r + w.sum(-1, keepdim=True)
                m = m_new
            y[..., i0:i1, :] = yi / l
            lse[..., i0:i1] = (m + torch.log(l)).squeeze(-1)
        p = torch.exp(s - lse.unsqueeze(-1))
        ctx.save_for_backward(qr, kr, vr, p, y)
        ctx.scale, ctx.has_bias = scale, bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        qr, kr, vr, p, y = ctx.saved_tensors
        dyr = bf16_round(dy)
        dp = dyr @ vr.transpose(-2, -1)
        ds = p * (dp - (dy * y).sum(-1, keepdim=True))
        dsr = bf16_round(ds)
        dq = ctx.scale * (dsr @ kr)
        dk = ctx.scale * (dsr.transpose(-2, -1) @ qr)
        dv = bf16_round(p).transpose(-2, -1) @ dyr
        dbias = ds.sum(0) if ctx.has_bias else None
        return dq, dk, dv, dbias, None


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.d_model
        self.n_head = cfg.n_head
        bias = cfg.block == "gpt2"
        self.c_attn = nn.Linear(C, 3 * C, bias=bias)
        self.c_proj = nn.Linear(C, C, bias=bias)
        self.bf16 = False           # GPT.set_bf16_products
        self.fused = False          # with bf16: the fused attention's evaluation

    def forward(self, x, rope, bias):
        """x (B,T,C) -> (B,T,C). rope: (cos, sin) or None; bias: (H,T,T) or None."""
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head
        q, k, v = linear(self.c_attn, x, self.bf16).split(C, dim=2)
        q = q.view(B, T, H, D).transpose(1, 2)        # (B,H,T,D)
        k = k.view(B, T, H, D).transpose(1, 2)
        v = v.view(B, T, H, D).transpose(1, 2)
        if rope is not None:
            q = apply_rope(q, *rope)
            k = apply_rope(k, *rope)
        if self.bf16:
            att = Bf16FusedAttention if self.fused else Bf16Attention
            y = att.apply(q, k, v, bias, 1.0 / math.sqrt(D)).transpose(1, 2).reshape(B, T, C)
            return linear(self.c_proj, y, self.bf16)
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))   # (B,H,T,T)
        if bias is not None:
            s = s + bias                                         # after the scaling
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        s = s.masked_fill(~causal, float("-inf"))
        p = F.softmax(s, dim=-1)
        y = (p @ v).transpose(1, 2).reshape(B, T, C)             # heads concatenated
        return linear(self.c_proj, y, self.bf16)


class MLP(nn.Module):
    """gpt2: c_proj(gelu(c_fc(x))), width 4C. llama: c_proj(silu(a) * u) with
    [a, u] = c_fc(x) split in two halves of F (SwiGLU), no biases."""
    def __init__(self, cfg):
        super().__init__()
        C, Fh = cfg.d_model, cfg.mlp_hidden
        self.llama = cfg.block == "llama"
        self.c_fc = nn.Linear(C, 2 * Fh if self.llama else Fh, bias=not self.llama)
        self.c_proj = nn.Linear(Fh, C, bias=not self.llama)
        self.gelu = nn.GELU(approximate="tanh")
        self.bf16 = False           # GPT.set_bf16_products

    def forward(self, x):
        h = linear(self.c_fc, x, self.bf16)
        if self.llama:
            a, u = h.chunk(2, dim=-1)
            h = F.silu(a) * u
        else:
            h = self.gelu(h)
        return linear(self.c_proj, h, self.bf16)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, over the last dim (block=llama)."""
    def __init__(self, C, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def norm(cfg):
    """The block's normalisation: LayerNorm (gpt2) or RMSNorm (llama), eps 1e-5."""
    return RMSNorm(cfg.d_model, eps=1e-5) if cfg.block == "llama" else nn.LayerNorm(cfg.d_model, eps=1e-5)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = norm(cfg)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = norm(cfg)
        self.mlp = MLP(cfg)

    def forward(self, x, rope, bias):
        x = x + self.attn(self.ln_1(x), rope, bias)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg.validate()
        C, H = cfg.d_model, cfg.n_head
        self.wte = nn.Parameter(torch.empty(cfg.vocab_size, C))
        if cfg.pos == "learned":
            self.wpe = nn.Parameter(torch.empty(cfg.block_size, C))
        if cfg.pos == "t5":
            self.rel_bias = nn.Parameter(torch.empty(cfg.t5_num_buckets, H))
        self.h = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = norm(cfg)
        self._tables = {}
        self.bf16 = False
        self.init_weights()

    def set_bf16_products(self, on=True, fused=False):
        """Every product in bf16 as the C program's precision=bf16 computes it:
        the linear layers' and the head's (Bf16Linear) and attention's
        (Bf16Attention, or with fused Bf16FusedAttention); everything else unchanged."""
        self.bf16 = on
        for m in self.modules():
            if isinstance(m, (CausalSelfAttention, MLP)):
                m.bf16 = on
            if isinstance(m, CausalSelfAttention):
                m.fused = fused
        return self

    def init_weights(self, seed=None):
        """GPT-2 style init, as the C program's (src/model/params.c): N(0, 0.02),
        residual projections N(0, 0.02/sqrt(2L)), wpe N(0, 0.01), biases 0,
        norm weights 1 (LayerNorm's bias 0), rel_bias 0. (Not part of the file format.)"""
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        std_res = 0.02 / math.sqrt(2 * self.cfg.n_layer)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
                    p.fill_(1.0)
                elif name.endswith(".bias") or name == "rel_bias":
                    p.zero_()
                else:
                    std = std_res if name.endswith("c_proj.weight") else 0.01 if name == "wpe" else 0.02
                    p.copy_(torch.randn(p.shape, generator=gen) * std)

    def _table(self, kind, T, dtype, device):
        """Fixed positional tables, cached per (kind, T, dtype, device)."""
        key = (kind, T, dtype, device)
        if key not in self._tables:
            cfg = self.cfg
            if kind == "rope":
                cos, sin = rope_cos_sin(T, cfg.rope_dims, cfg.rope_base, cfg.rope_scaling, cfg.rope_scaling_factor,
                                        cfg.rope_original_length or cfg.block_size, cfg.rope_yarn_beta_fast,
                                        cfg.rope_yarn_beta_slow)
                val = (cos.to(dtype=dtype, device=device), sin.to(dtype=dtype, device=device))
            elif kind == "sinusoidal":
                val = sinusoidal_table(T, cfg.d_model, cfg.sinusoidal_scale).to(dtype=dtype, device=device)
            elif kind == "t5":   # (T,T) long bucket index of n = i - j (0 where j > i: masked)
                lut = torch.tensor([t5_bucket(n, cfg.t5_num_buckets, cfg.t5_max_distance)
                                    for n in range(T)], dtype=torch.long)
                n = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).clamp(min=0)
                val = lut[n].to(device)
            elif kind == "alibi":  # (H,T,T): -m_h * (i - j), float64 then cast
                m = torch.tensor(alibi_slopes(cfg.n_head), dtype=torch.float64)
                n = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).clamp(min=0).double()
                val = (-m[:, None, None] * n[None]).to(dtype=dtype, device=device)
            self._tables[key] = val
        return self._tables[key]

    def forward(self, idx, targets=None):
        """idx (B,T) long -> logits (B,T,V), and the mean cross-entropy if targets given."""
        B, T = idx.shape
        cfg = self.cfg
        if cfg.pos == "learned" and T > cfg.block_size:
            raise ValueError(f"T ({T}) exceeds block_size ({cfg.block_size}) with learned positions")
        dtype, dev = self.wte.dtype, self.wte.device
        x = self.wte[idx]                                        # (B,T,C)
        if cfg.pos == "learned":
            x = x + self.wpe[:T]
        elif cfg.pos == "sinusoidal":
            x = x + self._table("sinusoidal", T, dtype, dev)
        rope = self._table("rope", T, dtype, dev) if cfg.pos == "rope" else None
        bias = None
        if cfg.pos == "t5":   # rel_bias[bucket(i-j), h] -> (H,T,T), one table for all layers
            bias = self.rel_bias[self._table("t5", T, dtype, dev)].permute(2, 0, 1)
        elif cfg.pos == "alibi":
            bias = self._table("alibi", T, dtype, dev)
        for block in self.h:
            x = block(x, rope, bias)
        logits = linear(self.wte, self.ln_f(x), self.bf16)      # tied head, no bias
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
        return logits, loss


def model_from_metadata(meta):
    """An (uninitialised-by-file) GPT built from a safetensors __metadata__ map."""
    return GPT(GPTConfig.from_metadata(meta))


def decay_param_names(model):
    """Names of the parameters AdamW decays, in model order: the C
    optimiser's rule (the weight_decay flag of src/model/params.c), wte and
    the weight matrices of the linear layers (attn.c_attn, attn.c_proj,
    mlp.c_fc, mlp.c_proj). Not decayed: biases, LayerNorm parameters and the
    positional schemes' own tensors (wpe, rel_bias)."""
    linear = {f"{name}.weight" for name, mod in model.named_modules() if isinstance(mod, nn.Linear)}
    return [n for n, _ in model.named_parameters() if n == "wte" or n in linear]


def adamw_param_groups(model, weight_decay):
    """torch.optim.AdamW parameter groups: decay_param_names at weight_decay,
    every other parameter at 0."""
    decay = set(decay_param_names(model))
    named = list(model.named_parameters())
    return [{"params": [p for n, p in named if n in decay], "weight_decay": weight_decay},
            {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0}]


# ----------------------------------------------------------------------------
# llm.c token files (docs/FORMAT.md, "Token files"): 256 int32 little-endian
# header words (magic, version, count, zeros), then count token ids.

TOKEN_HEADER_WORDS = 256
TOKEN_FORMATS = {20240520: (1, np.uint16), 20240801: (7, np.uint32)}   # magic -> (version, token type)


def read_tokens(path):
    """The token ids of an llm.c token file as a read-only memory-mapped
    numpy array (uint16 or uint32; convert slices with .astype(np.int64)).

    Checks as src/data/tokens.c does: a known magic, the version of that
    magic, a count >= 0 and a file size of exactly 1024 + count x (2 or 4)
    bytes. Raises ValueError("path: problem").
    """
    try:
        size = os.path.getsize(path)
        header = np.fromfile(path, dtype="<i4", count=TOKEN_HEADER_WORDS)
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror or e}") from None
    if header.size < TOKEN_HEADER_WORDS:
        raise ValueError(f"{path}: {size} bytes is too short for a token file "
                         f"({4 * TOKEN_HEADER_WORDS}-byte header)")
    magic, version, count = (int(x) for x in header[:3])
    if magic not in TOKEN_FORMATS:
        raise ValueError(f"{path}: bad magic {magic} (expected "
                         f"{' or '.join(map(str, TOKEN_FORMATS))}: not an llm.c token file)")
    want_version, token_type = TOKEN_FORMATS[magic]
    if version != want_version:
        raise ValueError(f"{path}: version {version} does not match magic {magic} (expected {want_version})")
    if count < 0:
        raise ValueError(f"{path}: negative token count {count}")
    dtype = np.dtype(token_type).newbyteorder("<")
    expect = 4 * TOKEN_HEADER_WORDS + count * dtype.itemsize
    if size != expect:
        raise ValueError(f"{path}: file is {size} bytes but the header's {count} tokens need {expect}")
    return np.memmap(path, dtype=dtype, mode="r", offset=4 * TOKEN_HEADER_WORDS, shape=(count,))


# ----------------------------------------------------------------------------
# safetensors (self-contained reader and writer)

# safetensors dtype name -> numpy type: the dtypes these scripts read and write.
ST_DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64,
             "U8": np.uint8, "U16": np.uint16}
_NP_TO_ST = {np.dtype(v): k for k, v in ST_DTYPES.items()}
# Read, not written: Hugging Face's half-precision weights, widened to float32
# exactly (every F16 and BF16 value is a float32; BF16 is a float32's top 16 bits).
HALF_DTYPES = {"F16": lambda raw: np.frombuffer(raw, "<f2").astype(np.float32),
               "BF16": lambda raw: (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)}


def st_dtype_name(dtype):
    """The safetensors name ("F32", ...) of a numpy or torch dtype; None if
    it has none here."""
    if isinstance(dtype, torch.dtype):
        try:
            dtype = torch.empty(0, dtype=dtype).numpy().dtype
        except TypeError:          # a torch dtype numpy lacks (bfloat16 ...)
            return None
    return _NP_TO_ST.get(np.dtype(dtype))


class SafetensorsError(ValueError):
    pass


def load_safetensors(path):
    """Reads a safetensors file -> (dict name -> torch tensor, metadata dict).

    Validates: header length inside the file, JSON object, known dtypes, each
    shape matching its byte range, ranges inside the data, non-overlapping and
    covering the data exactly. Raises SafetensorsError("path: problem").
    """
    def fail(msg):
        raise SafetensorsError(f"{path}: {msg}")
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        fail(e.strerror or str(e))
    if len(blob) < 8:
        fail("file too short for a safetensors header")
    (hlen,) = struct.unpack("<Q", blob[:8])
    if hlen > len(blob) - 8:
        fail(f"header length {hlen} exceeds the file size {len(blob)}")
    try:
        header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        fail(f"header is not valid JSON ({e})")
    if not isinstance(header, dict):
        fail("header is not a JSON object")
    meta = header.pop("__metadata__", {}) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        fail("__metadata__ is not a map of strings")
    data = memoryview(blob)[8 + hlen:]
    tensors, ranges = {}, []
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], list(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            fail(f"tensor '{name}': malformed header entry")
        if dtype not in ST_DTYPES and dtype not in HALF_DTYPES:
            fail(f"tensor '{name}': unsupported dtype '{dtype}'")
        if not all(isinstance(s, int) and s >= 0 for s in shape) or \
           not isinstance(begin, int) or not isinstance(end, int):
            fail(f"tensor '{name}': bad shape or offsets")
        itemsize = 2 if dtype in HALF_DTYPES else np.dtype(ST_DTYPES[dtype]).itemsize
        nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize
        if not 0 <= begin <= end <= len(data):
            fail(f"tensor '{name}': data range [{begin}, {end}) outside the data ({len(data)} bytes)")
        if end - begin != nbytes:
            fail(f"tensor '{name}': shape {shape} needs {nbytes} bytes, range has {end - begin}")
        if dtype in HALF_DTYPES:
            tensors[name] = torch.from_numpy(HALF_DTYPES[dtype](data[begin:end]).reshape(shape).copy())
        else:
            arr = np.frombuffer(data[begin:end], dtype=np.dtype(ST_DTYPES[dtype]).newbyteorder("<")).reshape(shape)
            tensors[name] = torch.from_numpy(arr.astype(arr.dtype.newbyteorder("="), copy=True))
        ranges.append((begin, end, name))
    pos = 0
    for begin, end, name in sorted(ranges):
        if begin != pos:
            fail(f"tensor '{name}': data range starts at {begin}, expected {pos} "
                 "(gap or overlap)")
        pos = end
    if pos != len(data):
        fail(f"data is {len(data)} bytes but the tensors cover {pos}")
    return tensors, dict(meta)


def save_safetensors(path, tensors, metadata=None):
    """Writes tensors (dict name -> torch tensor or numpy array) and string
    metadata as safetensors, atomically (a unique PATH.tmp.XXXXXX, fsync, rename)."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        arr = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        st_name = st_dtype_name(arr.dtype)
        if st_name is None:
            raise SafetensorsError(f"{path}: tensor '{name}': unsupported dtype {arr.dtype}")
        raw = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": st_name, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)          # pad so the data starts 8-byte aligned
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=os.path.dirname(path) or ".")
    with os.fdopen(fd, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for c in chunks:
            f.write(c)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
