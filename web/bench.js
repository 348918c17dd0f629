// bench.js: timings of engine.js in the browser (run by bench.py through bench.html; printed, not asserted).
//
// runBench(weightsUrl, sentences, webAssembly) loads the weights script by a <script> tag (what a reader's page does),
// makes a translator on the page's own thread (the engine's speed, without a worker's messages; its linear layers in
// WebAssembly, or with `webAssembly` false in JavaScript), then translates every
// sentence greedily and with beam search (5, length penalty 1.2), after one warm-up sentence that lets the
// JavaScript engine compile the hot loops; the attention maps are timed apart, once per greedy translation.
"use strict";

function loadScript(url) {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = url;
    script.onload = resolve;
    script.onerror = () => reject(new Error(`could not load ${url}`));
    document.head.appendChild(script);
  });
}

async function runBench(weightsUrl, sentences, webAssembly = true) {
  const t0 = performance.now();
  await loadScript(weightsUrl);                                  // download (from disk) + parse the weights script
  const t1 = performance.now();
  const translator = transformerNb.createTranslator(window.transformerNbWeights, { webAssembly });   // base64 -> float32
  const result = { scriptMs: t1 - t0, loadMs: translator.loadMs, totalLoadMs: performance.now() - t0,
                   kernel: translator.kernel };
  translator.translate(sentences[0], { beam: 5, lengthPenalty: 1.2, attention: true });   // warm-up
  for (const [name, options] of [["greedy", { beam: 1, attention: true }], ["beam5", { beam: 5, lengthPenalty: 1.2 }]]) {
    const sum = { decodeMs: 0, attentionMs: 0, generated: 0, steps: 0 };
    for (const sentence of sentences) {
      const { timing } = translator.translate(sentence, options);
      for (const key of Object.keys(sum)) sum[key] += timing[key];
    }
    result[name] = {
      ...sum,
      msPerToken: sum.decodeMs / sum.generated,                   // per output token (after <s>)
      msPerStep: sum.decodeMs / sum.steps,                        // per decoder step (beam: k hypotheses)
      attentionMsPerSentence: sum.attentionMs / sentences.length, // the extra forward pass for the maps
    };
  }
  return result;
}
