// Typeset the site's math ahead of time: TeX in, SVG out, with MathJax 3 (npm package mathjax-full), so that pages
// load no MathJax script (2 MB) and show their equations without JavaScript. Run by nbs/build_docs.py:
// stdin: {"pages": {"name": [[tex, display], ...]}}; stdout: {"css": "...", "pages": {"name": {"math": [svg, ...],
// "cache": svg}}}, where "cache" holds the glyph shapes the page's equations share (MathJax's global font cache).
const {mathjax} = require('mathjax-full/js/mathjax.js');
const {TeX} = require('mathjax-full/js/input/tex.js');
const {SVG} = require('mathjax-full/js/output/svg.js');
const {liteAdaptor} = require('mathjax-full/js/adaptors/liteAdaptor.js');
const {RegisterHTMLHandler} = require('mathjax-full/js/handlers/html.js');
const {AllPackages} = require('mathjax-full/js/input/tex/AllPackages.js');

const adaptor = liteAdaptor();
RegisterHTMLHandler(adaptor);

let input = '';
process.stdin.on('data', (d) => input += d);
process.stdin.on('end', () => {
  const pages = JSON.parse(input).pages;
  const result = {css: '', pages: {}};
  for (const [name, equations] of Object.entries(pages)) {
    const svg = new SVG({fontCache: 'global'});
    const doc = mathjax.document('', {InputJax: new TeX({packages: AllPackages, formatError: (jax, err) => {
      throw new Error(`${name}: cannot typeset TeX: ${err.message}`);
    }}), OutputJax: svg});
    const math = equations.map(([tex, display]) => {
      const node = doc.convert(tex, {display: display, em: 16, ex: 8, containerWidth: 1000});
      const svgNode = adaptor.firstChild(node);
      adaptor.setAttribute(svgNode, 'aria-label', tex);              // what a screen reader says: the TeX
      return adaptor.outerHTML(node);
    });
    const cache = svg.pageElements(doc);
    result.pages[name] = {math: math, cache: cache ? adaptor.outerHTML(cache) : ''};
    if (!result.css) result.css = adaptor.textContent(svg.styleSheet(doc));
  }
  process.stdout.write(JSON.stringify(result));
});
