// bench.js: timings of engine.js in the browser (run by bench.py through bench.html; printed, not asserted).
//
// runBench(weightsUrl, sentences) loads the weights script by a <script> tag (what a reader's page does), then
// translates every sentence greedily and with beam search (5, length penalty 1.2), after one warm-up sentence that
// lets the JavaScript engine compile the hot loops.
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

async function runBench(weightsUrl, sentences) {
  const t0 = performance.now();
  await loadScript(weightsUrl);                                  // download (from disk) + parse the weights script
  const t1 = performance.now();
  const info = await transformerNb.load(window.transformerNbWeights);   // base64 -> bytes -> float32 arrays
  const result = { scriptMs: t1 - t0, loadMs: info.ms, totalLoadMs: performance.now() - t0 };
  await transformerNb.translate(sentences[0], { beam: 5, lengthPenalty: 1.2 });   // warm-up
  for (const [name, options] of [["greedy", { beam: 1 }], ["beam5", { beam: 5, lengthPenalty: 1.2 }]]) {
    const sum = { decodeMs: 0, attentionMs: 0, generated: 0, steps: 0 };
    for (const sentence of sentences) {
      const { timing } = await transformerNb.translate(sentence, options);
      for (const key of Object.keys(sum)) sum[key] += timing[key];
    }
    result[name] = {
      ...sum,
      msPerToken: sum.decodeMs / sum.generated,                   // per output token (after <s>)
      msPerStep: sum.decodeMs / sum.steps,                        // per decoder step (beam: k hypotheses)
      attentionMsPerSentence: sum.attentionMs / sentences.length, // the extra forward pass for the maps
      msPerSentence: (sum.decodeMs + sum.attentionMs) / sentences.length,
    };
  }
  return result;
}
