#!/usr/bin/env python3
"""handmade.py: writes the hand-made edge-case seeds of tests/fuzz/seeds/NAME/.

The real files (a trained checkpoint, ./prepare's outputs ...) are made by
tests/fuzz/make_seeds.sh into build/fuzz/seeds/; these are the small corner
cases next to them, committed. Run from anywhere: python3 tests/fuzz/seeds/handmade.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    os.makedirs(os.path.join(HERE, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(HERE, target, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- safetensors

def safetensors(tensors, meta=None, pad=True, order=None):
    """tensors: list of (name, dtype, shape, bytes); data laid out in `order`."""
    header, offset, blobs = {}, 0, []
    if meta is not None:
        header["__metadata__"] = meta
    for i in (order or range(len(tensors))):
        name, dtype, shape, blob = tensors[i]
        blobs.append((name, dtype, shape, offset, offset + len(blob)))
        offset += len(blob)
    for name, dtype, shape, b, e in sorted(blobs, key=lambda t: t[0]):
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    data = b"".join(tensors[i][3] for i in (order or range(len(tensors))))
    return struct.pack("<Q", len(h)) + h + data


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


put("safetensors", "empty-object.safetensors", struct.pack("<Q", 2) + b"{}")
put("safetensors", "metadata-only.safetensors", safetensors([], {"format": "pt", "step": "7"}))
put("safetensors", "dtypes.safetensors", safetensors([
    ("scalar", "F32", [], f32(1.5)),
    ("empty", "F32", [0], b""),
    ("zero-dim", "I64", [3, 0, 2], b""),
    ("i32", "I32", [2, 3], struct.pack("<6i", -1, 0, 1, 2**31 - 1, -2**31, 7)),
    ("i64", "I64", [2], struct.pack("<2q", -1, 2**62)),
    ("u8", "U8", [1, 1, 1, 5], b"\x00\x01\xfe\xff\x80"),
], {"format": "pt"}))
put("safetensors", "data-out-of-order.safetensors", safetensors([
    ("a", "F32", [2], f32(1, 2)), ("b", "U8", [3], b"xyz"), ("c", "F32", [1, 1], f32(3))],
    order=[2, 0, 1], pad=False))
put("safetensors", "unicode-names.safetensors", safetensors([
    ("caf\u00e9.\u03b8", "F32", [1], f32(0)), ("", "U8", [1], b"!")], {"\u00fc": "\u2014"}))

# ---------------------------------------------------------------- weights

def model(pos="none", n_layer=1, n_head=1, d_model=2, vocab=3, block=2, meta_extra=None, drop=()):
    """A whole weights file of the contract, small enough to read."""
    return safetensors(*model_tensors(pos, n_layer, n_head, d_model, vocab, block, meta_extra, drop))


def model_tensors(pos="none", n_layer=1, n_head=1, d_model=2, vocab=3, block=2, meta_extra=None, drop=()):
    """(tensors, metadata) of a weights file of the contract."""
    C = d_model
    meta = {"format": "pt", "pos": pos, "n_layer": str(n_layer), "n_head": str(n_head),
            "d_model": str(C), "vocab_size": str(vocab), "block_size": str(block),
            "rope_base": "10000", "rope_dims": str(C // n_head), "t5_num_buckets": "4",
            "t5_max_distance": "8", "sinusoidal_scale": "1"}
    meta.update(meta_extra or {})
    for k in drop:
        meta.pop(k, None)
    shapes = [("wte", [vocab, C])]
    if pos == "learned":
        shapes.append(("wpe", [block, C]))
    if pos == "t5":
        shapes.append(("rel_bias", [4, n_head]))
    for l in range(n_layer):
        for suffix, s in [("ln_1.weight", [C]), ("ln_1.bias", [C]), ("attn.c_attn.weight", [3 * C, C]),
                          ("attn.c_attn.bias", [3 * C]), ("attn.c_proj.weight", [C, C]),
                          ("attn.c_proj.bias", [C]), ("ln_2.weight", [C]), ("ln_2.bias", [C]),
                          ("mlp.c_fc.weight", [4 * C, C]), ("mlp.c_fc.bias", [4 * C]),
                          ("mlp.c_proj.weight", [C, 4 * C]), ("mlp.c_proj.bias", [C])]:
            shapes.append(("h.%d.%s" % (l, suffix), s))
    shapes += [("ln_f.weight", [C]), ("ln_f.bias", [C])]
    tensors = []
    for name, s in shapes:
        n = 1
        for d in s:
            n *= d
        tensors.append((name, "F32", s, f32(*[0.01 * (i % 7) for i in range(n)])))
    return tensors, meta


for pos in ["none", "rope", "learned", "sinusoidal", "t5", "alibi"]:
    put("weights", "smallest-%s.safetensors" % pos, model(pos))
put("weights", "no-sinusoidal-scale.safetensors", model("sinusoidal", drop=["sinusoidal_scale"]))
put("weights", "rope-dims-0.safetensors", model("rope", n_head=1, d_model=4, meta_extra={"rope_dims": "0"}))
put("weights", "two-layers-two-heads.safetensors", model("t5", n_layer=2, n_head=2, d_model=4))
put("safetensors", "smallest-t5.safetensors", model("t5"))

# ---------------------------------------------------------------- checkpoint

# The fixed tiny configuration of fuzz_checkpoint.c (its FUZZ_CKPT_* lines).
ckpt = {}
with open(os.path.join(HERE, "..", "fuzz_checkpoint.c")) as f:
    for line in f:
        if line.startswith("#define FUZZ_CKPT_"):
            _, key, value = line.split(None, 2)
            ckpt[key[len("FUZZ_CKPT_"):]] = value.strip().strip('"')
# checkpoint_load wants every model key of the file equal to the model's: the
# harness leaves the positional keys at their defaults (the key table, src/model/config.c).
defaults = {"rope_base": "10000", "t5_num_buckets": "32", "t5_max_distance": "128", "sinusoidal_scale": "0.02"}
tensors, meta = model_tensors(ckpt["POS"], int(ckpt["N_LAYER"]), int(ckpt["N_HEAD"]), int(ckpt["D_MODEL"]),
                              int(ckpt["VOCAB_SIZE"]), int(ckpt["BLOCK_SIZE"]), meta_extra=defaults)
moments = [("adamw.%s.%s" % (mv, name), dtype, shape, b"\0" * len(blob))
           for mv in "mv" for name, dtype, shape, blob in tensors]
meta.update(ropelab_checkpoint="1", step="3", data_rng="1 2 3 18446744073709551615", elapsed_s="1.5",
            config_hash=ckpt["HASH"][2:18])
put("checkpoint", "tiny-valid.safetensors", safetensors(tensors + moments, meta))
put("checkpoint", "no-tensors.safetensors", safetensors([], meta))
put("checkpoint", "weights-only.safetensors", safetensors(tensors, meta))

# ---------------------------------------------------------------- tokens

def tokens(magic, version, count, ids, width):
    header = struct.pack("<3i", magic, version, count) + b"\0" * (1024 - 12)
    return header + b"".join(struct.pack("<H" if width == 2 else "<I", t) for t in ids)


U16, U32 = (20240520, 1), (20240801, 7)
put("tokens", "empty-u16.bin", tokens(*U16, 0, [], 2))
put("tokens", "one-window-u16.bin", tokens(*U16, 6, [1, 2, 3, 4, 5, 299], 2))
put("tokens", "two-tokens-u16.bin", tokens(*U16, 2, [7, 8], 2))
put("tokens", "u32.bin", tokens(*U32, 12, list(range(12)), 4))
put("tokens", "u32-beyond-vocab.bin", tokens(*U32, 8, [0, 299, 300, 65535, 65536, 2**31, 2**32 - 1, 5], 4))
put("tokens", "u16-beyond-vocab.bin", tokens(*U16, 8, [0, 299, 300, 65535, 1, 2, 3, 4], 2))
put("tokens", "count-too-big.bin", tokens(*U16, 9, [1, 2, 3], 2))
put("tokens", "negative-count.bin", tokens(*U16, -1, [1, 2], 2))
put("tokens", "magic-version-swapped.bin", tokens(20240520, 7, 2, [1, 2], 2))

# ---------------------------------------------------------------- tokenizer

def tokenizer(merges, vocab=None, eot=None, n=None, version=1, magic=b"RLBPETOK", pretok=1):
    """version 2 has the pre-tokenizer after the five header fields (1: GPT-2's regex)"""
    vocab = 257 + len(merges) if vocab is None else vocab
    eot = vocab - 1 if eot is None else eot
    n = len(merges) if n is None else n
    rule = struct.pack("<I", pretok) if version == 2 else b""
    return (magic + struct.pack("<4I", version, vocab, eot, n) + rule
            + b"".join(struct.pack("<2I", *m) for m in merges))


# a chain of self-doubling merges up to the longest piece (256 bytes): accepted
doubling = [(97, 97)] + [(256 + i, 256 + i) for i in range(7)]
put("tokenizer", "longest-token-256.bin", tokenizer(doubling))
put("tokenizer", "utf8-merges.bin", tokenizer([(0xC3, 0xA9), (ord(" "), ord("t")), (257, ord("h")),
                                               (258, ord("e")), (0xE2, 0x80), (260, 0x94), (256, 256),
                                               (ord("1"), ord("1")), (263, 263), (ord("\n"), ord(" "))]))
put("tokenizer", "space-and-newline.bin", tokenizer([(32, 32), (256, 256), (10, 10), (13, 10), (9, 32)]))
put("tokenizer", "merge-refers-ahead.bin", tokenizer([(97, 98), (258, 97), (256, 97)]))
put("tokenizer", "repeated-pair.bin", tokenizer([(97, 98), (97, 98)]))
put("tokenizer", "eot-wrong.bin", tokenizer([(97, 98)], eot=5))
put("tokenizer", "size-mismatch.bin", tokenizer([(97, 98), (99, 100)], vocab=260, n=3))
# version 2, GPT-2's pre-tokenizer: merges of UTF-8, contractions and white space; a rule
# version 2 does not hold; the doubling chain of spaces (a long white-space piece encodes by the heap)
put("tokenizer", "gpt2-merges.bin", tokenizer([(0xC3, 0xA9), (ord("'"), ord("s")), (10, 10), (32, 32), (259, 259),
                                               (0xC2, 0xA0), (ord(" "), ord("t")), (262, ord("h"))], version=2))
put("tokenizer", "gpt2-rule-0.bin", tokenizer([(97, 98)], version=2, pretok=0))
put("tokenizer", "gpt2-spaces-256.bin", tokenizer([(32, 32)] + [(256 + i, 256 + i) for i in range(7)], version=2))

# ---------------------------------------------------------------- ini

put("ini", "bom-crlf.ini", "\ufeff[model]\r\nn_layer = 2\r\nn_head = 2\r\n[run]\r\nsteps = 5\r\n")
put("ini", "no-final-newline.ini", "[model]\nd_model = 64\n[positions]\npos = t5")
put("ini", "duplicate-key.ini", "[model]\nn_layer = 2\nn_layer = 3\n")
put("ini", "outside-section.ini", "n_layer = 2\n[model]\n")
put("ini", "wrong-section.ini", "[run]\nn_layer = 2\n")
put("ini", "unknown-section.ini", "[optimizer]\nlr = 0.1\n")
put("ini", "comments.ini", "; comment\n# also\n[optim] ; trailing\nlr = 0.01 ; inline\n\n  [run]  \n  seed = 18446744073709551615\n")
put("ini", "numbers.ini", "[optim]\nlr = 1e-3\nmin_lr = 0x0p0\nbeta1 = .5\neps = 1e-30\n[run]\nsteps = +7\nthreads = 0\n")
put("ini", "bad-numbers.ini", "[optim]\nlr = nan\n")
put("ini", "out-of-range.ini", "[model]\nn_layer = 2147483648\n")
put("ini", "empty-values.ini", "[data]\ntokenizer =\n")
put("ini", "long-value.ini", "[data]\ntokenizer = " + "x" * 3000 + "\n")
put("ini", "continuation.ini", "[run]\nout_dir = a\n  b\n")
put("ini", "unterminated-section.ini", "[model\nn_layer = 2\n")
put("ini", "checks.ini", "[model]\nd_model = 30\nn_head = 4\n[positions]\nrope_dims = 7\nt5_num_buckets = 64\nt5_max_distance = 3\n")
put("ini", "all-sections.ini", "[model]\nn_layer=1\nn_head=1\nd_model=8\nblock_size=16\n"
    "[positions]\npos=alibi\nrope_base=500\nrope_dims=2\nt5_num_buckets=8\nt5_max_distance=9\nsinusoidal_scale=0.5\n"
    "[data]\ntokenizer=t.bin\ntrain_file=a.bin\nval_file=b.bin\n"
    "[optim]\nlr=0.1\nmin_lr=0\nwarmup_steps=0\nbeta1=0\nbeta2=0.999999\neps=1\nweight_decay=10\ngrad_clip=0\nbatch_size=1\ngrad_accum=65536\n"
    "[run]\nsteps=1\neval_every=0\neval_batches=1\nsave_every=0\nseed=0\nthreads=4096\nout_dir=\n")

# ---------------------------------------------------------------- args (one argument per line)

put("args", "empty", "")
put("args", "dashes", "--\n-\n--=\n")
put("args", "missing-value", "--resume")
put("args", "resume-and-config", "--resume=runs/x\nconfigs/tiny.ini\n")
put("args", "resume-and-debug", "--debug-state=a.safetensors\n--resume\nb\n")
put("args", "two-configs", "configs/tiny.ini\nconfigs/small.ini\n")
put("args", "keys", "configs/small.ini\n--rope-dims=3\n--pos=t5\n--t5_num_buckets=8\n--lr=1e40\n--quiet\n--overwrite\n")
put("args", "unknown", "--no-such-key=1\n")
put("args", "no-equals", "--steps\n5\n")
put("args", "long-name", "--" + "k" * 200 + "=1\n")
put("args", "many-keys", "".join("--steps=%d\n" % i for i in range(300)))
put("args", "nul-separated", "configs/tiny.ini\0--seed=3\0--out_dir=\0--help")
