#!/usr/bin/python3
"""test_torch_model.py: checks scripts/torch/torch_model.py against the contract.

The main check is an independent float64 NumPy forward pass written as plain
loops straight from docs/FORMAT.md (explicit 2x2 rotations, per-(i, j)
scores and biases): the PyTorch model's loss must agree to 1e-10 for every
scheme. Further tests pin the scheme tables to values from the papers
(docs/REFERENCES.md), causality, the parameter names, the safetensors
reader/writer and the token-file reader, and hold the facts shared with the C
program to it: the defaults of every model key (parsed from `./train --help`;
build it with `make` first) and which parameters AdamW decays.
Run: /usr/bin/python3 tests/test_torch_model.py
"""

import dataclasses
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "scripts", "torch"))   # torch_model.py
import torch_model as tm  # noqa: E402

# ALiBi slopes of the paper's get_slopes, written out by hand.
ALIBI_H6 = [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]


def loop_reference_loss(cfg, P, tokens, targets, alibi_slopes):
    """Mean cross-entropy of the contract model, float64 loops, no PyTorch."""
    B, T = tokens.shape
    C, H = cfg.d_model, cfg.n_head
    D, R = C // H, cfg.rope_dims

    def ln(x, w, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * w + b

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    def rotate(u, m):
        out = u.copy()
        for i in range(R // 2):
            th = m * cfg.rope_base ** (-2 * i / R)
            rot = np.array([[math.cos(th), -math.sin(th)], [math.sin(th), math.cos(th)]])
            out[2 * i:2 * i + 2] = rot @ u[2 * i:2 * i + 2]
        return out

    def bias(h, n):
        if cfg.pos == "alibi":
            return -alibi_slopes[h] * n
        if cfg.pos == "t5":
            nb, md = cfg.t5_num_buckets, cfg.t5_max_distance
            e = nb // 2
            bucket = n if n < e else min(nb - 1, e + int(np.floor(np.log(n / e) / np.log(md / e) * (nb - e))))
            return P["rel_bias"][bucket, h]
        return 0.0

    x = P["wte"][tokens].copy()
    for t in range(T):
        if cfg.pos == "learned":
            x[:, t] += P["wpe"][t]
        if cfg.pos == "sinusoidal":
            for i in range(C // 2):
                x[:, t, 2 * i] += cfg.sinusoidal_scale * math.sin(t / 10000 ** (2 * i / C))
                x[:, t, 2 * i + 1] += cfg.sinusoidal_scale * math.cos(t / 10000 ** (2 * i / C))
    for layer in range(cfg.n_layer):
        p = lambda name: P[f"h.{layer}.{name}"]  # noqa: E731
        qkv = ln(x, p("ln_1.weight"), p("ln_1.bias")) @ p("attn.c_attn.weight").T + p("attn.c_attn.bias")
        y = np.zeros((B, T, C))
        for b in range(B):
            for h in range(H):
                q = qkv[b, :, h * D:(h + 1) * D]
                k = qkv[b, :, C + h * D:C + (h + 1) * D]
                v = qkv[b, :, 2 * C + h * D:2 * C + (h + 1) * D]
                if cfg.pos == "rope":
                    q = np.stack([rotate(q[m], m) for m in range(T)])
                    k = np.stack([rotate(k[m], m) for m in range(T)])
                for i in range(T):
                    s = np.array([q[i] @ k[j] / math.sqrt(D) + bias(h, i - j) for j in range(i + 1)])
                    w = np.exp(s - s.max())
                    y[b, i, h * D:(h + 1) * D] = (w / w.sum()) @ v[:i + 1]
        x = x + y @ p("attn.c_proj.weight").T + p("attn.c_proj.bias")
        hid = gelu(ln(x, p("ln_2.weight"), p("ln_2.bias")) @ p("mlp.c_fc.weight").T + p("mlp.c_fc.bias"))
        x = x + hid @ p("mlp.c_proj.weight").T + p("mlp.c_proj.bias")
    logits = ln(x, P["ln_f.weight"], P["ln_f.bias"]) @ P["wte"].T
    logits = logits - logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -np.mean(np.take_along_axis(logp, targets[..., None], -1))


def random_model(cfg, seed):
    torch.manual_seed(seed)
    model = tm.GPT(cfg).double()
    with torch.no_grad():   # large enough that positions change the scores a lot
        for name, prm in model.named_parameters():
            r = torch.randn(prm.shape, dtype=torch.float64)
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
                prm.copy_(1 + 0.2 * r)
            elif name.endswith(".bias"):
                prm.copy_(0.1 * r)
            elif prm.dim() == 2 and name not in ("wte", "wpe", "rel_bias"):
                prm.copy_(r / math.sqrt(prm.shape[1]))
            else:
                prm.copy_(r)
    return model


CASES = {
    "rope": dict(pos="rope"),
    "rope-partial": dict(pos="rope", rope_dims=4, rope_base=300.0),
    "learned": dict(pos="learned"),
    "sinusoidal": dict(pos="sinusoidal"),
    "sinusoidal-scaled": dict(pos="sinusoidal", sinusoidal_scale=0.125),
    "t5": dict(pos="t5", t5_num_buckets=6, t5_max_distance=9),
    "alibi": dict(pos="alibi"),
    "alibi-H6": dict(pos="alibi", n_head=6, d_model=36),
    "none": dict(pos="none"),
}


class TestAgainstLoopReference(unittest.TestCase):
    def test_loss_matches_loops(self):
        for label, over in CASES.items():
            with self.subTest(scheme=label):
                kw = dict(n_layer=2, n_head=4, d_model=32, vocab_size=23, block_size=16)
                kw.update(over)
                cfg = tm.GPTConfig(**kw).validate()
                model = random_model(cfg, seed=7)
                g = torch.Generator().manual_seed(3)
                tok = torch.randint(0, cfg.vocab_size, (2, 13), generator=g)
                inputs, targets = tok[:, :-1], tok[:, 1:]
                _, loss = model(inputs, targets)
                P = {n: p.detach().numpy() for n, p in model.named_parameters()}
                slopes = ALIBI_H6 if cfg.n_head == 6 else [2 ** (-8 * (h + 1) / cfg.n_head)
                                                          for h in range(cfg.n_head)]
                ref = loop_reference_loss(cfg, P, inputs.numpy(), targets.numpy(), slopes)
                self.assertAlmostEqual(loss.item() / ref, 1.0, delta=1e-10,
                                       msg=f"{label}: torch {loss.item()} loops {ref}")


class TestSchemeTables(unittest.TestCase):
    def test_t5_bucket_boundaries_of_hugging_face(self):
        want = {0: 0, 15: 15, 16: 16, 18: 16, 19: 17, 24: 19, 31: 21, 40: 23, 52: 25,
                67: 27, 87: 29, 99: 30, 112: 30, 113: 31, 1000: 31}
        for n, b in want.items():
            self.assertEqual(tm.t5_bucket(n, 32, 128), b, f"n={n}")

    def test_alibi_slopes(self):
        np.testing.assert_allclose(tm.alibi_slopes(8), [2.0 ** -(h + 1) for h in range(8)])
        np.testing.assert_allclose(tm.alibi_slopes(4), [2.0 ** (-2 * (h + 1)) for h in range(4)])
        np.testing.assert_allclose(tm.alibi_slopes(6), ALIBI_H6)
        # 12 heads: the 8 slopes 2^-1..2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
        np.testing.assert_allclose(tm.alibi_slopes(12), [2.0 ** -(h + 1) for h in range(8)] +
                                   [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5])

    def test_rope_rotates_adjacent_pairs(self):
        D, R, base = 8, 6, 10000.0
        cos, sin = tm.rope_cos_sin(3, R, base)
        u = torch.zeros(1, 1, 3, D, dtype=torch.float64)
        u[..., 0] = 1.0          # e_0: stays in the (0, 1) plane
        u[..., 7] = 5.0          # dim 7 >= R passes through
        out = tm.apply_rope(u, cos, sin)[0, 0]
        for m in range(3):
            self.assertAlmostEqual(out[m, 0].item(), math.cos(m))   # theta_0 = 1
            self.assertAlmostEqual(out[m, 1].item(), math.sin(m))
            self.assertEqual(out[m, 2:7].abs().max().item(), 0.0)
            self.assertEqual(out[m, 7].item(), 5.0)
        u = torch.zeros(1, 1, 3, D, dtype=torch.float64)
        u[..., 4] = 1.0          # pair i = 2: theta_2 = base^(-4/6)
        out = tm.apply_rope(u, cos, sin)[0, 0]
        th = base ** (-4 / 6)
        self.assertAlmostEqual(out[2, 4].item(), math.cos(2 * th))
        self.assertAlmostEqual(out[2, 5].item(), math.sin(2 * th))

    def test_rope_scores_depend_on_distance_only(self):
        T, D = 20, 16
        cos, sin = tm.rope_cos_sin(T, D, 10000.0)
        q = torch.randn(D, dtype=torch.float64).expand(1, 1, T, D)
        k = torch.randn(D, dtype=torch.float64).expand(1, 1, T, D)
        s = (tm.apply_rope(q, cos, sin) @ tm.apply_rope(k, cos, sin).transpose(-1, -2))[0, 0]
        for n in range(T):   # every diagonal i - j = n is constant
            d = torch.diagonal(s, -n)
            self.assertLess((d - d[0]).abs().max().item(), 1e-12)

    def test_sinusoidal_values(self):
        C = 10
        pe = tm.sinusoidal_table(5, C)
        self.assertTrue(torch.equal(pe[0], torch.tensor([0.0, 1.0] * 5, dtype=torch.float64)))
        self.assertAlmostEqual(pe[1, 0].item(), math.sin(1.0))
        self.assertAlmostEqual(pe[1, 1].item(), math.cos(1.0))
        self.assertAlmostEqual(pe[4, 8].item(), math.sin(4 / 10000 ** (8 / C)))
        self.assertAlmostEqual(pe[4, 9].item(), math.cos(4 / 10000 ** (8 / C)))


class TestModel(unittest.TestCase):
    def test_state_dict_names_are_the_contract_names(self):
        per_layer = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                     "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                     "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]
        for pos in tm.POS_KINDS:
            cfg = tm.GPTConfig(2, 2, 8, 11, 7, pos=pos)
            sd = tm.GPT(cfg).state_dict()
            want = {"wte": [11, 8], "ln_f.weight": [8], "ln_f.bias": [8]}
            if pos == "learned":
                want["wpe"] = [7, 8]
            if pos == "t5":
                want["rel_bias"] = [32, 2]
            shapes = {"ln_1.weight": [8], "ln_1.bias": [8], "attn.c_attn.weight": [24, 8],
                      "attn.c_attn.bias": [24], "attn.c_proj.weight": [8, 8], "attn.c_proj.bias": [8],
                      "ln_2.weight": [8], "ln_2.bias": [8], "mlp.c_fc.weight": [32, 8],
                      "mlp.c_fc.bias": [32], "mlp.c_proj.weight": [8, 32], "mlp.c_proj.bias": [8]}
            for layer in range(2):
                for n in per_layer:
                    want[f"h.{layer}.{n}"] = shapes[n]
            self.assertEqual({k: list(v.shape) for k, v in sd.items()}, want, pos)

    def test_causal(self):
        for pos in tm.POS_KINDS:
            cfg = tm.GPTConfig(2, 4, 16, 13, 10, pos=pos)
            model = random_model(cfg, seed=1)
            tok = torch.randint(0, 13, (2, 10))
            tok2 = tok.clone()
            tok2[:, 6:] = (tok2[:, 6:] + 1) % 13
            a, _ = model(tok)
            b, _ = model(tok2)
            self.assertLess((a[:, :6] - b[:, :6]).abs().max().item(), 1e-12, pos)
            self.assertGreater((a[:, 6:] - b[:, 6:]).abs().max().item(), 1e-3, pos)

    def test_wpe_rows_beyond_T_get_no_gradient(self):
        cfg = tm.GPTConfig(1, 2, 8, 11, 16, pos="learned")
        model = random_model(cfg, seed=2)
        tok = torch.randint(0, 11, (2, 9))
        model(tok[:, :-1], tok[:, 1:])[1].backward()
        self.assertGreater(model.wpe.grad[:8].abs().min().item(), 0.0)
        self.assertEqual(model.wpe.grad[8:].abs().max().item(), 0.0)

    def test_learned_rejects_T_beyond_block_size(self):
        model = tm.GPT(tm.GPTConfig(1, 2, 8, 11, 4, pos="learned"))
        with self.assertRaises(ValueError):
            model(torch.zeros(1, 5, dtype=torch.long))

    def test_config_validation_and_metadata(self):
        with self.assertRaises(ValueError):
            tm.GPTConfig(1, 3, 8, 11, 4).validate()              # 8 % 3
        with self.assertRaises(ValueError):
            tm.GPTConfig(1, 2, 8, 11, 4, rope_dims=3).validate()  # odd
        with self.assertRaises(ValueError):
            tm.GPTConfig(1, 2, 8, 11, 4, pos="xpos").validate()
        with self.assertRaises(ValueError):
            tm.GPTConfig(1, 2, 8, 0, 4).validate()               # vocab_size not set
        cfg = tm.GPTConfig(2, 2, 8, 11, 4, pos="t5", rope_base=500.0).validate()
        meta = cfg.to_metadata()
        self.assertEqual(meta["rope_dims"], "4")
        self.assertTrue(all(isinstance(v, str) for v in meta.values()))
        self.assertEqual(tm.GPTConfig.from_metadata(meta), cfg)
        self.assertEqual(tm.GPTConfig.from_metadata({**meta, "rope_base": "10000"}).rope_base, 10000.0)
        # a file written before sinusoidal_scale existed means the unscaled table
        old = {k: v for k, v in meta.items() if k != "sinusoidal_scale"}
        self.assertEqual(tm.GPTConfig.from_metadata(old).sinusoidal_scale, 1.0)

    def test_scheme_rules_apply_to_their_scheme_only(self):
        # head_dim 3: odd, fine for every scheme but rope with rope_dims 0
        for pos in tm.POS_KINDS:
            if pos != "rope":
                self.assertEqual(tm.GPTConfig(1, 3, 9, 11, 4, pos=pos).validate().rope_dims, 3, pos)
        with self.assertRaises(ValueError):
            tm.GPTConfig(1, 3, 9, 11, 4, pos="rope").validate()
        self.assertEqual(tm.GPTConfig(1, 3, 9, 11, 4, pos="rope", rope_dims=2).validate().rope_dims, 2)
        with self.assertRaises(ValueError):
            tm.GPTConfig(1, 2, 8, 11, 4, pos="rope", rope_dims=6).validate()   # > head_dim 4
        tm.GPTConfig(1, 2, 8, 11, 4, pos="learned", rope_dims=6).validate()
        # t5's rule: t5_max_distance > t5_num_buckets/2, for t5 only
        with self.assertRaises(ValueError):
            tm.GPTConfig(1, 2, 8, 11, 4, pos="t5", t5_num_buckets=32, t5_max_distance=16).validate()
        tm.GPTConfig(1, 2, 8, 11, 4, pos="t5", t5_num_buckets=32, t5_max_distance=17).validate()
        tm.GPTConfig(1, 2, 8, 11, 4, pos="rope", t5_num_buckets=32, t5_max_distance=16).validate()
        # single-key ranges are the C table's, not re-checked here
        tm.GPTConfig(1, 2, 8, 11, 4, pos="rope", rope_base=0.5).validate()


def train_help():
    """`./train --help` of the build in the repository root, or None if ./train is absent."""
    exe = os.path.join(ROOT, "train")
    if not os.access(exe, os.X_OK):
        return None
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"./train --help exited with {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def help_model_keys(text):
    """{key: (type, default text, help line)} of the [model] and [positions] sections."""
    keys, section = {}, None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^\[(\w+)\]\s*$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^  (\w+)\s+(\w+)\s+\((.*?)\)", line)
        if m and section in ("model", "positions"):
            help_line = lines[i + 1].strip() if i + 1 < len(lines) else ""
            keys[m.group(1)] = (m.group(2), m.group(3), help_line)
    return keys


class TestSameAsTheCProgram(unittest.TestCase):
    """Facts whose one home is the C program: the model keys' defaults (the
    table in src/model/config.c, printed by ./train --help) and the rule of
    which parameters AdamW decays (src/model/params.c)."""

    def test_defaults_are_the_c_tables(self):
        text = train_help()
        if text is None:
            msg = "skipped: ./train is absent (run make first): model-key defaults not compared with C"
            print("\n" + msg, file=sys.stderr)
            self.skipTest(msg)
        keys = help_model_keys(text)
        self.assertIn("n_layer", keys, "no [model] keys found in ./train --help")
        self.assertIn("rope_base", keys, "no [positions] keys found in ./train --help")
        field_defaults = {f.name: f.default for f in dataclasses.fields(tm.GPTConfig)}
        for name, (kind, default, _) in keys.items():
            with self.subTest(key=name):
                self.assertIn(name, field_defaults, f"C model key '{name}' is not a GPTConfig field")
                ours = field_defaults[name]
                if kind == "int":
                    self.assertEqual(ours, int(default))
                elif kind == "float":
                    self.assertEqual(ours, float(default))
                elif kind in ("scheme", "choice"):
                    self.assertEqual(ours, default)
                else:
                    self.fail(f"unknown key type '{kind}'")
        # every other field is vocab_size, which comes from the tokenizer (0 = not set, as in C)
        self.assertEqual(set(field_defaults) - set(keys), {"vocab_size"})
        self.assertEqual(field_defaults["vocab_size"], 0)
        # rope_dims 0 = head_dim on both sides; sinusoidal_scale 0.02
        self.assertIn("0 = head_dim", keys["rope_dims"][2])
        self.assertEqual(tm.GPTConfig(vocab_size=11).validate().rope_dims, 128 // 4)
        self.assertEqual(tm.GPTConfig().sinusoidal_scale, 0.02)

    def test_decay_is_wte_and_linear_weights_only(self):
        linear = ["attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"]
        want = ["wte"] + [f"h.{layer}.{n}" for layer in range(2) for n in linear]
        for pos in tm.POS_KINDS:
            with self.subTest(pos=pos):
                model = tm.GPT(tm.GPTConfig(2, 2, 8, 11, 7, pos=pos))
                names = tm.decay_param_names(model)
                self.assertEqual(names, want)
                self.assertNotIn("wpe", names)
                self.assertNotIn("rel_bias", names)
                decay, no_decay = tm.adamw_param_groups(model, 0.1)
                self.assertEqual((decay["weight_decay"], no_decay["weight_decay"]), (0.1, 0.0))
                by_id = {id(p): n for n, p in model.named_parameters()}
                self.assertEqual([by_id[id(p)] for p in decay["params"]], want)
                self.assertEqual(len(decay["params"]) + len(no_decay["params"]),
                                 len(list(model.parameters())))
                if pos in ("learned", "t5"):
                    own = "wpe" if pos == "learned" else "rel_bias"
                    self.assertIn(own, [by_id[id(p)] for p in no_decay["params"]])


class TestTokenFiles(unittest.TestCase):
    @staticmethod
    def write(path, magic, version, count, tokens, dtype):
        header = np.zeros(256, dtype="<i4")
        header[:3] = (magic, version, count)
        with open(path, "wb") as f:
            f.write(header.tobytes() + np.asarray(tokens, dtype=dtype).tobytes())

    def test_reads_both_widths(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.bin")
            for magic, version, dtype, top in ((20240520, 1, "<u2", 65535), (20240801, 7, "<u4", 70000)):
                self.write(path, magic, version, 4, [0, 5, 1, top], dtype)
                got = tm.read_tokens(path)
                self.assertEqual(got.astype(np.int64).tolist(), [0, 5, 1, top])
                del got
            self.write(path, 20240520, 1, 0, [], "<u2")
            self.assertEqual(tm.read_tokens(path).size, 0)

    def test_rejects_bad_files(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.bin")
            cases = [((20240521, 1, 2, [1, 2], "<u2"), "bad magic"),
                     ((20240520, 7, 2, [1, 2], "<u2"), "version"),
                     ((20240801, 1, 2, [1, 2], "<u4"), "version"),
                     ((20240520, 1, -1, [1, 2], "<u2"), "negative"),
                     ((20240520, 1, 3, [1, 2], "<u2"), "need"),
                     ((20240801, 7, 2, [1, 2], "<u2"), "need")]
            for args, what in cases:
                self.write(path, *args)
                with self.assertRaises(ValueError) as cm:
                    tm.read_tokens(path)
                self.assertTrue(str(cm.exception).startswith(path + ": "), str(cm.exception))
                self.assertIn(what, str(cm.exception))
            with open(path, "wb") as f:
                f.write(b"\0" * 100)
            with self.assertRaisesRegex(ValueError, "too short"):
                tm.read_tokens(path)
            with self.assertRaisesRegex(ValueError, "^" + re.escape(os.path.join(d, "missing.bin")) + ": "):
                tm.read_tokens(os.path.join(d, "missing.bin"))


class TestSafetensors(unittest.TestCase):
    def test_round_trip_and_layout(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.safetensors")
            t = {"a": torch.randn(3, 5), "b": torch.arange(7, dtype=torch.int32)}
            tm.save_safetensors(path, t, {"pos": "rope"})
            got, meta = tm.load_safetensors(path)
            self.assertEqual(meta, {"pos": "rope"})
            self.assertTrue(torch.equal(got["a"], t["a"]) and torch.equal(got["b"], t["b"]))
            with open(path, "rb") as f:
                blob = f.read()
            (n,) = struct.unpack("<Q", blob[:8])
            self.assertEqual(n % 8, 0)
            self.assertEqual(len(blob), 8 + n + 15 * 4 + 7 * 4)
            # raw bytes are little-endian float32 right after the header
            self.assertEqual(struct.unpack("<f", blob[8 + n:12 + n])[0], t["a"][0, 0].item())

    def test_rejects_gap_and_bad_shape(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.safetensors")
            for hdr, size in (({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, 12),
                              ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, 8),
                              ({"a": {"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]}}, 8)):
                h = __import__("json").dumps(hdr).encode()
                with open(path, "wb") as f:
                    f.write(struct.pack("<Q", len(h)) + h + bytes(size))
                with self.assertRaises(tm.SafetensorsError) as cm:
                    tm.load_safetensors(path)
                self.assertTrue(str(cm.exception).startswith(path + ": "))

    def test_half_dtypes_read_as_float32(self):
        """F16 and BF16 (Hugging Face's weights) come back as float32 of the same values: torch's own
        conversion of every 16-bit pattern but the NaNs."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "half.safetensors")
            bits = np.arange(65536, dtype="<u2")
            h = __import__("json").dumps({"h": {"dtype": "F16", "shape": [65536], "data_offsets": [0, 131072]},
                                          "b": {"dtype": "BF16", "shape": [256, 256],
                                                "data_offsets": [131072, 262144]}}).encode()
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(h)) + h + bits.tobytes() + bits.tobytes())
            got, _ = tm.load_safetensors(path)
            for name, dtype, shape in (("h", torch.float16, (65536,)), ("b", torch.bfloat16, (256, 256))):
                want = torch.from_numpy(bits.view(np.int16).copy()).view(dtype).float().reshape(shape)
                self.assertEqual(got[name].dtype, torch.float32)
                finite = ~torch.isnan(want)
                self.assertTrue(torch.equal(got[name][finite], want[finite]))
                self.assertTrue(torch.isnan(got[name][~finite]).all())

    def test_dtype_names(self):
        for name, np_type in tm.ST_DTYPES.items():
            self.assertEqual(tm.st_dtype_name(np_type), name)
        self.assertEqual(tm.st_dtype_name(torch.float32), "F32")
        self.assertEqual(tm.st_dtype_name(torch.int64), "I64")
        self.assertIsNone(tm.st_dtype_name(torch.bfloat16))
        self.assertIsNone(tm.st_dtype_name(np.float16))


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main(verbosity=1)
