// engine.test.js: engine.js under Node's own test runner, against what the PyTorch package answers (fixtures.py).
//
//     python web/fixtures.py && node --test web/      (pytest runs both: web/test_node.py)
//
// $TNB_FIXTURES names another folder of fixtures (default: web/build/).
"use strict";
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { test } = require("node:test");

const transformerNb = require("./engine.js");

const FOLDER = process.env.TNB_FIXTURES || path.join(__dirname, "build");
const fixtures = JSON.parse(fs.readFileSync(path.join(FOLDER, "node-fixtures.json"), "utf8"));
const weightsOf = (name) => transformerNb.readWeightsScript(fs.readFileSync(path.join(FOLDER, name), "utf8"));
const weights = weightsOf("weights-int8.js");
const translator = transformerNb.createTranslator(weights);
const TOLERANCE = 1e-4;

// The largest difference between PyTorch's maps and the engine's: per kind, layer, head, row, column.
function largestMapDifference(want, got) {
  let worst = 0;
  for (const kind of ["encoder", "decoder_self", "cross"]) {
    assert.equal(got[kind].length, want[kind].length, kind);
    want[kind].forEach((layer, l) => layer.forEach((head, h) => head.forEach((row, i) => {
      assert.equal(got[kind][l][h][i].length, row.length, `${kind} layer ${l} head ${h} row ${i}`);
      row.forEach((w, j) => { worst = Math.max(worst, Math.abs(got[kind][l][h][i][j] - w)); });
    })));
  }
  return worst;
}

test("the engine reads the format Python writes, with Python's decoding defaults", () => {
  assert.equal(transformerNb.FORMAT, fixtures.format);
  assert.equal(weights.format, fixtures.format);
  assert.deepEqual(translator.decoding, fixtures.decoding);
});

test("the tokenizer gives Python's ids, and decodes them to Python's text, on every validation sentence", () => {
  const differ = fixtures.tokenizer.filter(([text, ids]) => JSON.stringify(translator.tokenizer.encode(text, true, true))
                                                          !== JSON.stringify(ids));
  assert.equal(differ.length, 0, `${differ.length} of ${fixtures.tokenizer.length} differ, first: ${differ[0]?.[0]}`);
  const decoded = fixtures.tokenizer.filter(([, ids, text]) => translator.tokenizer.decode(ids) !== text);
  assert.equal(decoded.length, 0, `${decoded.length} decode differently, first: ${decoded[0]?.[2]}`);
  assert.ok(fixtures.tokenizer.length > 2000);
});

test("greedy decoding gives PyTorch's tokens, and every attention map is within 1e-4 of attention_maps", () => {
  let worst = 0;
  for (const s of fixtures.sentences) {
    const r = translator.translate(s.text, { beam: 1, attention: true });
    assert.deepEqual(r.tokens, s.greedy, s.text);
    worst = Math.max(worst, largestMapDifference(s.attention, r.attention));
  }
  assert.ok(worst <= TOLERANCE, `largest attention difference ${worst}`);
});

test("beam search gives PyTorch's tokens and scores (the recipe's 5 / 1.2 and the paper's 4 / 0.6)", () => {
  for (const s of fixtures.sentences)
    for (const { beam, alpha, tokens, score } of s.beams) {
      const r = translator.translate(s.text, { beam, lengthPenalty: alpha });
      assert.deepEqual(r.tokens, tokens, `${s.text} (beam ${beam}, ${alpha})`);
      assert.ok(Math.abs(r.score - score) <= TOLERANCE, `score ${r.score} against ${score}`);
    }
});

test("by default a translation uses the weights' decoding defaults and draws no attention maps", () => {
  const s = fixtures.sentences[0], recipe = s.beams.find((b) => b.beam === fixtures.decoding.beam_size);
  const r = translator.translate(s.text);
  assert.deepEqual(r.tokens, recipe.tokens);
  assert.equal(r.attention, null);
  assert.equal(r.timing.attentionMs < 1, true);
});

test("two translators in one process are independent: another architecture beside the shipped model", () => {
  const other = transformerNb.createTranslator(weightsOf("variant-pre_norm-no_bias-untied.js"));
  assert.equal(other.config.pre_norm, true);
  assert.equal(other.config.bias, false);
  for (const s of fixtures.variant) {
    const r = other.translate(s.text, { beam: 1, attention: true });
    assert.deepEqual(r.tokens, s.greedy, s.text);
    assert.ok(largestMapDifference(s.attention, r.attention) <= TOLERANCE);
    assert.deepEqual(other.translate(s.text, { beam: 3, lengthPenalty: 1.2 }).tokens, s.beams[0].tokens);
  }
  const s = fixtures.sentences[0];                         // the first translator is untouched by the second
  assert.deepEqual(translator.translate(s.text, { beam: 1 }).tokens, s.greedy);
});

test("the WebAssembly kernel is nn.Linear to float32 rounding, for every count of rows and outputs; a row's " +
     "outputs do not depend on the rows beside it", () => {
  let seed = 1;                                            // a small deterministic generator (mulberry32)
  const random = () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5;
  };
  const values = (count) => Float32Array.from({ length: count }, random);
  const layers = [[8, 5, true], [12, 7, false], [256, 1024, true], [4, 1, true], [16, 6, false]].map(
    ([inFeatures, outFeatures, bias]) => ({ inFeatures, outFeatures, weight: values(inFeatures * outFeatures),
                                            bias: bias ? values(outFeatures) : null }));
  const kernel = transformerNb.internals.WasmLinear.create(layers);
  assert.ok(kernel, "this Node has WebAssembly SIMD");
  let worst = 0;
  for (const layer of layers)
    for (const rows of [1, 2, 3, 4, 5, 6, 8, 9, 11]) {
      const x = Array.from({ length: rows }, () => values(layer.inFeatures));
      const y = kernel.linear(x, layer);
      assert.equal(y.length, rows);
      x.forEach((row, r) => assert.deepEqual(kernel.linear([row], layer)[0], y[r], `row ${r} of ${rows}, alone`));
      x.forEach((row, r) => {
        assert.equal(y[r].length, layer.outFeatures);
        for (let o = 0; o < layer.outFeatures; o++) {               // the sum in float64, then the difference
          let want = layer.bias ? layer.bias[o] : 0;
          for (let j = 0; j < layer.inFeatures; j++) want += row[j] * layer.weight[o * layer.inFeatures + j];
          worst = Math.max(worst, Math.abs(y[r][o] - want) / (1 + Math.abs(want)));
        }
      });
    }
  assert.ok(worst < 1e-5, `largest difference ${worst}`);
  assert.equal(transformerNb.internals.WasmLinear.create([{ ...layers[0], inFeatures: 6 }]), null);   // not 4k
});

test("the translator's linear layers run in WebAssembly; in JavaScript they give the same tokens", () => {
  assert.equal(translator.kernel, "WebAssembly");
  const plain = transformerNb.createTranslator(weights, { webAssembly: false });
  assert.equal(plain.kernel, "JavaScript");
  for (const s of fixtures.sentences) {
    assert.deepEqual(plain.translate(s.text, { beam: 1 }).tokens, s.greedy, s.text);
    const recipe = s.beams.find((b) => b.beam === fixtures.decoding.beam_size);
    assert.deepEqual(plain.translate(s.text).tokens, recipe.tokens, s.text);
  }
});

test("bad input is refused with a message naming what was wrong", () => {
  const refused = (call, pattern) => assert.throws(call, (e) => pattern.test(e.message), String(pattern));
  refused(() => translator.translate(""), /empty or holds control characters/);
  refused(() => translator.translate("Hallo\x01 Welt"), /control characters/);
  refused(() => translator.translate("☃☃ ☃"), /no character the tokenizer knows/);
  refused(() => translator.translate("a ".repeat(5000)), /max_positions/);
  refused(() => translator.translate(42), /`text` must be a string/);
  refused(() => translator.translate("Ein Hund.", { beam: 0 }), /`beam` must be a positive integer/);
  refused(() => translator.translate("Ein Hund.", { lengthPenalty: -1 }), /`lengthPenalty`/);
  refused(() => transformerNb.readWeightsScript("console.log(1)"), /not a transformer_nb weights script/);
  refused(() => transformerNb.createTranslator({}), /not a transformer_nb weights object/);
  refused(() => transformerNb.createTranslator({ ...weights, format: "transformer_nb-web-1" }),
          /format transformer_nb-web-1.*export them again/);
});
