// hf_tokenize.mjs: the tokenizer of a Hugging Face export (./export --format hf
// DIR: tokenizer.json, tokenizer_config.json) run by Hugging Face's own
// tokenizer code in JavaScript, tokenizers.js (@huggingface/tokenizers, pinned
// by package-lock.json), and printed as JSON for tests/llamacpp_check.c to
// compare with ropelab. No comparison here: this is only a client.
//
//   node tests/llamacpp/hf_tokenize.mjs REQUEST.json > RESPONSE.json
//
// REQUEST:  {"dir": "DIR", "tokenize": ["text", ...],   the ids of each text
//            "tokenize_special": ["text", ...],         the same with the special tokens the
//                                                       post-processor adds
//            "decode": [[ids], ...]}                    the text of each id sequence
// RESPONSE: {"tokenize": [[ids]...], "tokenize_special": [[ids]...], "decode": ["text"...]}
import {readFileSync} from "node:fs";
import {Tokenizer} from "@huggingface/tokenizers";

const request = JSON.parse(readFileSync(process.argv[2], "utf8"));
const json = name => JSON.parse(readFileSync(`${request.dir}/${name}`, "utf8"));
const tokenizer = new Tokenizer(json("tokenizer.json"), json("tokenizer_config.json"));
const ids = (text, special) => Array.from(tokenizer.encode(text, {add_special_tokens: special}).ids, Number);
const response = {
    tokenize: (request.tokenize ?? []).map(text => ids(text, false)),
    tokenize_special: (request.tokenize_special ?? []).map(text => ids(text, true)),
    decode: (request.decode ?? []).map(seq => tokenizer.decode(seq)),
};
process.stdout.write(JSON.stringify(response));
