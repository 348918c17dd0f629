"""Draw the book's diagrams into this folder: `python nbs/images/draw.py`.

model.svg: the encoder-decoder with this package's class names and the shapes between them.
beam.svg: a beam of two on chapter 06's table model.
sublayer.svg: the residual sublayer, post-norm and pre-norm.
attention.svg: scaled dot-product and multi-head attention, with shapes.
batch.svg: a training batch, shifted, through the model and the loss.
"""
from pathlib import Path
from xml.sax.saxutils import escape

FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif'


def card(width, height, label: str, css: str, body: list) -> str:
    "An SVG document: a white card (readable in dark mode too) with the shared font and arrowhead, `css`, and `body`."
    return f'''<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img"
 aria-label="{label}">
<style>
 text {{ font-family: {FONT}; fill: #1f2328; }}{css.rstrip()}
</style>
<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
 <path d="M 0 0 L 10 5 L 0 10 z" fill="#444"/></marker></defs>
<rect x="0" y="0" width="{width}" height="{height}" rx="10" fill="#ffffff"/>
{chr(10).join(body)}
</svg>
'''
W, H = 560, 752
out = []
def box(x, y, w, h, fill, stroke, lines, r=8, dash=False):
    out.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{r}" fill="{fill}" stroke="{stroke}" stroke-width="1.5"'
               + (' stroke-dasharray="5 4"' if dash else '') + '/>')
    n = len(lines)
    for i, (text, cls) in enumerate(lines):
        ty = y + h / 2 + (i - (n - 1) / 2) * 19 + 5
        out.append(f'<text x="{x + w / 2}" y="{ty:.1f}" class="{cls}" text-anchor="middle">{escape(text)}</text>')
def arrow(x1, y1, x2, y2):
    out.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" class="arrow" marker-end="url(#head)"/>')
def label(x, y, text, cls="shape", anchor="middle"):
    out.append(f'<text x="{x}" y="{y}" class="{cls}" text-anchor="{anchor}">{escape(text)}</text>')

ATT, FF, NORM, EMB, GEN = ("#fde7cf", "#c46a1d"), ("#dbe8fb", "#3a6db5"), ("#f3f0c9", "#8d7f14"), ("#f5dbe8", "#a73d73"), ("#dcf2dc", "#3a8a3a")
EX, DX, CW = 14, 304, 242            # encoder x, decoder x, column width
# inputs
box(EX, 700, CW, 44, "#ffffff", "#666", [("src: token ids", "name"), ("(batch, len_src)", "shape")])
box(DX, 700, CW, 44, "#ffffff", "#666", [("tgt: token ids, from <s>", "name"), ("(batch, len_tgt)", "shape")])
for x in (EX, DX):
    arrow(x + CW / 2, 700, x + CW / 2, 676)
    box(x, 618, CW, 56, *EMB, [("Embeddings", "name"), ("lookup × √d_model", "desc")])
    arrow(x + CW / 2, 618, x + CW / 2, 596)
    box(x, 540, CW, 54, *EMB, [("PositionalEncoding", "name"), ("+ sinusoids, dropout", "desc")])
    arrow(x + CW / 2, 540, x + CW / 2, 514)
# encoder stack
box(EX - 6, 316, CW + 12, 196, "none", "#888", [], dash=True)
box(EX + 8, 430, CW - 16, 70, *ATT, [("MultiHeadedAttention", "name"), ("self-attention, mask", "desc"), ("(batch, 1, len_src)", "shape")])
arrow(EX + CW / 2, 430, EX + CW / 2, 408)
box(EX + 8, 350, CW - 16, 56, *FF, [("PositionwiseFeedForward", "name"), ("d_model → d_ff → d_model", "desc")])
arrow(EX + CW / 2, 350, EX + CW / 2, 298)
box(EX, 240, CW, 56, "#ffffff", "#666", [("memory", "name"), ("(batch, len_src, d_model)", "shape")])
# decoder stack
box(DX - 6, 180, CW + 12, 332, "none", "#888", [], dash=True)
box(DX + 8, 430, CW - 16, 70, *ATT, [("MultiHeadedAttention", "name"), ("masked self-attention, mask", "desc"), ("(batch, len_tgt, len_tgt)", "shape")])
arrow(DX + CW / 2, 430, DX + CW / 2, 408)
box(DX + 8, 336, CW - 16, 70, *ATT, [("MultiHeadedAttention", "name"), ("cross: keys, values = memory", "desc"), ("mask (batch, 1, len_src)", "shape")])
arrow(DX + CW / 2, 336, DX + CW / 2, 300)
box(DX + 8, 242, CW - 16, 56, *FF, [("PositionwiseFeedForward", "name"), ("d_model → d_ff → d_model", "desc")])
# memory into cross-attention
out.append(f'<path d="M {EX + CW} 268 L {DX - 24} 268 L {DX - 24} 371 L {DX + 6} 371" class="arrow" fill="none" marker-end="url(#head)"/>')
arrow(DX + CW / 2, 242, DX + CW / 2, 152)
box(DX, 94, CW, 56, *GEN, [("Generator", "name"), ("linear + log_softmax", "desc")])
arrow(DX + CW / 2, 94, DX + CW / 2, 72)
box(DX, 14, CW, 56, "#ffffff", "#666", [("log-probabilities", "name"), ("(batch, len_tgt, vocab)", "shape")])
label(EX, 338, "Encoder: N × EncoderLayer", "stack", "start")
label(DX, 202, "Decoder: N × DecoderLayer", "stack", "start")
label(EX, 36, "EncoderDecoder", "title", "start")
label(EX, 62, "make_model(src_vocab, tgt_vocab,", "desc", "start")
label(EX, 82, "N, d_model, d_ff, h, dropout)", "desc", "start")
label(EX, 116, "each orange or blue box is wrapped", "desc", "start")
label(EX, 135, "in a SublayerConnection:", "desc", "start")
label(EX, 154, "LayerNorm(x + dropout(f(x)))", "shape", "start")
label(EX, 173, "(post-norm; pre-norm: chapter 03)", "desc", "start")
label(EX, 200, "embeddings up to generator:", "desc", "start")
label(EX, 219, "(batch, len, d_model)", "desc", "start")

svg = card(W, H, "The encoder-decoder Transformer, with this package's class names and the shapes of the tensors between them", """
 .name { font-size: 15px; font-weight: 600; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .desc { font-size: 14px; }
 .shape { font-size: 13px; fill: #4a4f55; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .stack { font-size: 15px; font-weight: 600; paint-order: stroke; stroke: #ffffff; stroke-width: 6px; }
 .title { font-size: 20px; font-weight: 700; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .arrow { stroke: #444; stroke-width: 1.8; }
""", out)
Path(__file__).with_name("model.svg").write_text(svg)


# ---------------------------------------------------------------------------------------------------------------------
# beam.svg: chapter 06's table model, searched with a beam of 2
def beam_svg():
    W, H = 560, 424
    o = []
    def node(x, y, text, p, kind, above=False):
        fill, stroke, width = {"live": ("#fde7cf", "#c46a1d", 1.5), "done": ("#dcf2dc", "#3a8a3a", 1.5),
                               "best": ("#dcf2dc", "#1f6b1f", 3.5), "cut": ("#f0f0f0", "#9a9a9a", 1.2)}[kind]
        o.append(f'<rect x="{x - 34}" y="{y - 17}" width="68" height="34" rx="8" fill="{fill}" stroke="{stroke}" stroke-width="{width}"/>')
        o.append(f'<text x="{x}" y="{y + 5}" class="tok{" cut" if kind == "cut" else ""}" text-anchor="middle">{escape(text)}</text>')
        if p and above:
            o.append(f'<text x="{x}" y="{y - 24}" class="p" text-anchor="middle">{escape(p)}</text>')
        elif p:
            o.append(f'<text x="{x + 42}" y="{y + 5}" class="p{" cut" if kind == "cut" else ""}">{escape(p)}</text>')
    def edge(x1, y1, x2, y2, prob, kind="plain"):
        cls = {"plain": "edge", "greedy": "edge greedy", "cut": "edge cutedge"}[kind]
        o.append(f'<line x1="{x1 + 34}" y1="{y1}" x2="{x2 - 34}" y2="{y2}" class="{cls}"/>')
        t = 0.62                                                     # label nearer the child, where edges fan apart
        mx, my = x1 + 34 + t * (x2 - x1 - 68), y1 + t * (y2 - y1)
        o.append(f'<text x="{mx}" y="{my - 6}" class="edgep" text-anchor="middle">{prob}</text>')
    X0, X1, X2 = 50, 200, 380
    node(X0, 175, "<s>", "", "live")
    edge(X0, 175, X1, 110, "0.6", "greedy"); edge(X0, 175, X1, 240, "0.4")
    node(X1, 110, "A", "0.6", "live", above=True); node(X1, 240, "B", "0.4", "live", above=True)
    for y, tok, p, prob, kind in ((60, "</s>", "0.24", "0.4", "done"), (110, "A", "0.18", "0.3", "live"), (160, "B", "0.18", "0.3", "live")):
        edge(X1, 110, X2, y, prob, "greedy" if tok == "</s>" else "plain"); node(X2, y, tok, p, kind)
    for y, tok, p, prob, kind in ((210, "</s>", "0.36", "0.9", "best"), (260, "A", "0.02", "0.05", "cut"), (310, "B", "0.02", "0.05", "cut")):
        edge(X1, 240, X2, y, prob, "cut" if kind == "cut" else "plain"); node(X2, y, tok, p, kind)
    o.append(f'<text x="{X1}" y="26" class="head" text-anchor="middle">step 1</text>')
    o.append(f'<text x="{X2}" y="26" class="head" text-anchor="middle">step 2</text>')
    notes = ["greedy (dashed): A, then </s>: 0.6 × 0.4 = 0.24",
             "beam of 2: best finished B </s> = 0.36; the live A A and A B",
             "are at 0.18 and can only fall, so the search stops",
             "grey: pruned (not among the 2 best going on)"]
    for n, text in enumerate(notes):
        o.append(f'<text x="16" y="{352 + 19 * n}" class="note">{escape(text)}</text>')
    return card(W, H, "A beam search tree of width 2 over the vocabulary end, A, B, with the probability of every hypothesis", """
 .tok { font-size: 16px; font-weight: 600; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .p { font-size: 14px; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .cut { fill: #8a8a8a; }
 .edgep { font-size: 13px; fill: #4a4f55; }
 .head { font-size: 15px; font-weight: 600; }
 .note { font-size: 14px; }
 .edge { stroke: #555; stroke-width: 1.6; }
 .greedy { stroke: #c46a1d; stroke-width: 2.6; stroke-dasharray: 7 4; }
 .cutedge { stroke: #b5b5b5; }
""", o)


Path(__file__).with_name("beam.svg").write_text(beam_svg())


# ---------------------------------------------------------------------------------------------------------------------
# sublayer.svg: SublayerConnection, post-norm and pre-norm
def sublayer_svg():
    W, H = 560, 440
    o = []
    def box(cx, cy, text, fill, stroke, w=150):
        o.append(f'<rect x="{cx - w / 2}" y="{cy - 19}" width="{w}" height="38" rx="8" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>')
        o.append(f'<text x="{cx}" y="{cy + 5}" class="name" text-anchor="middle">{escape(text)}</text>')
    def plus(cx, cy):
        o.append(f'<circle cx="{cx}" cy="{cy}" r="14" fill="#ffffff" stroke="#444" stroke-width="1.8"/>')
        o.append(f'<text x="{cx}" y="{cy + 6}" class="plus" text-anchor="middle">+</text>')
    def up(x, y1, y2):
        o.append(f'<line x1="{x}" y1="{y1}" x2="{x}" y2="{y2}" class="arrow" marker-end="url(#head)"/>')
    NORM, F, DROP = ("#f3f0c9", "#8d7f14"), ("#fde7cf", "#c46a1d"), ("#ececec", "#777")
    for cx, title, order in ((140, "post-norm (the paper)", "post"), (420, "pre-norm", "pre")):
        o.append(f'<text x="{cx}" y="30" class="head" text-anchor="middle">{title}</text>')
        o.append(f'<text x="{cx}" y="392" class="name" text-anchor="middle">x</text>')
        up(cx, 376, 350 if order == "pre" else 300)
        if order == "post":
            box(cx, 280, "sublayer f", *F); up(cx, 261, 226)
            box(cx, 207, "dropout", *DROP); up(cx, 188, 160)
            plus(cx, 145); up(cx, 131, 104)
            box(cx, 85, "LayerNorm", *NORM); up(cx, 66, 48)
        else:
            box(cx, 331, "LayerNorm", *NORM); up(cx, 312, 280)
            box(cx, 261, "sublayer f", *F); up(cx, 242, 212)
            box(cx, 193, "dropout", *DROP); up(cx, 174, 160)
            plus(cx, 145); up(cx, 131, 48)
        # the residual path: from x, around the right side, into the +
        o.append(f'<path d="M {cx} 366 L {cx + 105} 366 L {cx + 105} 145 L {cx + 16} 145" class="arrow res" fill="none" marker-end="url(#head)"/>')
        o.append(f'<text x="{cx + 111}" y="260" class="desc" transform="rotate(90 {cx + 111} 260)" text-anchor="middle">residual</text>')
    o.append('<text x="140" y="414" class="formula" text-anchor="middle">LayerNorm(x + dropout(f(x)))</text>')
    o.append('<text x="420" y="414" class="formula" text-anchor="middle">x + dropout(f(LayerNorm(x)))</text>')
    o.append('<text x="420" y="434" class="desc" text-anchor="middle">and one LayerNorm at the end of each stack</text>')
    return card(W, H + 6, "SublayerConnection in post-norm and pre-norm placement", """
 .name { font-size: 15px; font-weight: 600; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .formula { font-size: 14px; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .head { font-size: 16px; font-weight: 700; }
 .desc { font-size: 13px; fill: #4a4f55; }
 .plus { font-size: 20px; font-weight: 700; }
 .arrow { stroke: #444; stroke-width: 1.8; }
 .res { stroke: #3a6db5; stroke-width: 2.2; }
""", o)


Path(__file__).with_name("sublayer.svg").write_text(sublayer_svg())


# ---------------------------------------------------------------------------------------------------------------------
# attention.svg: scaled dot-product attention and multi-head attention, with shapes
def attention_svg():
    W, H = 560, 560
    o = []
    def box(cx, cy, text, shape, fill, stroke, w=236, h=46):
        o.append(f'<rect x="{cx - w / 2}" y="{cy - h / 2}" width="{w}" height="{h}" rx="8" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>')
        dy = 0 if not shape else -8
        o.append(f'<text x="{cx}" y="{cy + 5 + dy}" class="name" text-anchor="middle">{escape(text)}</text>')
        if shape:
            o.append(f'<text x="{cx}" y="{cy + 14}" class="shape" text-anchor="middle">{escape(shape)}</text>')
    def up(x, y1, y2, x2=None):
        o.append(f'<line x1="{x}" y1="{y1}" x2="{x2 if x2 is not None else x}" y2="{y2}" class="arrow" marker-end="url(#head)"/>')
    ATT, LIN, OPS, IO = ("#fde7cf", "#c46a1d"), ("#dbe8fb", "#3a6db5"), ("#f3f0c9", "#8d7f14"), ("#ffffff", "#666")
    L, R = 140, 420
    o.append(f'<text x="{L}" y="28" class="head" text-anchor="middle">scaled dot-product attention</text>')
    o.append(f'<text x="{R}" y="28" class="head" text-anchor="middle">multi-head attention</text>')
    # left column, bottom to top
    for x, t in ((L - 80, "Q"), (L, "K"), (L + 80, "V")):
        o.append(f'<rect x="{x - 30}" y="500" width="60" height="34" rx="8" fill="#ffffff" stroke="#666" stroke-width="1.5"/>')
        o.append(f'<text x="{x}" y="522" class="name" text-anchor="middle">{t}</text>')
    o.append(f'<text x="{L}" y="552" class="shape" text-anchor="middle">(b, h, len, d_k) each</text>')
    up(L - 80, 500, 466, L - 40); up(L, 500, 466, L - 10)
    box(L - 20, 444, "Q Kᵀ / √d_k", "(b, h, len_q, len_k)", *OPS, w=196)
    up(L - 20, 421, 392)
    box(L - 20, 370, "masked_fill", "where the mask is False", *OPS, w=196)
    up(L - 20, 347, 318)
    box(L - 20, 296, "softmax, then zeros", "where the mask is False", *OPS, w=196)
    up(L - 20, 273, 244)
    box(L - 20, 222, "dropout", "", "#ececec", "#777", w=196, h=38)
    up(L - 20, 203, 176)
    o.append(f'<path d="M {L + 80} 500 L {L + 110} 500 L {L + 110} 154 L {L + 80} 154" class="arrow" fill="none" marker-end="url(#head)"/>')
    box(L - 20, 154, "weights · V", "(b, h, len_q, d_k)", *OPS, w=196)
    up(L - 20, 131, 100)
    o.append(f'<text x="{L - 20}" y="86" class="shape" text-anchor="middle">attention(q, k, v, mask)</text>')
    # right column
    o.append(f'<text x="{R}" y="552" class="shape" text-anchor="middle">query, key, value (b, len, d_model)</text>')
    for x in (R - 80, R, R + 80):
        up(x, 534, 500)
    box(R, 478, "w_qkv", "Q, K, V: d_model → d_model each", *LIN, w=250)
    up(R, 455, 426)
    box(R, 404, "split_heads", "→ (b, h, len, d_k)", *OPS, w=250)
    up(R, 381, 352)
    box(R, 330, "attention, h heads at once", "(b, h, len_q, d_k)", *ATT, w=250)
    up(R, 307, 278)
    box(R, 256, "merge heads", "→ (b, len_q, d_model)", *OPS, w=250)
    up(R, 233, 204)
    box(R, 182, "w_o", "d_model → d_model", *LIN, w=250)
    up(R, 159, 130)
    o.append(f'<text x="{R}" y="120" class="shape" text-anchor="middle">(b, len_q, d_model)</text>')
    o.append(f'<text x="{R}" y="60" class="shape" text-anchor="middle">MultiHeadedAttention(h, d_model)</text>')
    o.append(f'<text x="{R}" y="82" class="desc" text-anchor="middle">d_k = d_model / h</text>')
    o.append(f'<line x1="{L + 40}" y1="330" x2="{R - 126}" y2="330" class="link"/>')
    return card(W, H + 10, "Scaled dot-product attention and multi-head attention, with the shape of every tensor", """
 .name { font-size: 15px; font-weight: 600; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .shape { font-size: 13px; fill: #4a4f55; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .head { font-size: 16px; font-weight: 700; }
 .desc { font-size: 14px; fill: #1f2328; }
 .arrow { stroke: #444; stroke-width: 1.8; }
 .link { stroke: #c46a1d; stroke-width: 1.5; stroke-dasharray: 5 4; }
""", o)


Path(__file__).with_name("attention.svg").write_text(attention_svg())


# ---------------------------------------------------------------------------------------------------------------------
# batch.svg: a training batch through one forward pass and the loss
def batch_svg():
    W, H = 560, 520
    o = []
    def cell(x, y, text, fill="#ffffff", stroke="#666", w=62):
        o.append(f'<rect x="{x}" y="{y}" width="{w}" height="30" fill="{fill}" stroke="{stroke}" stroke-width="1.2"/>')
        o.append(f'<text x="{x + w / 2}" y="{y + 20}" class="tok" text-anchor="middle">{escape(text)}</text>')
    def box(cx, cy, text, shape, fill, stroke, w=330, h=46):
        o.append(f'<rect x="{cx - w / 2}" y="{cy - h / 2}" width="{w}" height="{h}" rx="8" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>')
        o.append(f'<text x="{cx}" y="{cy - 3}" class="name" text-anchor="middle">{escape(text)}</text>')
        o.append(f'<text x="{cx}" y="{cy + 15}" class="shape" text-anchor="middle">{escape(shape)}</text>')
    def down(x, y1, y2):
        o.append(f'<line x1="{x}" y1="{y1}" x2="{x}" y2="{y2}" class="arrow" marker-end="url(#head)"/>')
    o.append('<text x="16" y="28" class="head">Batch(src, tgt, pad): one target sentence, shifted</text>')
    words = ["<s>", "a", "dog", "runs", "</s>", "<pad>"]
    X0 = 120
    o.append('<text x="16" y="66" class="label">sentence</text>')
    for i, w in enumerate(words):
        cell(X0 + 66 * i, 46, w, "#f0f0f0" if w == "<pad>" else "#ffffff")
    o.append('<text x="16" y="116" class="label">tgt</text>')
    o.append('<text x="16" y="132" class="small">decoder input</text>')
    for i, w in enumerate(words[:-1]):
        cell(X0 + 66 * i, 100, w, "#fde7cf", "#c46a1d")
    o.append('<text x="16" y="170" class="label">tgt_y</text>')
    o.append('<text x="16" y="186" class="small">labels</text>')
    for i, w in enumerate(words[1:]):
        cell(X0 + 66 * i, 154, w, "#f0f0f0" if w == "<pad>" else "#dcf2dc", "#999" if w == "<pad>" else "#3a8a3a")
    o.append(f'<text x="{X0}" y="204" class="small">column t: tgt up to t predicts tgt_y[t], the next token;</text>')
    o.append(f'<text x="{X0}" y="219" class="small">ntokens counts the labels that are not padding</text>')
    CX = 280
    box(CX, 262, "model(src, tgt, src_mask, tgt_mask)", "src (b, len_src), tgt (b, len_t) → (b, len_t, d_model)", "#dbe8fb", "#3a6db5", w=470)
    down(CX, 285, 304)
    box(CX, 328, "model.generator, at the positions with a label", "→ log-probabilities (ntokens, vocab)", "#dcf2dc", "#3a8a3a", w=470)
    down(CX, 351, 380)
    box(CX, 404, "LabelSmoothing against those labels", "summed over the ntokens labels", "#f3f0c9", "#8d7f14", w=470)
    down(CX, 427, 456)
    box(CX, 480, "÷ ntokens → loss, then backward()", "one number: the loss per label", "#ffffff", "#666", w=470)
    return card(W, H + 10, "A training batch: the target is shifted into decoder input and labels, then flows through the model, the generator and the loss", """
 .tok { font-size: 14px; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .name { font-size: 15px; font-weight: 600; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .shape { font-size: 13px; fill: #4a4f55; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .head { font-size: 16px; font-weight: 700; }
 .label { font-size: 15px; font-weight: 600; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
 .small { font-size: 12px; fill: #4a4f55; }
 .arrow { stroke: #444; stroke-width: 1.8; }
""", o)


Path(__file__).with_name("batch.svg").write_text(batch_svg())
