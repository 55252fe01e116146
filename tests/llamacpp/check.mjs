// check.mjs: runs an exported GGUF model in llama.cpp (through node-llama-cpp,
// pinned by package-lock.json) and prints what llama.cpp computes, as JSON,
// for tests/llamacpp_check.c to compare with ropelab. No comparison here:
// this is only a client.
//
//   node tests/llamacpp/check.mjs REQUEST.json > RESPONSE.json
//
// REQUEST: {"model": "m.gguf", "context": 256, "n_vocab": V,
//           "tokenize": ["text", ...],                     llama.cpp's ids of each text (no bos)
//           "generate": [{"tokens": [...], "n": 64}, ...], greedy continuation (temperature 0)
//           "score": [{"tokens": [...], "from": k}, ...]}   the next-token log-probabilities
//                                                           at every position >= k of the sequence
//                                                           ("targets": true: only that of the token
//                                                           that follows, positions k .. n-2)
// RESPONSE: {"n_vocab": V, "tokenize": [[ids]...], "generate": [[ids]...],
//            "score": [[[V log-probs] (or one) per position] per sequence]}
//
// Settings that keep llama.cpp's arithmetic in float32 where it has a choice:
// KV cache F32 (its default F16 rounds every cached key and value), flash
// attention off; one thread, so sums run in one order. What stays: ggml's
// GELU reads a float16 table (tests/README.md derives the tolerance from it).
// node-llama-cpp exposes no logits, only probabilities: softmax(logits) in
// float (greedy sampling leaves the logits as they are), so log-probabilities
// are compared, which are logits up to a constant.
import {readFileSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const request = JSON.parse(readFileSync(process.argv[2], "utf8"));
// build "never": the prebuilt binaries of the lock file or nothing; never a download or a compile
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: request.model});
const context = await model.createContext({
    contextSize: request.context, batchSize: request.context, sequences: 1, threads: 1,
    flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"});
const sequence = context.getSequence();
const V = request.n_vocab;   // the exporter wrote V tokens; every probability map has V entries

function logProbs(probabilities) {   // Map token -> probability, to a dense array of log-probabilities
    const out = new Array(V).fill(-1e30);
    if (probabilities.size !== V) throw new Error(`${probabilities.size} probabilities for ${V} tokens`);
    for (const [token, p] of probabilities) out[token] = p > 0 ? Math.log(p) : -1e30;
    return out;
}

const response = {n_vocab: V, tokenize: [], generate: [], score: []};
for (const text of request.tokenize ?? []) response.tokenize.push(Array.from(model.tokenize(text, false)));
for (const g of request.generate ?? []) {
    await sequence.clearHistory();
    const ids = [];
    for await (const token of sequence.evaluate(g.tokens, {temperature: 0, yieldEogToken: true})) {
        ids.push(token);
        if (ids.length >= g.n) break;
    }
    response.generate.push(ids);
}
for (const s of request.score ?? []) {
    await sequence.clearHistory();
    // targets: the last token is only a target, not evaluated (the context holds n - 1)
    const last = s.targets ? s.tokens.length - 1 : s.tokens.length;
    const input = s.tokens.slice(0, last).map((token, i) => i >= s.from
        ? [token, {generateNext: {probabilities: true, options: {temperature: 0}}}] : token);
    const results = await sequence.controlledEvaluate(input);
    const rows = [];
    for (let i = s.from; i < last; i++) {
        const row = logProbs(results[i].next.probabilities);
        rows.push(s.targets ? row[s.tokens[i + 1]] : row);
    }
    response.score.push(rows);
}
process.stdout.write(JSON.stringify(response));
await llama.dispose();
