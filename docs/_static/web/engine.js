// engine.js: the transformer_nb German->English translator in JavaScript, for a web page and for Node.
//
// Each function is the twin of a piece of the PyTorch package (named in its comment), written out with loops instead
// of tensor operations, the linear layers' matrix products in a small WebAssembly kernel held in this file (section 3).
// No libraries and no build step: one file that a page loads with a plain <script> tag (which
// works from file:// as from a web server) and Node with require(). Either way it gives one object,
//
//     transformerNb = { createTranslator(weights, options), startWorker(weights, options), readWeightsScript(text),
//                       FORMAT, internals }
//
// `createTranslator` takes the object a weights script (written by transformer_nb.web.export_weights) assigns to
// `window.transformerNbWeights` and returns a translator; its `translate(text, {beam, lengthPenalty, attention})`
// returns {text, tokens, ...} and, when asked (`attention: true`), every attention map: attention.encoder /
// .decoder_self / .cross hold, per layer, one [len_q][len_k] array per head. The file keeps no state beyond one
// table it computes once (the value of every float16 bit pattern): each translator holds its model, so a page may
// hold several. `startWorker` runs the same translator in a Web
// Worker (its `translate` returns a Promise), so that the page stays responsive while it works.
//
// Numbers. PyTorch computes in float32. Here every stored activation and weight is a Float32Array (writing into one
// rounds to float32), while a single sum or product in flight is a JavaScript number (float64), except in the
// WebAssembly kernel of the linear layers (linear.wat), which adds in float32 four lanes at a time, and in attention's
// weighted sum of the values, which adds into a Float32Array. So results agree
// with PyTorch to float32 rounding, not bit for bit: the order in which PyTorch's kernels add numbers is not ours.
// Decisions made on numbers (argmax, top-k, comparisons of beam scores) are written exactly as decoding.py makes
// them, in float32 (Math.fround) where PyTorch's are float32.
(function (root, factory) {
  if (typeof module === "object" && module.exports) module.exports = factory();   // Node: require("./engine.js")
  else root.transformerNb = factory();                                             // a page: window.transformerNb
})(typeof self !== "undefined" ? self : globalThis, function engine() {
  "use strict";

  const f32 = Math.fround;                      // round a float64 to the nearest float32
  const FLOAT32_MIN = -3.4028234663852886e38;   // torch.finfo(torch.float32).min: the score of a masked key

  // =================================================================================================================
  // 1. Reading the weights script: base64 -> bytes -> float32 arrays (transformer_nb.web wrote them)
  // =================================================================================================================

  function base64ToBytes(text) {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text);   // recent browsers
    const binary = atob(text);                                                            // one char per byte
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }

  // IEEE 754 half precision -> float: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits.
  function halfToFloat(h) {
    const sign = h & 0x8000 ? -1 : 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    if (exponent === 0) return sign * mantissa * 2 ** -24;                       // zero and subnormals
    if (exponent === 31) return mantissa ? NaN : sign * Infinity;
    return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
  }

  // All 65,536 half-precision bit patterns, decoded once: then a float16 tensor is read by table look-up.
  let halfTable = null;
  function halfValues() {
    if (halfTable === null) {
      halfTable = new Float32Array(65536);
      for (let h = 0; h < 65536; h++) halfTable[h] = halfToFloat(h);
    }
    return halfTable;
  }

  // One tensor of the index as a Float32Array, dequantized: exactly transformer_nb.web's `browser_tensor`.
  // (Typed arrays read the platform's byte order; every browser in use is little-endian, as the file is.)
  function readTensor(entry, bytes) {
    const n = entry.shape.reduce((a, b) => a * b, 1), out = new Float32Array(n);
    if (entry.dtype === "float32") {
      out.set(new Float32Array(bytes.buffer, bytes.byteOffset + entry.offset, n));
    } else if (entry.dtype === "float16") {
      const half = new Uint16Array(bytes.buffer, bytes.byteOffset + entry.offset, n), table = halfValues();
      for (let i = 0; i < n; i++) out[i] = table[half[i]];                        // exact: every half is a float32
    } else if (entry.dtype === "int8") {                                          // w = q * scale, one scale per row
      const [rows, cols] = entry.shape;
      const q = new Int8Array(bytes.buffer, bytes.byteOffset + entry.offset, n);
      const scales = new Float32Array(bytes.buffer, bytes.byteOffset + entry.scales, rows);
      for (let r = 0; r < rows; r++)
        for (let c = 0; c < cols; c++) out[r * cols + c] = q[r * cols + c] * scales[r];   // rounded to float32
    } else {
      throw new Error(`unknown tensor dtype ${entry.dtype} for ${entry.name}`);
    }
    return out;
  }

  // The weights format this engine reads: transformer_nb.web.FORMAT (a test holds the two equal).
  const FORMAT = "transformer_nb-web-2";

  // The object a weights script assigns, from the script's text, for where no page runs it (Node, a test). The
  // script is `window.transformerNbWeights = {...};` with JSON between the braces.
  function readWeightsScript(text) {
    const start = text.indexOf("{"), end = text.lastIndexOf("}");
    if (!text.includes("transformerNbWeights") || start < 0 || end < start)
      throw new Error("not a transformer_nb weights script (written by transformer_nb.web.export_weights)");
    return JSON.parse(text.slice(start, end + 1));
  }

  // name -> Float32Array, for every name of model.state_dict(); tied names share one array.
  function readParameters(weights) {
    const bytes = base64ToBytes(weights.data), params = new Map();
    for (const entry of weights.tensors) params.set(entry.name, readTensor(entry, bytes));
    for (const [name, target] of Object.entries(weights.aliases)) params.set(name, params.get(target));
    return params;
  }

  // =================================================================================================================
  // 2. The tokenizer (tokenizer.py): pre-tokenize, byte-pair merges by rank, ids
  // =================================================================================================================

  const SPACE = "\u2581";   // '▁' marks a word that follows a space, as in SentencePiece

  // Python's `\w` is "a letter or a number or _" (categories L*, N*, and '_'), and `str.isspace()` is this exact
  // list of characters. JavaScript's own `\w` is ASCII only and its `\s` is another list (it has U+FEFF, lacks
  // U+001C-U+001F and U+0085), so both classes are spelled out.
  const WORD_CHARS = "\\p{L}\\p{N}_";
  const SPACE_CHARS = "\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
  const WORD = new RegExp(`[${WORD_CHARS}]+|[^${WORD_CHARS}${SPACE_CHARS}]`, "gu");   // \w+|[^\w\s]
  const IS_SPACE = new RegExp(`^[${SPACE_CHARS}]$`, "u");
  const STRIP = new RegExp(`^[${SPACE_CHARS}]+|[${SPACE_CHARS}]+$`, "gu");            // Python's str.strip()

  // The character (a code point: one or two UTF-16 units) just before UTF-16 index `i` of `text`.
  function charBefore(text, i) {
    const low = text.charCodeAt(i - 1);
    if (i >= 2 && low >= 0xdc00 && low <= 0xdfff) {
      const high = text.charCodeAt(i - 2);
      if (high >= 0xd800 && high <= 0xdbff) return text.slice(i - 2, i);
    }
    return text[i - 1];
  }

  // pre_tokenize: words and punctuation marks; '▁' in front of one that follows a space (the start counts as one).
  function preTokenize(text) {
    const words = [];
    for (const m of text.matchAll(WORD)) {
      const afterSpace = m.index === 0 || IS_SPACE.test(charBefore(text, m.index));
      words.push((afterSpace ? SPACE : "") + m[0]);
    }
    return words;
  }

  // detokenize: join pieces, '▁' back to a space, strip the ends (runs of whitespace became one space).
  function detokenize(pieces) {
    return pieces.join("").split(SPACE).join(" ").replace(STRIP, "");
  }

  // _merge_word: every occurrence of the pair (a, b) in `word` replaced by a+b, left to right.
  function mergeWord(word, a, b) {
    const out = [];
    for (let i = 0; i < word.length; i++) {
      if (i + 1 < word.length && word[i] === a && word[i + 1] === b) { out.push(a + b); i++; }
      else out.push(word[i]);
    }
    return out;
  }

  class Tokenizer {
    // Tokenizer.__init__: ids 0-3 are <pad> <s> </s> <unk>, then the alphabet, then one piece per merge.
    constructor(state) {
      this.specials = state.specials;
      [this.pad, this.bos, this.eos, this.unk] = [state.pad, state.bos, state.eos, state.unk];
      this.alphabet = state.alphabet;
      this.merges = state.merges;
      this.ranks = new Map();                                    // a -> (b -> rank of the merge (a, b))
      this.merges.forEach(([a, b], rank) => {
        if (!this.ranks.has(a)) this.ranks.set(a, new Map());
        this.ranks.get(a).set(b, rank);                          // a repeated merge keeps its last rank, as a dict does
      });
      this.vocab = [...this.specials, ...this.alphabet, ...this.merges.map(([a, b]) => a + b)];
      this.ids = new Map();
      this.vocab.forEach((piece, i) => { if (!this.ids.has(piece)) this.ids.set(piece, i); });   // first id wins
      this.cache = new Map();
    }

    rank(a, b) {
      const r = this.ranks.get(a)?.get(b);
      return r === undefined ? Infinity : r;
    }

    // split_word: BPE on one word: repeatedly merge the adjacent pair that was learned earliest.
    splitWord(word) {
      if (!this.cache.has(word)) {
        let parts = Array.from(word);                            // code points, like Python's list(word)
        while (parts.length > 1) {
          let best = 0;                                          // the first pair of lowest rank, as min() picks
          for (let i = 1; i + 1 < parts.length; i++)
            if (this.rank(parts[i], parts[i + 1]) < this.rank(parts[best], parts[best + 1])) best = i;
          if (this.rank(parts[best], parts[best + 1]) === Infinity) break;
          parts = mergeWord(parts, parts[best], parts[best + 1]);
        }
        this.cache.set(word, parts);
      }
      return this.cache.get(word);
    }

    pieces(text) {
      return preTokenize(text).flatMap((w) => this.splitWord(w));
    }

    // encode: token ids (unknown pieces -> <unk>), optionally between <s> and </s>.
    encode(text, bos = false, eos = false) {
      if (typeof text !== "string") throw new TypeError(`\`text\` must be a string, got ${typeof text}`);
      const ids = this.pieces(text).map((p) => (this.ids.has(p) ? this.ids.get(p) : this.unk));
      return [...(bos ? [this.bos] : []), ...ids, ...(eos ? [this.eos] : [])];
    }

    // decode: text from ids; stops at </s>, skips <pad> and <s>.
    decode(ids) {
      const bad = ids.find((i) => !(Number.isInteger(i) && i >= 0 && i < this.vocab.length));
      if (bad !== undefined) throw new Error(`\`ids\` must be token ids, integers in [0, ${this.vocab.length}), got ${bad}`);
      const out = [];
      for (const i of ids) {
        if (i === this.eos) break;
        if (i !== this.pad && i !== this.bos) out.push(this.vocab[i]);
      }
      return detokenize(out);
    }
  }

  // =================================================================================================================
  // 3. The layers. A sequence is an array of rows, one Float32Array(d_model) per position (batch size 1).
  // =================================================================================================================

  // The dot product of a[offset .. offset+n) and b[0 .. n). Four partial sums instead of one: the processor can
  // then work on four additions at once (PyTorch's kernels also add in their own order).
  function dot(a, offset, b, n) {
    let s0 = 0, s1 = 0, s2 = 0, s3 = 0, j = 0;
    for (; j + 3 < n; j += 4) {
      s0 += a[offset + j] * b[j];
      s1 += a[offset + j + 1] * b[j + 1];
      s2 += a[offset + j + 2] * b[j + 2];
      s3 += a[offset + j + 3] * b[j + 3];
    }
    for (; j < n; j++) s0 += a[offset + j] * b[j];
    return (s0 + s1) + (s2 + s3);
  }

  // nn.Linear: y = x W^T + b, W of shape (out, in) stored row by row. The positions of x go four at a time: each
  // number of W, once read, is multiplied into four rows (four independent sums also keep the processor busy), so W
  // is read once for every four positions: the encoder's, the attention pass's, beam search's hypotheses.
  function linear(x, layer) {
    if (layer.kernel) return layer.kernel.linear(x, layer);     // WebAssembly, where it runs (just below)
    const { weight: w, bias, inFeatures: n, outFeatures: m } = layer;
    const y = x.map(() => new Float32Array(m));
    let p = 0;
    for (; p + 4 <= x.length; p += 4) {
      const [x0, x1, x2, x3] = x.slice(p, p + 4), [y0, y1, y2, y3] = y.slice(p, p + 4);
      for (let o = 0; o < m; o++) {
        let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (let j = 0, at = o * n; j < n; j++, at++) {
          const wj = w[at];
          s0 += wj * x0[j]; s1 += wj * x1[j]; s2 += wj * x2[j]; s3 += wj * x3[j];
        }
        const b = bias ? bias[o] : 0;
        y0[o] = s0 + b; y1[o] = s1 + b; y2[o] = s2 + b; y3[o] = s3 + b;
      }
    }
    for (; p < x.length; p++)                                   // the last one to three positions, one at a time
      for (let o = 0; o < m; o++) y[p][o] = dot(w, o * n, x[p], n) + (bias ? bias[o] : 0);
    return y;
  }

  // The same nn.Linear in WebAssembly with 128-bit SIMD: web/linear.wat, compiled, in base64 (web/build_wasm.py
  // writes this line; a test checks it is linear.wat's compilation). A vector instruction multiplies and adds four
  // float32 numbers at once, where JavaScript handles one float64 at a time; the sums are float32 (as PyTorch's).
  const LINEAR_WASM = "AGFzbQEAAAABHwRgAXsBfWACf38BfWAHf39/f39/fwBgBn9/f39/fwACDwEDZW52Bm1lbW9yeQIAAQMFBAABAgMHFQIIZml2ZVJvd3MAAgZvbmVSb3cAAwqoBQQZACAA/R8AIAD9HwGSIAD9HwIgAP0fA5KSCxgAIAAEfSAAIAFBAnRqKgIABUMAAAAACwvwAwUNfwF7AX0BfwV7IARBAnQhByAFQQJ0IRAgACAHaiAAIAZBAUsbIQggCCAHaiAIIAZBAksbIQkgCSAHaiAJIAZBA0sbIQogCiAHaiAKIAZBBEsbIQsgAyAQaiADIAZBAUsbIQwgDCAQaiAMIAZBAksbIQ0gDSAQaiANIAZBA0sbIQ4gDiAQaiAOIAZBBEsbIQ8DQCABIBEgB2xqIRL9DAAAAAAAAAAAAAAAAAAAAAAhF/0MAAAAAAAAAAAAAAAAAAAAACEY/QwAAAAAAAAAAAAAAAAAAAAAIRn9DAAAAAAAAAAAAAAAAAAAAAAhGv0MAAAAAAAAAAAAAAAAAAAAACEbQQAhEwNAIBIgE2r9AAQAIRQgFyAUIAAgE2r9AAQA/eYB/eQBIRcgGCAUIAggE2r9AAQA/eYB/eQBIRggGSAUIAkgE2r9AAQA/eYB/eQBIRkgGiAUIAogE2r9AAQA/eYB/eQBIRogGyAUIAsgE2r9AAQA/eYB/eQBIRsgE0EQaiITIAdJDQALIAIgERABIRUgEUECdCEWIAMgFmogFxAAIBWSOAIAIAwgFmogGBAAIBWSOAIAIA0gFmogGRAAIBWSOAIAIA4gFmogGhAAIBWSOAIAIA8gFmogGxAAIBWSOAIAIBFBAWoiESAFSQ0ACwuAAQIEfwF7IARBAnQhBiABIQgDQP0MAAAAAAAAAAAAAAAAAAAAACEKQQAhCQNAIAogACAJav0ABAAgCCAJav0ABAD95gH95AEhCiAJQRBqIgkgBkkNAAsgAyAHQQJ0aiAKEAAgAiAHEAGSOAIAIAggBmohCCAHQQFqIgcgBUkNAAsLAOgBBG5hbWUBDAIAA3N1bQEEYmlhcwKrAQQAAQABdgECAAFiAQFvAhwAAXgBAXcCAWIDAXkEAW4FAW0GBHJvd3MHBWJ5dGVzCAJ4MQkCeDIKAngzCwJ4NAwCeTENAnkyDgJ5Mw8CeTQQBnlieXRlcxEBbxIDcm93EwFqFAJ3dhUCYm8WAmF0FwJhMBgCYTEZAmEyGgJhMxsCYTQDCwABeAEBdwIBYgMBeQQBbgUBbQYFYnl0ZXMHAW8IA3JvdwkBagoBYQMlAgICAAdvdXRwdXRzAQVpbm5lcgMCAAdvdXRwdXRzAQVpbm5lcg==";

  // A translator's linear layers in one WebAssembly memory: every weight and bias copied in once, when the
  // translator is made; `linear(x, layer)` copies the rows of x in, runs the kernel, and copies y out. Each row
  // of W, once read, serves two to five rows of x (fiveRows); a single row takes W row after row (oneRow).
  // `create` gives null where this JavaScript has no WebAssembly SIMD or a layer's inFeatures is no multiple of 4:
  // `linear` stays in JavaScript.
  class WasmLinear {
    static create(layers) {
      if (typeof WebAssembly !== "object" || layers.some((l) => l.inFeatures % 4 !== 0)) return null;
      const code = base64ToBytes(LINEAR_WASM);
      return WebAssembly.validate(code) ? new WasmLinear(code, layers) : null;
    }

    constructor(code, layers) {
      const size = (l) => 4 * (l.weight.length + (l.bias ? l.bias.length : 0));
      const bytes = 16 + layers.reduce((total, l) => total + size(l), 0);   // address 0 stays free: "no bias"
      this.memory = new WebAssembly.Memory({ initial: Math.ceil(bytes / 65536) + 1 });
      const { exports } = new WebAssembly.Instance(new WebAssembly.Module(code), { env: { memory: this.memory } });
      this.fiveRows = exports.fiveRows;
      this.oneRow = exports.oneRow;
      let at = 16;
      for (const l of new Set(layers)) {
        l.at = this.store(l.weight, at);
        at += 4 * l.weight.length;
        l.biasAt = l.bias ? this.store(l.bias, at) : 0;
        at += l.bias ? 4 * l.bias.length : 0;
        l.kernel = this;
      }
      this.scratch = at;                                          // x and y go here, the memory grown to fit
    }

    store(values, at) {
      new Float32Array(this.memory.buffer, at, values.length).set(values);
      return at;
    }

    linear(x, layer) {
      const { inFeatures: n, outFeatures: m } = layer, rows = x.length;
      const xAt = this.scratch, yAt = xAt + 4 * rows * n, end = yAt + 4 * rows * m;
      const missing = end - this.memory.buffer.byteLength;
      if (missing > 0) this.memory.grow(Math.ceil(missing / 65536));   // 64 KiB pages
      const xs = new Float32Array(this.memory.buffer, xAt, rows * n);
      x.forEach((row, r) => xs.set(row, r * n));
      for (let r = 0; r < rows; r += 5) {                        // five rows at a time; a lone row by oneRow
        const count = Math.min(5, rows - r), at = [xAt + 4 * r * n, layer.at, layer.biasAt, yAt + 4 * r * m];
        if (count === 1) this.oneRow(...at, n, m);
        else this.fiveRows(...at, n, m, count);
      }
      const ys = new Float32Array(this.memory.buffer, yAt, rows * m);
      return x.map((_, r) => ys.slice(r * m, (r + 1) * m));
    }
  }

  // Embeddings: row `id` of the look-up table, times sqrt(d_model).
  function embed(ids, lut, dModel) {
    const scale = f32(Math.sqrt(dModel));
    return ids.map((id) => {
      if (!(Number.isInteger(id) && id >= 0 && id * dModel < lut.length)) throw new Error(`token id ${id} out of range`);
      const row = new Float32Array(dModel);
      for (let j = 0; j < dModel; j++) row[j] = lut[id * dModel + j] * scale;
      return row;
    });
  }

  // sinusoidal_encoding, one row: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same), in float64.
  function sinusoidalEncoding(position, dModel) {
    const row = new Float32Array(dModel), c = -Math.log(10000.0) / dModel;
    for (let twoI = 0; twoI < dModel; twoI += 2) {
      const divTerm = Math.exp(twoI * c);                       // 1 / 10000^(2i/d_model)
      row[twoI] = Math.sin(position * divTerm);
      if (twoI + 1 < dModel) row[twoI + 1] = Math.cos(position * divTerm);
    }
    return row;
  }

  // PositionalEncoding: add the encoding of positions start, start+1, ... (no dropout: evaluation). `peRows` keeps
  // each row once computed (position -> row), as the module keeps its table in a buffer.
  function positionalEncoding(x, start, maxPositions, peRows) {
    if (start < 0 || start + x.length > maxPositions)
      throw new Error(`positions ${start}..${start + x.length - 1} do not fit the positional table ` +
                      `(max_positions=${maxPositions})`);
    return x.map((row, i) => {
      if (!peRows.has(start + i)) peRows.set(start + i, sinusoidalEncoding(start + i, row.length));
      const pe = peRows.get(start + i), out = new Float32Array(row.length);
      for (let j = 0; j < row.length; j++) out[j] = row[j] + pe[j];
      return out;
    });
  }

  // LayerNorm: (x - mean) / sqrt(var + eps) * weight + bias over each row; var divides by d (biased).
  function layerNorm(x, norm, eps) {
    return x.map((row) => {
      const d = row.length;
      let mean = 0, variance = 0;
      for (let j = 0; j < d; j++) mean += row[j];
      mean /= d;
      for (let j = 0; j < d; j++) variance += (row[j] - mean) * (row[j] - mean);
      variance /= d;
      const inv = 1 / Math.sqrt(variance + eps), out = new Float32Array(d);
      for (let j = 0; j < d; j++) out[j] = (row[j] - mean) * inv * norm.weight[j] + (norm.bias ? norm.bias[j] : 0);
      return out;
    });
  }

  function add(x, y) {
    return x.map((row, i) => {
      const out = new Float32Array(row.length);
      for (let j = 0; j < row.length; j++) out[j] = row[j] + y[i][j];
      return out;
    });
  }

  function softmax(scores) {
    let max = -Infinity, sum = 0;
    for (let j = 0; j < scores.length; j++) max = Math.max(max, scores[j]);
    const e = new Float64Array(scores.length), p = new Float32Array(scores.length);
    for (let j = 0; j < scores.length; j++) sum += e[j] = Math.exp(scores[j] - max);
    for (let j = 0; j < scores.length; j++) p[j] = e[j] / sum;
    return p;
  }

  // A keep-mask (True = may attend) is null (keep all) or an array of rows; a single row serves every query,
  // as a (1, len_k) mask broadcasts in PyTorch.
  function keeps(mask, i, j) {
    return mask === null || mask[mask.length === 1 ? 0 : i][j];
  }

  // subsequent_mask: query i may attend to keys j <= i.
  function subsequentMask(size) {
    return Array.from({ length: size }, (_, i) => Array.from({ length: size }, (_, j) => j <= i));
  }

  // attention: softmax(q k^T / sqrt(d_k)) v for one head. Masked scores get the most negative finite float32, and
  // after the softmax their weights are set to exactly 0 (a fully masked row becomes all zeros), as in PyTorch.
  function attention(query, key, value, mask) {
    const dK = query[0].length, scale = Math.sqrt(dK), weights = [], output = [];
    query.forEach((q, i) => {
      const scores = new Float32Array(key.length);
      for (let j = 0; j < key.length; j++)
        scores[j] = keeps(mask, i, j) ? dot(key[j], 0, q, dK) / scale : FLOAT32_MIN;
      const p = softmax(scores);
      for (let j = 0; j < p.length; j++) if (!keeps(mask, i, j)) p[j] = 0;
      const out = new Float32Array(value[0].length);
      for (let j = 0; j < p.length; j++) {
        const pj = p[j], vj = value[j];
        for (let c = 0; c < out.length; c++) out[c] += pj * vj[c];
      }
      weights.push(p);
      output.push(out);
    });
    return { output, weights };                                 // (len_q, d_v) and (len_q, len_k)
  }

  // split_heads for head `hd`: columns hd*d_k .. (hd+1)*d_k of every row (views, no copies).
  function headOf(x, hd, dK) {
    return x.map((row) => row.subarray(hd * dK, (hd + 1) * dK));
  }

  // KVCache: the projected keys and values of earlier positions (one row each), kept between decoding steps: the
  // cross-attention's is filled once, a self-attention's gains one row per step. update() makes new arrays (rows
  // are never changed once written), so a copy may share them.
  class KVCache {
    constructor() { this.k = null; this.v = null; }
    update(k, v) {
      if (this.k !== null) { k = this.k.concat(k); v = this.v.concat(v); }
      this.k = k; this.v = v;
      return [k, v];
    }
    copy() {
      const c = new KVCache();
      [c.k, c.v] = [this.k, this.v];
      return c;
    }
  }

  // MultiHeadedAttention.attend: the projected q, k, v split into h heads of d_k columns, attended, merged.
  function attendHeads(q, k, v, mask, h) {
    const dModel = q[0].length, dK = dModel / h;
    const merged = q.map(() => new Float32Array(dModel)), weights = [];
    for (let hd = 0; hd < h; hd++) {
      const head = attention(headOf(q, hd, dK), headOf(k, hd, dK), headOf(v, hd, dK), mask);
      head.output.forEach((row, i) => merged[i].set(row, hd * dK));   // merge_heads
      weights.push(head.weights);
    }
    return { merged, weights };                                 // (len_q, d_model), h arrays of (len_q, len_k)
  }

  // MultiHeadedAttention: project q, k, v (W^Q, W^K, W^V), attend in h heads, merge, project (W^O). With a static
  // `cache` (cross-attention while decoding) the keys and values are projected once, at the first step.
  function multiHeadAttention(query, key, value, mask, attn, h, cache = null) {
    const q = linear(query, attn.wQ);
    let k, v;
    if (cache !== null && cache.k !== null) [k, v] = [cache.k, cache.v];   // memory projected once
    else {
      [k, v] = [linear(key, attn.wK), linear(value, attn.wV)];
      if (cache !== null) cache.update(k, v);
    }
    const { merged, weights } = attendHeads(q, k, v, mask, h);
    return { output: linear(merged, attn.wO), weights };
  }

  // The decoder's self-attention while decoding, for several hypotheses at once (beam search): row r of x is the
  // newest token of hypothesis r, which attends to its own earlier positions (caches[r], its KVCache) and to itself,
  // so no mask is needed. The rows pass W^Q, W^K, W^V and W^O together: each weight, once read, serves them all.
  function cachedSelfAttention(x, attn, h, caches) {
    const q = linear(x, attn.wQ), k = linear(x, attn.wK), v = linear(x, attn.wV);
    const merged = x.map((_, r) => {
      const [keys, values] = caches[r].update([k[r]], [v[r]]);   // earlier positions + the new one
      return attendHeads([q[r]], keys, values, null, h).merged[0];
    });
    return linear(merged, attn.wO);
  }

  // PositionwiseFeedForward: max(0, x W_1 + b_1) W_2 + b_2.
  function feedForward(x, ff) {
    const hidden = linear(x, ff.w1);
    for (const row of hidden) for (let j = 0; j < row.length; j++) row[j] = Math.max(0, row[j]);
    return linear(hidden, ff.w2);
  }

  // SublayerConnection: post-norm norm(x + f(x)) as in the paper, or pre-norm x + f(norm(x)).
  function sublayerConnection(x, sublayer, norm, config) {
    if (config.pre_norm) return add(x, sublayer(layerNorm(x, norm, config.layer_norm_eps)));
    return layerNorm(add(x, sublayer(x)), norm, config.layer_norm_eps);
  }

  // EncoderLayer: self-attention, then feed-forward.
  function encoderLayer(x, mask, layer, config) {
    let weights;
    x = sublayerConnection(x, (x) => {
      const a = multiHeadAttention(x, x, x, mask, layer.selfAttn, config.h);
      weights = a.weights;
      return a.output;
    }, layer.norms[0], config);
    x = sublayerConnection(x, (x) => feedForward(x, layer.feedForward), layer.norms[1], config);
    return { x, weights };
  }

  // DecoderLayer: masked self-attention, cross-attention over the encoder's output `memory`, then feed-forward.
  // With `cache` ({self: one KVCache per row, src: one shared KVCache}) each row of x is one hypothesis's newest
  // token (decoding); without, x is a whole sequence under `tgtMask` (the attention maps).
  function decoderLayer(x, memory, srcMask, tgtMask, layer, config, cache = null) {
    let selfWeights = null, crossWeights;
    x = sublayerConnection(x, (x) => {
      if (cache !== null) return cachedSelfAttention(x, layer.selfAttn, config.h, cache.self);
      const a = multiHeadAttention(x, x, x, tgtMask, layer.selfAttn, config.h);
      selfWeights = a.weights;
      return a.output;
    }, layer.norms[0], config);
    x = sublayerConnection(x, (x) => {                          // queries: decoder; keys and values: encoder
      const a = multiHeadAttention(x, memory, memory, srcMask, layer.srcAttn, config.h, cache && cache.src);
      crossWeights = a.weights;
      return a.output;
    }, layer.norms[1], config);
    x = sublayerConnection(x, (x) => feedForward(x, layer.feedForward), layer.norms[2], config);
    return { x, selfWeights, crossWeights };
  }

  // log_softmax: x - max - log(sum(exp(x - max))), computed stably.
  function logSoftmax(x) {
    let max = -Infinity, sum = 0;
    for (let i = 0; i < x.length; i++) max = Math.max(max, x[i]);
    for (let i = 0; i < x.length; i++) sum += Math.exp(x[i] - max);
    const logSum = Math.log(sum), out = new Float32Array(x.length);
    for (let i = 0; i < x.length; i++) out[i] = x[i] - max - logSum;
    return out;
  }

  // Generator: linear projection to the vocabulary, then log-softmax: per row, log-probabilities of the next token.
  function generator(x, proj) {
    return linear(x, proj).map(logSoftmax);
  }

  // =================================================================================================================
  // 4. The model (model.py's EncoderDecoder), rebuilt from the weights by name
  // =================================================================================================================

  class EncoderDecoder {
    constructor(config, params) {
      this.config = config;
      const get = (name) => {
        if (!params.has(name)) throw new Error(`the weights have no tensor ${name}`);
        return params.get(name);
      };
      // an nn.Linear(inFeatures, outFeatures): weight (out, in), bias (out,) or none
      const lin = (name, outFeatures, inFeatures, bias = config.bias) =>
        ({ weight: get(`${name}.weight`), bias: bias ? get(`${name}.bias`) : null, inFeatures, outFeatures });
      const d = config.d_model, dFF = config.d_ff;
      // W^Q, W^K, W^V stacked in one (3 d_model, d_model) weight: each a view of its rows, nothing copied
      const rows = (layer, i) => ({ weight: layer.weight.subarray(i * d * d, (i + 1) * d * d), inFeatures: d,
                                    bias: layer.bias && layer.bias.subarray(i * d, (i + 1) * d), outFeatures: d });
      const attn = (p, qkv = lin(`${p}.w_qkv`, 3 * d, d)) => ({ wQ: rows(qkv, 0), wK: rows(qkv, 1), wV: rows(qkv, 2),
                                                               wO: lin(`${p}.w_o`, d, d) });
      const ff = (p) => ({ w1: lin(`${p}.w_1`, dFF, d), w2: lin(`${p}.w_2`, d, dFF) });
      const norm = (p) => ({ weight: get(`${p}.weight`), bias: params.has(`${p}.bias`) ? get(`${p}.bias`) : null });
      const range = (n) => Array.from({ length: n }, (_, i) => i);
      this.encoderLayers = range(config.N).map((i) => ({
        selfAttn: attn(`encoder.layers.${i}.self_attn`), feedForward: ff(`encoder.layers.${i}.feed_forward`),
        norms: range(2).map((s) => norm(`encoder.layers.${i}.sublayer.${s}.norm`)),
      }));
      this.decoderLayers = range(config.N).map((i) => ({
        selfAttn: attn(`decoder.layers.${i}.self_attn`), srcAttn: attn(`decoder.layers.${i}.src_attn`),
        feedForward: ff(`decoder.layers.${i}.feed_forward`),
        norms: range(3).map((s) => norm(`decoder.layers.${i}.sublayer.${s}.norm`)),
      }));
      this.encoderNorm = config.final_norm ? norm("encoder.norm") : null;
      this.decoderNorm = config.final_norm ? norm("decoder.norm") : null;
      this.srcLut = get("src_embed.0.lut.weight");
      this.tgtLut = get("tgt_embed.0.lut.weight");
      this.proj = lin("generator.proj", config.tgt_vocab, d, params.has("generator.proj.bias"));   // bias=False: none
      this.peRows = new Map();                                  // the positional rows computed so far
    }

    // Every nn.Linear of the model (W^Q, W^K, W^V as three): what WasmLinear takes into its memory.
    linearLayers() {
      const attn = (a) => [a.wQ, a.wK, a.wV, a.wO], ff = (f) => [f.w1, f.w2];
      return [...this.encoderLayers.flatMap((l) => [...attn(l.selfAttn), ...ff(l.feedForward)]),
              ...this.decoderLayers.flatMap((l) => [...attn(l.selfAttn), ...attn(l.srcAttn), ...ff(l.feedForward)]),
              this.proj];
    }

    // src ids -> memory (len_src rows), and the encoder's attention weights per layer. A single sentence has no
    // padding, so the source keep-mask keeps every key: null.
    encode(src) {
      const c = this.config;
      let x = positionalEncoding(embed(src, this.srcLut, c.d_model), 0, c.max_positions, this.peRows);
      const weights = [];
      for (const layer of this.encoderLayers) {
        const out = encoderLayer(x, null, layer, c);
        x = out.x;
        weights.push(out.weights);
      }
      return { memory: this.encoderNorm ? layerNorm(x, this.encoderNorm, c.layer_norm_eps) : x, weights };
    }

    // The decoder. Without `cache`: the tokens `tgt` at positions 0, 1, ... under `tgtMask`, with the attention
    // weights (the maps). With `cache` (initCache): one decoding step for several hypotheses at once, `tgt[r]` the
    // newest token of hypothesis r, every one at position `start`.
    decode(memory, tgt, tgtMask, cache = null, start = 0) {
      const c = this.config, rows = embed(tgt, this.tgtLut, c.d_model), pe = this.peRows;
      let x = cache === null ? positionalEncoding(rows, 0, c.max_positions, pe)
                             : rows.map((row) => positionalEncoding([row], start, c.max_positions, pe)[0]);
      const selfWeights = [], crossWeights = [];
      this.decoderLayers.forEach((layer, i) => {
        const layerCache = cache && { self: cache.self.map((layers) => layers[i]), src: cache.src[i] };
        const out = decoderLayer(x, memory, null, tgtMask, layer, c, layerCache);
        x = out.x;
        selfWeights.push(out.selfWeights);
        crossWeights.push(out.crossWeights);
      });
      return { x: this.decoderNorm ? layerNorm(x, this.decoderNorm, c.layer_norm_eps) : x, selfWeights, crossWeights };
    }

    generator(x) {
      return generator(x, this.proj);
    }
  }

  // =================================================================================================================
  // 5. Decoding (decoding.py)
  // =================================================================================================================

  // _init_cache, for `rows` hypotheses: per decoder layer one cross-attention cache (the memory's keys and values,
  // computed at the first step and shared by every hypothesis), and per hypothesis one self-attention cache a layer.
  function initCache(model, rows) {
    const layers = () => model.decoderLayers.map(() => new KVCache());
    return { src: layers(), self: Array.from({ length: rows }, layers) };
  }

  // _next_log_probs: for each hypothesis (a row of `ys`, all of one length), the log-probabilities of the token after
  // it; with the cache only the last token is fed, at its true position ys[r].length - 1.
  function nextLogProbs(model, memory, ys, cache) {
    const out = model.decode(memory, ys.map((y) => y[y.length - 1]), null, cache, ys[0].length - 1).x;
    return model.generator(out);
  }

  // argmax: the first index of the largest value, as torch.argmax returns.
  function argmax(values) {
    let best = 0;
    for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
    return best;
  }

  // greedy_decode: always take the most probable next token; stop after the end symbol or at maxLength tokens
  // (the start symbol counts).
  function greedyDecode(model, src, maxLength, startSymbol, endSymbol) {
    const memory = model.encode(src).memory, cache = initCache(model, 1), ys = [startSymbol];
    for (let step = 0; step < maxLength - 1; step++) {
      const next = argmax(nextLogProbs(model, memory, [ys], cache)[0]);
      ys.push(next);
      if (next === endSymbol) break;
    }
    return ys;
  }

  // GNMT's length penalty lp = ((5 + length) / 6) ** alpha; `length` counts generated tokens, the end symbol
  // included. decoding.py computes it as a Python float (float64) and divides float32 scores by it, which PyTorch
  // does in float32: hence the f32 of both.
  function lengthPenalty(length, alpha) {
    return f32(((5.0 + length) / 6.0) ** alpha);
  }

  // The k largest of `values` with their indices, best first; of equal values, the lower index first.
  function topK(k, values) {
    const top = [];                                              // [{score, index}], sorted
    for (let n = 0; n < values.length; n++) {
      const s = values[n];
      if (top.length === k && !(s > top[k - 1].score)) continue;
      let at = top.length;
      while (at > 0 && s > top[at - 1].score) at--;             // after every equal score: stable
      top.splice(at, 0, { score: s, index: n });
      if (top.length > k) top.pop();
    }
    return top;
  }

  // beam_search: keep the `beamSize` best hypotheses by raw log-probability; a hypothesis that ends competes, by
  // its length-normalized score, against the best finished one; stop when no live hypothesis can still win. The
  // k hypotheses take each decoder step together (nextLogProbs on k rows), as PyTorch's batch of k does.
  function beamSearch(model, src, maxLength, startSymbol, endSymbol, beamSize, alpha) {
    const k = beamSize, memory = model.encode(src).memory, V = model.config.tgt_vocab;
    // k identical starts, only the first alive (score 0; the others -inf)
    let alive = Array.from({ length: k }, () => [startSymbol]);
    let aliveLp = Array.from({ length: k }, (_, i) => (i === 0 ? 0 : -Infinity));
    const cache = initCache(model, k);
    let best = [startSymbol], bestScore = -Infinity, bestLen = 0, t = 0;
    for (let step = 1; step < maxLength; step++) {
      t = step;                                                  // t: the position being written
      const logp = nextLogProbs(model, memory, alive, cache);   // k x (V,)
      const scores = new Float32Array(k * V);                   // raw score of hypothesis i + token w at i * V + w
      logp.forEach((row, i) => { for (let w = 0; w < V; w++) scores[i * V + w] = aliveLp[i] + row[w]; });
      // 1. ending here: each hypothesis + end symbol, on its normalized score, against the best so far
      let done = -Infinity, j = 0;
      for (let i = 0; i < k; i++) {
        const s = f32(scores[i * V + endSymbol] / lengthPenalty(t, alpha));
        if (s > done) [done, j] = [s, i];                        // the first of equal maxima, as torch.max
      }
      if (done > bestScore) [best, bestScore, bestLen] = [[...alive[j], endSymbol], done, t];
      // 2. going on: the k best extensions by other tokens, among all k * V
      for (let i = 0; i < k; i++) scores[i * V + endSymbol] = -Infinity;
      const top = topK(k, scores);
      const parents = top.map((c) => Math.floor(c.index / V)), tokens = top.map((c) => c.index % V);
      aliveLp = top.map((c) => c.score);
      alive = parents.map((p, i) => [...alive[p], tokens[i]]);
      cache.self = parents.map((p) => cache.self[p].map((c) => c.copy()));   // each row takes its parent's cache
      // 3. stop when no live hypothesis can still win: its raw score only falls, and lp is largest at maxLength
      if (t === maxLength - 1 || bestScore > f32(aliveLp[0] / lengthPenalty(maxLength - 1, alpha))) break;
    }
    if (t === maxLength - 1) {                                   // hypotheses cut off at maxLength compete too
      const cut = f32(aliveLp[0] / lengthPenalty(t, alpha));
      if (cut > bestScore) [best, bestScore, bestLen] = [alive[0], cut, t];
    }
    return { tokens: best.slice(0, bestLen + 1), score: bestScore, steps: t };
  }

  // attention_maps (model.py): the attention weights of every layer and head from one forward pass over the
  // source and the decoder's input tokens `tgt` (the output without its last token), with the causal mask.
  function attentionMaps(model, src, tgt) {
    const enc = model.encode(src);
    const dec = model.decode(enc.memory, tgt, subsequentMask(tgt.length));
    const plain = (layers) => layers.map((heads) => heads.map((rows) => rows.map((row) => Array.from(row))));
    return { encoder: plain(enc.weights), decoder_self: plain(dec.selfWeights), cross: plain(dec.crossWeights) };
  }

  // =================================================================================================================
  // 6. A translator (translator.py): load, check the sentence, decode
  // =================================================================================================================

  // A control character, as translator.py's `_control`: ASCII 0-31 and DEL, and Unicode's C1 controls (0x80-0x9f).
  function isControl(ch) {
    const c = ch.charCodeAt(0);
    return c < 32 || (c >= 127 && c < 160);
  }

  // The sentence as translator.py checks it, then its ids between <s> and </s>.
  function sourceIds(tokenizer, text, limit) {
    if (typeof text !== "string") throw new TypeError("`text` must be a string");
    if (!text.replace(STRIP, "") || [...text].some((ch) => isControl(ch) && ch !== "\t" && ch !== "\n"))
      throw new Error(`the sentence (${JSON.stringify(text)}) is empty or holds control characters`);
    const src = tokenizer.encode(text, true, true);
    if (src.slice(1, -1).every((t) => t === tokenizer.unk || tokenizer.vocab[t] === SPACE))
      throw new Error(`the sentence (${JSON.stringify(text)}) holds no character the tokenizer knows`);
    if (src.length > limit)
      throw new Error(`the sentence is ${src.length} tokens long (with <s> and </s>), but this model reads at most ` +
                      `${limit} (its max_positions)`);
    return src;
  }

  // createTranslator(weights): the model and tokenizer of a weights object, and `translate`. The decoding defaults
  // (translator.py's beam of 5 and alpha 1.2; at most the source's length + 50 tokens) travel in the weights. The
  // linear layers run in WebAssembly where this JavaScript has its SIMD (`webAssembly: false`: in JavaScript);
  // `kernel` says which.
  function createTranslator(weights, { webAssembly = true } = {}) {
    const started = performance.now();
    if (!weights || typeof weights !== "object" || typeof weights.format !== "string")
      throw new Error("not a transformer_nb weights object (written by transformer_nb.web.export_weights)");
    if (weights.format !== FORMAT)
      throw new Error(`these weights are in format ${weights.format}, this engine reads ${FORMAT}: export them ` +
                      "again with this version's transformer_nb.web.export_weights");
    const parameters = readParameters(weights), tokenizer = new Tokenizer(weights.tokenizer);
    const model = new EncoderDecoder(weights.config, parameters), defaults = weights.decoding;
    if (tokenizer.vocab.length > weights.config.tgt_vocab) throw new Error("the tokenizer is larger than the model");
    const kernel = webAssembly ? WasmLinear.create(model.linearLayers()) : null;

    // translate(): greedy decoding (beam 1) or beam search; the attention maps only when asked for (one more pass
    // over the source and the output, as attention_maps makes).
    function translate(text, { beam = defaults.beam_size, lengthPenalty: alpha = defaults.length_penalty,
                               attention = false } = {}) {
      if (!Number.isInteger(beam) || beam < 1) throw new Error(`\`beam\` must be a positive integer (1: greedy), got ${beam}`);
      if (!(alpha >= 0 && alpha <= 10)) throw new Error(`\`lengthPenalty\` must be a number in [0, 10], got ${alpha}`);
      const limit = model.config.max_positions, src = sourceIds(tokenizer, text, limit);
      const maxLength = Math.min(src.length + defaults.extra_tokens, limit);
      const t0 = performance.now();
      let tokens, score = null, steps;                           // steps: decoder steps (beam: of k hypotheses each)
      if (beam === 1) {
        tokens = greedyDecode(model, src, maxLength, tokenizer.bos, tokenizer.eos);
        steps = tokens.length - 1;
      } else {
        ({ tokens, score, steps } = beamSearch(model, src, maxLength, tokenizer.bos, tokenizer.eos, beam, alpha));
      }
      const t1 = performance.now();
      const maps = attention ? attentionMaps(model, src, tokens.slice(0, -1)) : null;
      return {
        text: tokenizer.decode(tokens),
        tokens,                                                  // <s> ... </s>, as greedy_decode / beam_search
        score,                                                   // beam search: the length-normalized log-probability
        srcTokens: src,
        srcPieces: src.map((i) => tokenizer.vocab[i]),
        tgtPieces: tokens.map((i) => tokenizer.vocab[i]),
        attention: maps,                                         // decoder rows: the input tokens tokens[0..-2]
        timing: { decodeMs: t1 - t0, attentionMs: performance.now() - t1, generated: tokens.length - 1, steps },
      };
    }

    return { translate, tokenizer, model, parameters, dtype: weights.dtype, config: weights.config,
             decoding: defaults, kernel: kernel ? "WebAssembly" : "JavaScript", loadMs: performance.now() - started };
  }

  // =================================================================================================================
  // 7. A translator in a Web Worker: the page stays responsive while it loads and translates
  // =================================================================================================================

  // The worker's side: answer {id, method, args} messages with {id, result} or {id, error}.
  function serveWorker(scope) {
    let translator = null;
    scope.onmessage = ({ data: { id, method, args } }) => {
      try {
        if (method === "load") {
          translator = createTranslator(...args);
          const { dtype, config, decoding, kernel, loadMs } = translator;
          scope.postMessage({ id, result: { dtype, config, decoding, kernel, loadMs } });
        } else {
          scope.postMessage({ id, result: translator.translate(...args) });
        }
      } catch (error) {
        scope.postMessage({ id, error: error.message });
      }
    };
  }

  // startWorker(weights, options): a Promise of a translator running in a Web Worker, whose translate(text, options)
  // returns a Promise. The worker runs this very file: its source is this function's own text, handed to the
  // worker as a Blob URL, which a page opened from file:// may start (a worker script from a file:// URL it may not).
  function startWorker(weights, options = {}) {
    const source = `"use strict";\n(${engine})().internals.serveWorker(self);\n`;
    const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
    const worker = new Worker(url), pending = new Map();
    let next = 0;
    const fail = (message) => {
      for (const { reject } of pending.values()) reject(new Error(message));
      pending.clear();
    };
    worker.onmessage = ({ data }) => {
      const call = pending.get(data.id);
      pending.delete(data.id);
      if (data.error !== undefined) call.reject(new Error(data.error));
      else call.resolve(data.result);
    };
    worker.onerror = (event) => fail(`the translator's worker failed: ${event.message || "it could not start"}`);
    const call = (method, ...args) => new Promise((resolve, reject) => {
      const id = next++;
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, method, args });
    });
    return call("load", weights, options).then((info) => {
      URL.revokeObjectURL(url);
      return { ...info, translate: (text, options) => call("translate", text, options),
               terminate: () => { worker.terminate(); fail("the worker was terminated"); } };
    }, (error) => {
      URL.revokeObjectURL(url);
      worker.terminate();
      throw error;
    });
  }

  return {
    FORMAT,
    createTranslator,
    startWorker,
    readWeightsScript,
    // the pieces, for tests and for the appendix's readers
    internals: { preTokenize, detokenize, Tokenizer, EncoderDecoder, sinusoidalEncoding, greedyDecode, beamSearch,
                 attentionMaps, lengthPenalty, initCache, nextLogProbs, serveWorker, WasmLinear, WORD, IS_SPACE },
  };
});
