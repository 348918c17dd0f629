// demo.js: the page of appendix 14 (and web/demo.html): type German, read English, look at every attention map.
//
// It fills <div id="tnb-demo"> with the controls and translates with engine.js (window.transformerNb) in a Web
// Worker, so the page stays responsive while the model works. The weights are loaded only when the reader presses
// the button, by a <script> tag (a page opened from file:// may run a script but not fetch a file): `data-weights`
// on the div names the file, else weights-int8.js beside this script.
(function () {
  "use strict";

  const EXAMPLES = [                                   // Multi30k's 2016 test set (sentences 0, 2, 3, 6, 13)
    "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
    "Ein Mädchen in einem Karateanzug bricht ein Brett mit einem Tritt.",
    "Fünf Leute in Winterjacken und mit Helmen stehen im Schnee mit Schneemobilen im Hintergrund.",
    "Eine Gruppe von Menschen steht vor einem Iglu.",
    "Ein sitzender Mann, der an einem Tisch in seinem Haus mit einem Werkzeug arbeitet.",
  ];
  const KINDS = { cross: "cross (English → German)", encoder: "encoder self (German)",
                  decoder_self: "decoder self (English)" };
  const SPACE = "\u2581";                              // the tokenizer's word-start mark

  const root = document.getElementById("tnb-demo");
  if (!root || !window.transformerNb) return;
  const here = document.currentScript ? document.currentScript.src : "";
  const weightsUrl = root.dataset.weights || here.replace(/demo\.js(\?.*)?$/, "weights-int8.js");

  function el(tag, props = {}, children = []) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props)) {
      if (key.startsWith("aria-")) node.setAttribute(key, value);
      else node[key] = value;
    }
    node.append(...children);
    return node;
  }
  const options = (pairs) => pairs.map(([value, text]) => el("option", { value, textContent: text }));

  const status = el("span", { className: "tnb-demo-status", textContent: "The model is not loaded yet." });
  const start = el("button", { type: "button", textContent: "Load the model" });
  const examples = el("select", { "aria-label": "a sentence from the test set" },
                      options([["", "or pick a test sentence"], ...EXAMPLES.map((s) => [s, s])]));
  const input = el("textarea", { rows: 2, value: EXAMPLES[0], "aria-label": "German sentence" });
  const beam = el("select", {}, options([["1", "1 (greedy)"], ["4", "4"], ["5", "5"]]));
  beam.value = "5";
  const alpha = el("input", { type: "number", value: "1.2", step: "0.1", min: "0", max: "10" });
  const go = el("button", { type: "button", textContent: "Translate", disabled: true });
  const output = el("p", { className: "tnb-demo-output" });
  const kind = el("select", {}, options(Object.entries(KINDS)));
  const layer = el("select");
  const head = el("select");
  const cell = el("p", { className: "tnb-demo-cell", textContent: "" });
  const maps = el("div", { className: "tnb-demo-maps" });
  const label = (text, control) => el("label", {}, [text + " ", control]);
  root.replaceChildren(
    el("p", { className: "tnb-demo-row" }, [start, " ", status]),
    el("p", { className: "tnb-demo-row" }, [examples]),
    input,
    el("p", { className: "tnb-demo-row" }, [label("beam", beam), " ", label("length penalty α", alpha), " ", go]),
    output,
    el("p", { className: "tnb-demo-row" }, [label("attention", kind), " ", label("layer", layer), " ",
                                            label("head", head)]),
    cell,
    maps,
  );

  let translator = null;                               // engine.js's translator, in a worker where one can start
  let last = null;                                     // the latest translation, with its maps

  // One map: a table, a row per query token and a column per key token; darker is more weight.
  function heatMap(weights, rows, cols, title) {
    const table = el("table", { className: "tnb-map" });
    table.createCaption().textContent = title;
    const top = table.createTHead().insertRow();
    top.append(el("th"), ...cols.map((c) => el("th", { scope: "col", textContent: c })));
    const body = table.createTBody();
    weights.forEach((row, i) => {
      const tr = body.insertRow();
      tr.append(el("th", { scope: "row", textContent: rows[i] }));
      row.forEach((w, j) => {
        const td = tr.insertCell();
        td.style.background = `rgba(30, 70, 170, ${w.toFixed(3)})`;
        td.title = `${rows[i]} → ${cols[j]}: ${w.toFixed(3)}`;
        td.dataset.weight = w.toFixed(3);
      });
    });
    return table;
  }

  let drawing = 0;                                     // which request to draw is the latest; an older one stops

  // The maps of the chosen kind, layer and head(s), one map per frame, so that no drawing holds the page for long.
  async function showMaps() {
    if (!last) return;
    const mine = ++drawing;
    const piece = (p) => (p === SPACE ? "▁" : p.replace(SPACE, ""));
    const src = last.srcPieces.map(piece), tgt = last.tgtPieces.slice(0, -1).map(piece);   // decoder input
    const k = kind.value, rows = k === "encoder" ? src : tgt, cols = k === "decoder_self" ? tgt : src;
    const l = +layer.value, heads = last.attention[k][l];
    const shown = head.value === "all" ? heads.map((w, h) => [w, h]) : [[heads[+head.value], +head.value]];
    maps.replaceChildren();
    cell.textContent = "Point at a cell (or tap it) to read its weight.";
    for (const [w, h] of shown) {
      await afterNextFrame();                          // what is already there is drawn before the next map is built
      if (mine !== drawing) return;                    // a newer request took over
      maps.append(heatMap(w, rows, cols, `layer ${l + 1}, head ${h}`));
    }
  }

  // Resolves once the page has drawn a frame: a task queued from requestAnimationFrame runs after that frame's
  // drawing, so each map is laid out and painted in a frame of its own. A hidden page draws no frames (and runs no
  // requestAnimationFrame): there, the next task.
  function afterNextFrame() {
    if (document.hidden) return new Promise((resolve) => setTimeout(resolve, 0));
    return new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  }

  async function translate() {
    drawing += 1;                                      // the maps of an earlier translation stop being drawn
    go.disabled = true;
    output.textContent = "…";
    await new Promise((resolve) => setTimeout(resolve, 0));   // let the page draw before the work starts
    try {
      last = await translator.translate(input.value, { beam: +beam.value, lengthPenalty: +alpha.value,
                                                         attention: true });
      output.textContent = last.text;
      status.textContent = `${last.timing.generated} tokens in ${last.timing.decodeMs.toFixed(0)} ms, ` +
        `the attention maps in ${last.timing.attentionMs.toFixed(0)} ms (${translator.where}).`;
      showMaps();
    } catch (error) {
      last = null;
      output.textContent = error.message;
      maps.replaceChildren();
    } finally {
      go.disabled = false;
    }
  }

  // The translator in a Web Worker; where none can start (a browser without workers), in the page itself.
  async function startTranslator(weights) {
    try {
      return { ...(await window.transformerNb.startWorker(weights)), where: "in a Web Worker" };
    } catch {                                          // bad weights throw again here, with their message
      const inPage = window.transformerNb.createTranslator(weights);
      return { ...inPage, translate: async (text, options) => inPage.translate(text, options), where: "in the page" };
    }
  }

  function load() {
    start.disabled = true;
    status.textContent = "Loading the weights…";
    const script = el("script", { src: weightsUrl });
    script.onload = async () => {
      try {
        const weights = window.transformerNbWeights;
        const megabytes = (weights.data.length * 3) / 4 / 1e6;
        const info = (translator = await startTranslator(weights));
        status.textContent = `Loaded: ${info.dtype} weights, ${megabytes.toFixed(1)} MB of weights, ready in ` +
                             `${info.loadMs.toFixed(0)} ms, ${info.where}, its linear layers in ${info.kernel}.`;
        layer.replaceChildren(...options(Array.from({ length: info.config.N }, (_, i) => [i, String(i + 1)])));
        head.replaceChildren(...options([["all", "all"], ...Array.from({ length: info.config.h }, (_, i) => [i, String(i)])]));
        start.hidden = true;
        go.disabled = false;
        translate();
      } catch (error) {
        status.textContent = `Could not load the model: ${error.message}`;
        start.disabled = false;
      }
    };
    script.onerror = () => {
      status.textContent = `Could not load ${weightsUrl}.`;
      start.disabled = false;
    };
    document.head.append(script);
  }

  function describe(event) {
    const td = event.target.closest("td");
    if (td && td.dataset.weight) cell.textContent = td.title;
  }

  start.onclick = load;
  go.onclick = translate;
  examples.onchange = () => {
    if (examples.value) input.value = examples.value;
    if (!go.disabled) translate();
  };
  kind.onchange = layer.onchange = head.onchange = showMaps;
  maps.addEventListener("mouseover", describe);
  maps.addEventListener("click", describe);
})();
