// engine.js: the transformer_nb German->English translator, running in the browser in plain JavaScript.
//
// Each function is the twin of a piece of the PyTorch package (named in its comment), written out with loops instead
// of tensor operations. There are no libraries and no modules: a classic script that defines
//
//     window.transformerNb = { load(weights), translate(text, {beam, lengthPenalty}) }
//
// `load` takes the object a weights script (written by transformer_nb.web.export_weights) assigns to `window.transformerNbWeights`;
// `translate` returns a Promise of {text, tokens, attention, ...}: attention.encoder / .decoder_self / .cross hold,
// per layer, one [len_q][len_k] array per head.
//
// Numbers. PyTorch computes in float32. Here every stored activation and weight is a Float32Array (writing into one
// rounds to float32), while a single sum or product in flight is a JavaScript number (float64). So results agree
// with PyTorch to about 1e-6, not bit for bit: the order in which PyTorch's kernels add numbers is not ours.
// Decisions made on numbers (argmax, top-k, comparisons of beam scores) are written exactly as decoding.py makes
// them, in float32 (Math.fround) where PyTorch's are float32.
(function () {
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
  // then work on four additions at once (about twice as fast; PyTorch's kernels also add in their own order).
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

  // nn.Linear: y = x W^T + b, W of shape (out, in) stored row by row. Each row of W is read once for all the positions
  // in x (the loop over positions is inside), which matters where many pass at once: the encoder, the attention pass.
  function linear(x, layer) {
    const { weight, bias, inFeatures: n, outFeatures: m } = layer;
    const y = x.map(() => new Float32Array(m));
    for (let o = 0; o < m; o++)
      for (let p = 0; p < x.length; p++) y[p][o] = dot(weight, o * n, x[p], n) + (bias ? bias[o] : 0);
    return y;
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

  const peRows = new Map();                                     // position -> row (computed once, like the buffer)

  // PositionalEncoding: add the encoding of positions start, start+1, ... (no dropout: evaluation).
  function positionalEncoding(x, start, maxPositions) {
    if (start < 0 || start + x.length > maxPositions)
      throw new Error(`positions ${start}..${start + x.length - 1} do not fit the positional table ` +
                      `(max_positions=${maxPositions})`);
    return x.map((row, i) => {
      const key = `${start + i}:${row.length}`;
      if (!peRows.has(key)) peRows.set(key, sinusoidalEncoding(start + i, row.length));
      const pe = peRows.get(key), out = new Float32Array(row.length);
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
      for (let j = 0; j < d; j++) variance += (row[j] - mean) ** 2;
      variance /= d;
      const inv = 1 / Math.sqrt(variance + eps), out = new Float32Array(d);
      for (let j = 0; j < d; j++) out[j] = (row[j] - mean) * inv * norm.weight[j] + (norm.bias ? norm.bias[j] : 0);
      return out;
    });
  }

  function add(x, y) {
    return x.map((row, i) => row.map((v, j) => v + y[i][j]));
  }

  function softmax(scores) {
    let max = -Infinity, sum = 0;
    for (const s of scores) max = Math.max(max, s);
    const p = new Float32Array(scores.length);
    for (let j = 0; j < scores.length; j++) sum += Math.exp(scores[j] - max);
    for (let j = 0; j < scores.length; j++) p[j] = Math.exp(scores[j] - max) / sum;
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
    const dK = query[0].length, weights = [], output = [];
    query.forEach((q, i) => {
      const scores = new Float32Array(key.length);
      key.forEach((k, j) => { scores[j] = keeps(mask, i, j) ? dot(k, 0, q, dK) / Math.sqrt(dK) : FLOAT32_MIN; });
      const p = softmax(scores);
      for (let j = 0; j < p.length; j++) if (!keeps(mask, i, j)) p[j] = 0;
      const out = new Float32Array(value[0].length);
      for (let j = 0; j < p.length; j++) for (let c = 0; c < out.length; c++) out[c] += p[j] * value[j][c];
      weights.push(p);
      output.push(out);
    });
    return { output, weights };                                 // (len_q, d_v) and (len_q, len_k)
  }

  // split_heads for head `hd`: columns hd*d_k .. (hd+1)*d_k of every row (views, no copies).
  function headOf(x, hd, dK) {
    return x.map((row) => row.subarray(hd * dK, (hd + 1) * dK));
  }

  // KVCache: the projected keys and values of earlier positions (one row each), kept between decoding steps.
  // A static cache (cross-attention) is filled once; a growing one (self-attention) gains one row per step.
  class KVCache {
    constructor(isStatic = false) { this.static = isStatic; this.k = null; this.v = null; }
    update(k, v) {
      if (!this.static && this.k !== null) { k = this.k.concat(k); v = this.v.concat(v); }
      this.k = k; this.v = v;
      return [k, v];
    }
    copy() {                                                    // rows are never changed once written: share them
      const c = new KVCache(this.static);
      [c.k, c.v] = [this.k, this.v];
      return c;
    }
  }

  // MultiHeadedAttention: project q, k, v (W^Q, W^K, W^V), attend in h heads of d_k columns, merge, project (W^O).
  function multiHeadAttention(query, key, value, mask, attn, h, cache = null) {
    const dModel = query[0].length, dK = dModel / h;
    const q = linear(query, attn.wQ);
    let k, v;
    if (cache !== null && cache.static && cache.k !== null) [k, v] = [cache.k, cache.v];   // memory projected once
    else {
      [k, v] = [linear(key, attn.wK), linear(value, attn.wV)];
      if (cache !== null) [k, v] = cache.update(k, v);          // self-attention: earlier positions + the new one
    }
    const merged = q.map(() => new Float32Array(dModel)), weights = [];
    for (let hd = 0; hd < h; hd++) {
      const head = attention(headOf(q, hd, dK), headOf(k, hd, dK), headOf(v, hd, dK), mask);
      head.output.forEach((row, i) => merged[i].set(row, hd * dK));   // merge_heads
      weights.push(head.weights);
    }
    return { output: linear(merged, attn.wO), weights };       // weights: h arrays of (len_q, len_k)
  }

  // PositionwiseFeedForward: max(0, x W_1 + b_1) W_2 + b_2.
  function feedForward(x, ff) {
    const hidden = linear(x, ff.w1).map((row) => row.map((v) => Math.max(0, v)));
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
  // `cache` ({self, src} KVCaches) lets it take one new position at a time.
  function decoderLayer(x, memory, srcMask, tgtMask, layer, config, cache = null) {
    let selfWeights, crossWeights;
    x = sublayerConnection(x, (x) => {
      const a = multiHeadAttention(x, x, x, tgtMask, layer.selfAttn, config.h, cache && cache.self);
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
    for (const v of x) max = Math.max(max, v);
    for (const v of x) sum += Math.exp(v - max);
    const logSum = Math.log(sum), out = new Float32Array(x.length);
    for (let i = 0; i < x.length; i++) out[i] = x[i] - max - logSum;
    return out;
  }

  // Generator: linear projection to the vocabulary, then log-softmax: log-probabilities of the next token.
  function generator(x, proj) {
    return logSoftmax(linear([x], proj)[0]);
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
      this.proj = lin("generator.proj", config.tgt_vocab, d, true);   // the Generator's Linear always has a bias
    }

    // src ids -> memory (len_src rows), and the encoder's attention weights per layer. A single sentence has no
    // padding, so the source keep-mask keeps every key: null.
    encode(src) {
      const c = this.config;
      let x = positionalEncoding(embed(src, this.srcLut, c.d_model), 0, c.max_positions);
      const weights = [];
      for (const layer of this.encoderLayers) {
        const out = encoderLayer(x, null, layer, c);
        x = out.x;
        weights.push(out.weights);
      }
      return { memory: this.encoderNorm ? layerNorm(x, this.encoderNorm, c.layer_norm_eps) : x, weights };
    }

    // tgt ids at positions start, start+1, ... -> decoder vectors; with `cache`, `tgt` holds only the new tokens.
    decode(memory, tgt, tgtMask, cache = null, start = 0) {
      const c = this.config;
      let x = positionalEncoding(embed(tgt, this.tgtLut, c.d_model), start, c.max_positions);
      const selfWeights = [], crossWeights = [];
      this.decoderLayers.forEach((layer, i) => {
        const out = decoderLayer(x, memory, null, tgtMask, layer, c, cache && cache[i]);
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

  // init_cache: per decoder layer, a growing self-attention cache and a static cross-attention one.
  function initCache(model) {
    return model.decoderLayers.map(() => ({ self: new KVCache(), src: new KVCache(true) }));
  }

  // next_log_probs: log-probabilities of the token after `ys`; with a cache only the last token is fed, at its
  // true position ys.length - 1.
  function nextLogProbs(model, memory, ys, cache) {
    const out = model.decode(memory, ys.slice(-1), null, cache, ys.length - 1).x;
    return model.generator(out[out.length - 1]);
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
    const memory = model.encode(src).memory, cache = initCache(model), ys = [startSymbol];
    for (let step = 0; step < maxLength - 1; step++) {
      const next = argmax(nextLogProbs(model, memory, ys, cache));
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

  // The k largest of `count` candidates score(n), best first; equal scores: the lower index n first.
  function topK(k, count, score) {
    const top = [];                                              // [{score, index}], sorted
    for (let n = 0; n < count; n++) {
      const s = score(n);
      if (top.length === k && !(s > top[k - 1].score)) continue;
      let at = top.length;
      while (at > 0 && s > top[at - 1].score) at--;             // after every equal score: stable
      top.splice(at, 0, { score: s, index: n });
      if (top.length > k) top.pop();
    }
    return top;
  }

  // beam_search: keep the `beamSize` best hypotheses by raw log-probability; a hypothesis that ends competes, by
  // its length-normalized score, against the best finished one; stop when no live hypothesis can still win.
  function beamSearch(model, src, maxLength, startSymbol, endSymbol, beamSize, alpha) {
    const k = beamSize, memory = model.encode(src).memory, V = model.config.tgt_vocab;
    // k identical starts, only the first alive (score 0; the others -inf); each with its own decoder cache
    let alive = Array.from({ length: k }, () => [startSymbol]);
    let aliveLp = Array.from({ length: k }, (_, i) => (i === 0 ? 0 : -Infinity));
    const cross = initCache(model).map((c) => c.src);            // the memory's keys/values: the same for every beam
    let caches = alive.map(() => cross.map((src) => ({ self: new KVCache(), src })));
    let best = [startSymbol], bestScore = -Infinity, bestLen = 0, t = 0;
    for (let step = 1; step < maxLength; step++) {
      t = step;                                                  // t: the position being written
      const logp = alive.map((ys, i) => nextLogProbs(model, memory, ys, caches[i]));   // k x (V,)
      const cand = (i, w) => f32(aliveLp[i] + logp[i][w]);      // raw score of hypothesis i + token w (float32)
      // 1. ending here: each hypothesis + end symbol, on its normalized score, against the best so far
      let done = -Infinity, j = 0;
      for (let i = 0; i < k; i++) {
        const s = f32(cand(i, endSymbol) / lengthPenalty(t, alpha));
        if (s > done) [done, j] = [s, i];                        // the first of equal maxima, as torch.max
      }
      if (done > bestScore) [best, bestScore, bestLen] = [[...alive[j], endSymbol], done, t];
      // 2. going on: the k best extensions by other tokens, among all k * V
      const top = topK(k, k * V, (n) => (n % V === endSymbol ? -Infinity : cand(Math.floor(n / V), n % V)));
      const parents = top.map((c) => Math.floor(c.index / V)), tokens = top.map((c) => c.index % V);
      aliveLp = top.map((c) => c.score);
      alive = parents.map((p, i) => [...alive[p], tokens[i]]);
      caches = parents.map((p) => caches[p].map((c) => ({ self: c.self.copy(), src: c.src })));   // reorder
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
  // 6. The page's entry points: load and translate (translator.py)
  // =================================================================================================================

  const state = { model: null, tokenizer: null, params: null };

  async function load(weights) {
    const t0 = performance.now();
    if (!weights || weights.format !== "transformer_nb-web-1") throw new Error("not a transformer_nb weights object");
    const params = (state.params = readParameters(weights));
    state.tokenizer = new Tokenizer(weights.tokenizer);
    state.model = new EncoderDecoder(weights.config, params);
    if (state.tokenizer.vocab.length > weights.config.tgt_vocab) throw new Error("the tokenizer is larger than the model");
    return { ms: performance.now() - t0, dtype: weights.dtype, config: weights.config };
  }

  // A control character, as translator.py's `_control`: ASCII 0-31 and DEL, and Unicode's C1 controls (0x80-0x9f).
  function isControl(ch) {
    const c = ch.charCodeAt(0);
    return c < 32 || (c >= 127 && c < 160);
  }

  // translate(): checks the sentence as translator.py does, then greedy decoding (beam 1) or beam search, by
  // default the package's beam of 5 and alpha 1.2 (decoding.BEAM_SIZE, LENGTH_PENALTY); the output is at most
  // (source length + 50) tokens, capped by the positional table.
  async function translate(text, { beam = 5, lengthPenalty: alpha = 1.2 } = {}) {
    const { model, tokenizer } = state;
    if (model === null) throw new Error("call transformerNb.load(weights) first");
    if (typeof text !== "string") throw new TypeError("`text` must be a string");
    if (!Number.isInteger(beam) || beam < 1) throw new Error(`\`beam\` must be a positive integer (1: greedy), got ${beam}`);
    if (!(alpha >= 0 && alpha <= 10)) throw new Error(`\`lengthPenalty\` must be a number in [0, 10], got ${alpha}`);
    if (!text.replace(STRIP, "") || [...text].some((ch) => isControl(ch) && ch !== "\t" && ch !== "\n"))
      throw new Error(`the sentence (${JSON.stringify(text)}) is empty or holds control characters`);
    const src = tokenizer.encode(text, true, true);
    if (src.slice(1, -1).every((t) => t === tokenizer.unk || tokenizer.vocab[t] === SPACE))
      throw new Error(`the sentence (${JSON.stringify(text)}) holds no character the tokenizer knows`);
    const limit = model.config.max_positions;
    if (src.length > limit)
      throw new Error(`the sentence is ${src.length} tokens long (with <s> and </s>), but this model reads at most ` +
                      `${limit} (its max_positions)`);
    const maxLength = Math.min(src.length + 50, limit);

    const t0 = performance.now();
    let tokens, score = null, steps;                             // steps: decoder steps (beam: of k hypotheses each)
    if (beam === 1) {
      tokens = greedyDecode(model, src, maxLength, tokenizer.bos, tokenizer.eos);
      steps = tokens.length - 1;
    } else {
      ({ tokens, score, steps } = beamSearch(model, src, maxLength, tokenizer.bos, tokenizer.eos, beam, alpha));
    }
    const t1 = performance.now();
    const attention = attentionMaps(model, src, tokens.slice(0, -1));
    const t2 = performance.now();
    return {
      text: tokenizer.decode(tokens),
      tokens,                                                    // <s> ... </s>, as greedy_decode / beam_search
      score,                                                     // beam search: the length-normalized log-probability
      srcTokens: src,
      srcPieces: src.map((i) => tokenizer.vocab[i]),
      tgtPieces: tokens.map((i) => tokenizer.vocab[i]),
      attention,                                                 // decoder rows: the input tokens tokens[0..-2]
      timing: { decodeMs: t1 - t0, attentionMs: t2 - t1, generated: tokens.length - 1, steps },
    };
  }

  window.transformerNb = {
    load,
    translate,
    get tokenizer() { return state.tokenizer; },
    get model() { return state.model; },
    get parameters() { return state.params; },                  // name -> Float32Array, as the model computes with
    // the pieces, for tests and for the appendix's readers
    internals: { preTokenize, detokenize, Tokenizer, sinusoidalEncoding, greedyDecode, beamSearch, attentionMaps,
                 lengthPenalty, initCache, nextLogProbs, WORD, IS_SPACE },
  };
})();
