"""The hot path: a training step's forward + loss and one cached decoding step read no tensor value on the host, so
`torch.compile` traces each as one graph and a GPU never waits for the CPU; a cached greedy step dispatches only the
operations its computation needs; the fast forms (causal masking alone, the loss at `Batch.rows`) give what the explicit
forms give. CPU tests; the CUDA ones are skipped without a GPU."""
import pytest
import torch
import torch._dynamo as dynamo
from hypothesis import given, settings, strategies as st

from transformer_nb.batch import Batch
import transformer_nb.decoding as decoding
from transformer_nb.decoding import _init_cache, _next_log_probs, greedy_decode, beam_search
from transformer_nb._checks import check_tokens
from transformer_nb.loss import LabelSmoothing, SimpleLossCompute
from transformer_nb.masks import make_std_mask
from transformer_nb.model import make_model

PAD, BOS, EOS, V = 0, 1, 2, 20


def right_padded(n, width, gen, low=1):
    "`n` rows of token ids, each padded at its end to `width`."
    x = torch.randint(3, V, (n, width), generator=gen)
    x[:, 0] = BOS
    lengths = torch.randint(low, width + 1, (n,), generator=gen)
    x[torch.arange(width) >= lengths.unsqueeze(1)] = PAD
    return x


def setup(seed=0, pre_norm=False):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = make_model(V, V, N=2, d_model=32, d_ff=64, h=4, dropout=0.0, padding_idx=PAD, pre_norm=pre_norm)
    batch = Batch(right_padded(4, 9, gen), right_padded(4, 8, gen, low=2), PAD)
    return model, batch, SimpleLossCompute(model.generator, LabelSmoothing(V, PAD, 0.1))


def train_forward(model, loss_compute, batch):
    out = model(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)
    return loss_compute(out, batch.tgt_y, batch.ntokens, batch.rows)[1]


def test_training_forward_and_loss_trace_as_one_graph():
    model, batch, loss_compute = setup()
    assert batch.tgt_mask is None                                      # right-padded: causal masking alone
    dynamo.reset()
    e = dynamo.explain(train_forward)(model, loss_compute, batch)
    assert (e.graph_count, e.graph_break_count) == (1, 0), [str(r.reason)[:200] for r in e.break_reasons]


def test_a_cached_decoding_step_traces_as_one_graph():
    model, batch, _ = setup()
    model.eval()
    with torch.no_grad():
        memory, cache = model.encode(batch.src, batch.src_mask), _init_cache(model, 8)
        ys = torch.full((4, 1), BOS)
        ys = torch.cat([ys, _next_log_probs(model, memory, batch.src_mask, ys, cache).argmax(-1, keepdim=True)], 1)
        dynamo.reset()
        e = dynamo.explain(_next_log_probs)(model, memory, batch.src_mask, ys, cache)
    assert (e.graph_count, e.graph_break_count) == (1, 0), [str(r.reason)[:200] for r in e.break_reasons]


class _Dispatched(torch.utils._python_dispatch.TorchDispatchMode):
    "Counts the ATen operations dispatched inside it that are not views, and the values read back to the host."
    def __init__(self):
        super().__init__()
        self.ops, self.reads = [], 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:          # .item(), int(t), bool(t), t.tolist()
            self.reads += 1
        elif func._schema.is_mutable or not any(r.alias_info for r in func._schema.returns):   # not a view
            self.ops.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def test_a_cached_greedy_step_of_the_shipped_translator_only_computes():
    """One step of greedy decoding with the cache (the shipped translator, N=2): at most 70 operations that are not
    views (13 matrix products, 6 LayerNorms, 4 attentions of one query each, written as 2 batched products and a
    softmax, the embedding, ...; no checks and no mask conversions, which the decoders make once), nothing read back
    to the host, and the key/value cache written in place: its tensor is the same object, one position longer."""
    from transformer_nb.decoding import _greedy_step, _ModelSteps
    from transformer_nb.masks import padding_mask
    from transformer_nb.translator import load_pretrained
    model, tokenizer, _ = load_pretrained()
    src = torch.tensor([tokenizer.encode("Ein Hund läuft durch den Schnee.", True, True)] * 3)
    mask = padding_mask(src, tokenizer.pad)
    with torch.no_grad():
        steps = _ModelSteps(model.eval(), src, mask, 20)
        cache, ys, finished = steps.cache, torch.full((3, 20), tokenizer.bos), torch.zeros(3, dtype=torch.bool)
        _greedy_step(steps, ys, 1, finished, tokenizer.eos, tokenizer.pad)   # allocates
        held = [layer["self"].kv for layer in cache]
        for t in (2, 3):
            with _Dispatched() as seen:
                _greedy_step(steps, ys, t, finished, tokenizer.eos, tokenizer.pad)
            assert len(seen.ops) <= 70 and seen.reads == 0, (len(seen.ops), seen.reads, seen.ops)
            assert "aten.cat" not in seen.ops and seen.ops.count("aten.addmm") == 13 and seen.ops.count("aten.bmm") == 8
            assert all(a is b for a, b in zip((layer["self"].kv for layer in cache), held)) and len(cache[0]["self"]) == t


def test_compiled_training_step_equals_eager():
    "fullgraph=True fails on any graph break; the compiled loss and gradients equal the eager ones."
    model, batch, loss_compute = setup(1)
    eager = train_forward(model, loss_compute, batch)
    grads = torch.autograd.grad(eager, list(model.parameters()))
    compiled = torch.compile(train_forward, fullgraph=True, backend="aot_eager")(model, loss_compute, batch)
    torch.testing.assert_close(compiled, eager)
    for g, h in zip(torch.autograd.grad(compiled, list(model.parameters())), grads):
        torch.testing.assert_close(g, h)


def test_token_check_inside_a_compiled_model_still_refuses_bad_ids():
    f = torch.compile(lambda x: check_tokens(x, V, "src") or x + 1, fullgraph=True, backend="eager")
    assert f(torch.tensor([[1, 2]])).tolist() == [[2, 3]]
    with pytest.raises(RuntimeError, match=r"`src` holds token ids outside \[0, 20\)"):
        f(torch.tensor([[1, V]]))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), pre_norm=st.booleans())
def test_causal_masking_alone_equals_the_full_decoder_mask_at_every_real_position(seed, pre_norm):
    """`tgt_mask=None` (the kernel's causal mask) against make_std_mask's: the same output at every non-pad target
    position, and the same loss and gradients, bit for bit."""
    model, batch, loss_compute = setup(seed, pre_norm)
    dense = make_std_mask(batch.tgt, PAD)
    real = batch.tgt != PAD
    fast, full = model(batch.src, batch.tgt, batch.src_mask), model(batch.src, batch.tgt, batch.src_mask, dense)
    torch.testing.assert_close(fast[real], full[real], rtol=0, atol=1e-5)
    loss_fast = loss_compute(fast, batch.tgt_y, batch.ntokens, batch.rows)[1]
    loss_full = loss_compute(full, batch.tgt_y, batch.ntokens)[1]      # rows found from the labels
    torch.testing.assert_close(loss_fast, loss_full, rtol=0, atol=1e-6)
    for g, h in zip(torch.autograd.grad(loss_fast, list(model.parameters()), allow_unused=True),
                    torch.autograd.grad(loss_full, list(model.parameters()), allow_unused=True)):
        if g is not None:
            torch.testing.assert_close(g, h, rtol=0, atol=1e-5)


def test_a_target_with_padding_before_a_token_keeps_the_full_mask():
    src = torch.tensor([[BOS, 5, EOS], [BOS, 6, EOS]])
    left = Batch(src, torch.tensor([[BOS, 5, 6, EOS], [PAD, BOS, 6, EOS]]), PAD)
    assert left.tgt_mask is not None and torch.equal(left.tgt_mask, make_std_mask(left.tgt, PAD))
    assert left.rows.tolist() == [0, 1, 2, 3, 4, 5] and left.ntokens == 6         # BOS is a label here


def test_greedy_decoding_with_and_without_the_cache_agree():
    model, batch, _ = setup(3)
    kw = dict(max_length=8, start_symbol=BOS, end_symbol=EOS, padding_idx=PAD)
    assert torch.equal(greedy_decode(model, batch.src, batch.src_mask, use_cache=True, **kw),
                       greedy_decode(model, batch.src, batch.src_mask, use_cache=False, **kw))


def early_ending_model(seed: int):
    "A small model whose end symbol is likely enough that the rows of a batch end at different steps."
    torch.manual_seed(seed)
    model = make_model(V, V, N=1, d_model=16, d_ff=32, h=2, padding_idx=PAD).eval()
    with torch.no_grad():
        model.generator.proj.bias[EOS] = 1.5
    return model, torch.randint(3, V, (8, 7))


@pytest.mark.parametrize("seed", range(3))
def test_decoders_asking_every_few_steps_whether_all_rows_ended_give_the_same_output(seed, monkeypatch):
    """On a GPU the decoders read "has every row ended?" only every few steps (a read waits for the GPU); the steps
    they run past the end change nothing: the same tokens, lengths and scores as asking every step."""
    model, src = early_ending_model(seed)
    mask, kw = (src != PAD).unsqueeze(1), dict(max_length=20, start_symbol=BOS, end_symbol=EOS, padding_idx=PAD)
    runs = {}
    for every in (1, 5):
        monkeypatch.setattr(decoding, "_stop_interval", lambda device, every=every: every)
        beams = [beam_search(model, src, mask, beam_size=k, return_scores=True, **kw) for k in (1, 3)]
        runs[every] = [greedy_decode(model, src, mask, **kw)] + [x for beam in beams for x in beam]
    greedy = runs[1][0]
    assert greedy.size(1) < 20                                    # every row ended before max_length ...
    assert len({int((row == EOS).nonzero()[0]) for row in greedy}) > 1   # ... at different steps
    for a, b in zip(runs[1], runs[5]):                            # greedy; beam 1 tokens, scores; beam 3 ...
        assert torch.equal(a, b)


class _Scripted:
    """A model the decoders reach through `steps` (as appendix 16's `OnnxModel`): row i writes token 5 until step
    `ends[i]`, then the end symbol; `keep` follows the rows the decoders keep."""
    max_positions = None

    def __init__(self, ends):
        self.ends = torch.tensor(ends)

    def steps(self, src, src_mask, max_length):
        scripted = _Scripted(self.ends.tolist())
        scripted.log_probs, scripted.keep = scripted._log_probs, scripted._keep
        return scripted

    def _log_probs(self, ys):
        logp, end = torch.full((len(ys), 8), -5.0), self.ends == ys.size(1)   # writing position ys.size(1)
        logp[end, EOS], logp[~end, 5] = 0.0, 0.0
        return logp

    def _keep(self, index, sentences=None):
        self.ends = self.ends[index]


@pytest.mark.parametrize("every", [1, 3, 8])
def test_rows_that_end_between_two_questions_are_kept(every, monkeypatch):
    """Finished rows leave the batch when the decoder asks (every step on a CPU, every 8 on a GPU); rows that end after
    the last question, just before max_length, are still in the output, each in its place."""
    monkeypatch.setattr(decoding, "_stop_interval", lambda device: every)
    ends = [3, 17, 9, 18, 19]                                     # 17, 18, 19: after the last multiple of 8
    out = greedy_decode(_Scripted(ends), torch.zeros(5, 2, dtype=torch.long), None, 20, BOS, EOS, PAD)
    want = torch.full((5, 20), PAD)
    for row, end in enumerate(ends):
        want[row, 0], want[row, 1:end], want[row, end] = BOS, 5, EOS
    assert torch.equal(out, want), out


def test_train_with_compile_trains_the_same_model_and_saves_its_plain_weights(tmp_path):
    "`train(compile=...)`: the same losses as eager (to rounding), and a checkpoint of the model itself, not the wrapper."
    from transformer_nb.checkpoint import read_checkpoint
    from transformer_nb.fit import train
    histories = {}
    for backend in (False, "aot_eager"):                          # aot_eager: traced and compiled, no C++ compiler
        model, batch, _ = setup(5)
        histories[backend] = train([batch] * 3, model, epochs=2, compile=backend, progress=False,
                                   save=tmp_path / f"{backend}.pt")
    for eager, compiled in zip(*histories.values()):
        assert compiled["loss"] == pytest.approx(eager["loss"], rel=1e-5)
    assert set(read_checkpoint(tmp_path / "aot_eager.pt")["model"]) == set(model.state_dict())
    for bad in ("", 1, None):
        with pytest.raises(TypeError, match="`compile` must be True, False or the name of a torch.compile backend"):
            train([batch], model, epochs=1, compile=bad)


def test_train_and_translate_run_without_cudnn_attention(monkeypatch):
    """cuDNN's attention builds a plan for every new input shape, and a run's batches come in many: `train` runs each
    epoch (evaluation included) and `translate` its decoding with it switched off, leave the other kernels as they
    were set (one switched off by the user stays off), restore the setting after, and on a CPU change no number."""
    import transformer_nb.translator as translator
    from transformer_nb.precision import without_cudnn_attention
    from transformer_nb.fit import train
    from transformer_nb.tokenizer import Tokenizer
    kernels = ("cudnn", "flash", "mem_efficient", "math")
    flags = lambda: tuple(getattr(torch.backends.cuda, f"{k}_sdp_enabled")() for k in kernels)
    before, seen = flags(), []
    model, batch, loss_compute = setup()
    train([batch], model, loss_compute, torch.optim.Adam(model.parameters()), epochs=2,
          evaluate=lambda m: seen.append(flags()) or {})
    assert seen == [(False,) + before[1:]] * 2 and flags() == before
    torch.backends.cuda.enable_mem_efficient_sdp(False)                 # the user's own choice
    try:
        with without_cudnn_attention():
            assert flags() == (False, before[1], False, before[3])
        assert flags() == (before[0], before[1], False, before[3])
    finally:
        torch.backends.cuda.enable_mem_efficient_sdp(before[2])
    tokenizer = Tokenizer.train(["ein hund", "a dog"], vocab=None)
    monkeypatch.setattr(translator, "greedy_decode", lambda *a, **k: seen.append(flags()) or torch.ones(1, 2).long())
    small = make_model(len(tokenizer), len(tokenizer), N=1, d_model=32, d_ff=64, h=4, padding_idx=tokenizer.pad)
    translator.translate(small, tokenizer, ["ein hund"], beam_size=1)
    assert seen[-1][0] is False and flags() == before
    model, batch, loss_compute = setup()
    outside = train_forward(model, loss_compute, batch)
    with without_cudnn_attention():
        assert torch.equal(train_forward(model, loss_compute, batch), outside)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@CUDA
def test_cuda_training_step_never_waits_for_the_gpu():
    """A whole training step queues work only (any host-device synchronisation raises): forward, loss at Batch.rows,
    backward, the optimizer's step (fused Adam), the schedule's step and the moving average's update."""
    from transformer_nb.fit import _MovingAverage
    from transformer_nb.schedule import noam_optimizer
    model, batch, loss_compute = setup()
    model, batch = model.cuda(), batch.to("cuda")
    optimizer, scheduler = noam_optimizer(model)
    average = _MovingAverage(model, 0.9, optimizer)
    for step in range(3):                                         # the first update copies, the later ones average
        if step == 1:
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
        try:
            train_forward(model, loss_compute, batch).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    average.hook.remove()


@CUDA
def test_cuda_greedy_and_beam_search_wait_for_the_gpu_only_to_stop():
    """Greedy decoding and beam search on a GPU read the device only where they decide to stop (every 8 steps) and
    once at the end, for the output's length: at most max_length // 8 + 1 synchronisations, counted by PyTorch's sync
    debug mode in its "warn" setting."""
    import warnings
    model, batch, _ = setup()
    model, batch = model.cuda().eval(), batch.to("cuda")
    kw = dict(max_length=17, start_symbol=BOS, end_symbol=EOS, padding_idx=PAD)
    for decode in (lambda: greedy_decode(model, batch.src, batch.src_mask, **kw),
                   lambda: beam_search(model, batch.src, batch.src_mask, beam_size=3, **kw)):
        decode()                                                  # warm-up: allocations, kernels chosen
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                decode()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        syncs = [w for w in caught if "synchroniz" in str(w.message)]
        assert len(syncs) <= 17 // 8 + 1, [str(w.message)[:120] for w in syncs]


@CUDA
def test_cuda_cached_decoding_step_never_waits_for_the_gpu():
    from transformer_nb.decoding import _greedy_step, _ModelSteps
    model, batch, _ = setup()
    model, batch = model.cuda().eval(), batch.to("cuda")
    with torch.no_grad():
        steps = _ModelSteps(model, batch.src, batch.src_mask, 8)
        ys = torch.full((4, 8), BOS, device="cuda")
        finished = torch.zeros(4, dtype=torch.bool, device="cuda")
        _greedy_step(steps, ys, 1, finished, EOS, PAD)   # allocates the cache
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for t in range(2, 5):
                _greedy_step(steps, ys, t, finished, EOS, PAD)
        finally:
            torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("pre_norm", [False, True])
def test_a_cross_attention_cache_shared_by_a_sentences_rows_gives_each_row_its_own_result(pre_norm):
    """Beam search's rows come `beam_size` to a sentence; its cross-attention cache keeps one copy of each sentence's
    keys and values, attended by that sentence's rows as several queries: the same log-probabilities (to float32
    rounding) as a batch with the memory repeated for every row."""
    from transformer_nb.decoding import _ModelSteps
    model, batch, _ = setup(4, pre_norm)
    model.eval()
    group, ys = 3, right_padded(12, 5, torch.Generator().manual_seed(1), low=5)   # 4 sentences, 3 rows each
    with torch.no_grad():
        shared = _ModelSteps(model, batch.src, batch.src_mask, 8)
        shared.log_probs(ys[::group, :1])                              # the first step: one row per sentence
        shared.keep(torch.arange(4).repeat_interleave(group))          # then `group` rows each
        rows = _ModelSteps(model, batch.src.repeat_interleave(group, 0),
                           batch.src_mask.repeat_interleave(group, 0), 8)
        rows.log_probs(ys[:, :1])
        for t in range(2, 5):
            torch.testing.assert_close(shared.log_probs(ys[:, :t]), rows.log_probs(ys[:, :t]))
        assert all(layer["src"].kv.size(1) == 4 for layer in shared.cache)          # one copy per sentence
