"""Property-based correctness tests (hypothesis): causality, padding invariance, permutation equivariance,
gradients, determinism, and clear errors for bad input. Sizes are bounded so the suite stays fast."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from transformer_nb.attention import attention, MultiHeadedAttention
from transformer_nb.copy_task import CopyRecipe, train_copy
from transformer_nb.masks import padding_mask, make_std_mask, subsequent_mask
from transformer_nb.model import make_model

PAD = 0
V = 13
FAST = settings(max_examples=25, deadline=None)


def small_model(seed, pre_norm=False, learned_pos=False, dropout=0.0, max_positions=64):
    torch.manual_seed(seed)
    return make_model(V, V, N=2, d_model=16, d_ff=32, h=2, dropout=dropout, pre_norm=pre_norm,
                      learned_pos=learned_pos, max_positions=max_positions, padding_idx=PAD).eval()


def tokens(gen, batch, length, lengths=None):
    t = torch.randint(1, V, (batch, length), generator=gen)
    if lengths is not None:
        t[torch.arange(length) >= lengths.unsqueeze(1)] = PAD
    return t


@FAST
@given(seed=st.integers(0, 10_000), pre_norm=st.booleans(), learned_pos=st.booleans(),
       batch=st.integers(1, 3), len_src=st.integers(1, 8), len_tgt=st.integers(2, 9), data=st.data())
def test_decoder_is_causal(seed, pre_norm, learned_pos, batch, len_src, len_tgt, data):
    "Decoder outputs before position t do not depend on target tokens at or after t."
    t = data.draw(st.integers(0, len_tgt - 1))
    model, gen = small_model(seed, pre_norm, learned_pos), torch.Generator().manual_seed(seed)
    src, tgt = tokens(gen, batch, len_src), tokens(gen, batch, len_tgt)
    changed = tgt.clone()
    changed[:, t:] = tokens(gen, batch, len_tgt - t)
    src_mask = padding_mask(src, PAD)
    with torch.no_grad():
        a = model(src, tgt, src_mask, make_std_mask(tgt, PAD))
        b = model(src, changed, src_mask, make_std_mask(changed, PAD))
    torch.testing.assert_close(a[:, :t], b[:, :t], rtol=0, atol=1e-5)


@FAST
@given(seed=st.integers(0, 10_000), pre_norm=st.booleans(), batch=st.integers(1, 3),
       len_src=st.integers(1, 8), extra=st.integers(1, 5), len_tgt=st.integers(2, 8))
def test_masked_source_padding_changes_nothing(seed, pre_norm, batch, len_src, extra, len_tgt):
    "Appending masked padding to the source leaves the encoder (at real positions) and the decoder unchanged."
    model, gen = small_model(seed, pre_norm), torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, len_src + 1, (batch,), generator=gen)
    src = tokens(gen, batch, len_src, lengths)
    padded = torch.cat([src, torch.full((batch, extra), PAD)], dim=1)
    tgt = tokens(gen, batch, len_tgt)
    with torch.no_grad():
        mem_a, mem_b = model.encode(src, padding_mask(src, PAD)), model.encode(padded, padding_mask(padded, PAD))
        out_a = model(src, tgt, padding_mask(src, PAD), make_std_mask(tgt, PAD))
        out_b = model(padded, tgt, padding_mask(padded, PAD), make_std_mask(tgt, PAD))
    real = padding_mask(src, PAD)[:, 0]
    torch.testing.assert_close(mem_a[real], mem_b[:, :len_src][real], rtol=0, atol=1e-5)
    torch.testing.assert_close(out_a, out_b, rtol=0, atol=1e-5)


@pytest.mark.parametrize("pre_norm", [False, True])
def test_fully_padded_sequence_is_refused_at_the_entry_and_finite_inside(pre_norm):
    """A source made only of padding is refused where it enters the model (`src_mask` names it); the encoder and
    decoder below the entry still give finite outputs and finite gradients for it."""
    model = small_model(0, pre_norm).train()
    src = torch.tensor([[PAD] * 5, [3, 4, 5, PAD, PAD]])
    tgt = torch.tensor([[1, 4, 5], [1, 6, 7]])
    with pytest.raises(ValueError, match="`src_mask` masks every position of sentence 0"):
        model(src, tgt, padding_mask(src, PAD), make_std_mask(tgt, PAD))
    memory = model.encoder(model.src_embed(src), padding_mask(src, PAD))
    out = model.generator(model.decoder(model.tgt_embed(tgt), memory, padding_mask(src, PAD), make_std_mask(tgt, PAD)))
    assert torch.isfinite(out).all()
    out.sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is None or torch.isfinite(p.grad).all(), name


def test_an_ignore_mask_for_the_source_is_refused():
    "PyTorch's convention (True = padding) handed to the model as its keep-mask: one line naming it."
    from transformer_nb.masks import keep_to_ignore
    model = small_model(0)
    src, tgt = torch.tensor([[3, 4, 5, PAD, PAD]]), torch.tensor([[1, 4, 5]])
    with pytest.raises(ValueError, match="`src_mask` keeps exactly the padding .id 0. .*an ignore-mask"):
        model(src, tgt, keep_to_ignore(padding_mask(src, PAD)), None)
    model(src, tgt, padding_mask(src, PAD), None)                      # the keep-mask: accepted


@FAST
@given(seed=st.integers(0, 10_000), pre_norm=st.booleans(), batch=st.integers(1, 3), length=st.integers(2, 9),
       use_mask=st.booleans())
def test_encoder_without_positions_is_permutation_equivariant(seed, pre_norm, batch, length, use_mask):
    "Without positional encoding, permuting the input positions permutes the encoder's outputs the same way."
    model, gen = small_model(seed, pre_norm), torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, 16, generator=gen)
    mask = torch.rand(batch, 1, length, generator=gen) > 0.3 if use_mask else None
    if mask is not None:
        mask[:, :, 0] = True                                             # keep at least one key
    perm = torch.randperm(length, generator=gen)
    with torch.no_grad():
        out = model.encoder(x, mask)
        out_perm = model.encoder(x[:, perm], None if mask is None else mask[..., perm])
    torch.testing.assert_close(out_perm, out[:, perm], rtol=0, atol=1e-5)


def test_gradcheck_attention():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 4, 5, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[True, True, False, True], [True, False, False, False], [False] * 4, [True] * 4])  # (len_q, len_k); one row fully masked
    assert torch.autograd.gradcheck(lambda q, k, v: attention(q, k, v, mask)[0], (q, k, v))
    assert torch.autograd.gradcheck(lambda q, k, v: attention(q, k, v)[0], (q, k, v))


@pytest.mark.parametrize("store_weights", [False, True])
def test_gradcheck_multi_headed_attention(store_weights):
    torch.manual_seed(0)
    mha = MultiHeadedAttention(2, 8, dropout=0.0).double()
    mha.store_weights = store_weights
    q = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    kv = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[[True, True, False, False]], [[True, True, True, True]]])
    assert torch.autograd.gradcheck(lambda q, kv: mha(q, kv, kv, mask), (q, kv))
    assert torch.autograd.gradcheck(lambda q: mha(q, q, q, subsequent_mask(3)), (q,))


def test_eval_mode_is_deterministic():
    model = small_model(0, dropout=0.3)
    src, tgt = torch.randint(1, V, (2, 6)), torch.randint(1, V, (2, 5))
    args = (src, tgt, padding_mask(src, PAD), make_std_mask(tgt, PAD))
    with torch.no_grad():
        assert torch.equal(model(*args), model(*args))
        model.train()
        assert not torch.equal(model(*args), model(*args))               # dropout on: it does vary


def test_fixed_seed_reproduces_training_losses():
    recipe = CopyRecipe(epochs=2, batches_per_epoch=5, dropout=0.1, seed=3)
    first = [r["loss"] for r in train_copy(recipe).history]
    second = [r["loss"] for r in train_copy(recipe).history]
    assert first == second
    other = [r["loss"] for r in train_copy(CopyRecipe(epochs=2, batches_per_epoch=5, dropout=0.1, seed=4)).history]
    assert other != first


def test_accumulation_takes_the_step_of_one_batch_of_all_the_sentences():
    """`run_epoch(accum_iter=2)` on two batches of unequal length (7 and 4 label tokens a sentence) takes the step that
    one batch holding both, padded, takes: each batch weighted by its share of the label tokens, not the mean of the
    two per-token means; one optimizer step and one scheduler step for the two batches."""
    from torch import nn
    from torch.optim.lr_scheduler import LambdaLR
    from transformer_nb.batch import Batch
    from transformer_nb.epoch import TrainState, run_epoch
    from transformer_nb.loss import LabelSmoothing, SimpleLossCompute

    def reversed_batch(batch_size, length, seed):
        body = torch.randint(3, 10, (batch_size, length), generator=torch.Generator().manual_seed(seed))
        ends = lambda x: torch.cat([torch.ones(batch_size, 1, dtype=torch.long), x, torch.full((batch_size, 1), 2)], 1)
        return Batch(ends(body), ends(body.flip(1)), padding_idx=PAD)

    def one_update(batches, accum_iter):
        torch.manual_seed(0)
        m = make_model(10, 10, N=1, d_model=32, d_ff=64, h=4, dropout=0.0)
        o = torch.optim.SGD(m.parameters(), lr=0.1)
        s = LambdaLR(o, lambda step: 1.0 / (step + 1))
        st = TrainState()
        run_epoch(batches, m, SimpleLossCompute(m.generator, LabelSmoothing(10, PAD)), o, s, accum_iter=accum_iter,
                  train_state=st, progress=False)
        return m, st, s

    a, b = reversed_batch(8, 6, 0), reversed_batch(8, 3, 1)          # 8 x 7 = 56 and 8 x 4 = 32 label tokens
    wide = lambda t: nn.functional.pad(t, (0, 8 - t.size(1)), value=PAD)
    full = lambda x: torch.cat([x.tgt, x.tgt_y[:, -1:]], 1)           # the whole target again
    both = Batch(torch.cat([a.src, wide(b.src)]), torch.cat([full(a), wide(full(b))]), padding_idx=PAD)
    assert (a.ntokens, b.ntokens, both.ntokens) == (56, 32, 88)
    m_accum, st_accum, s_accum = one_update([a, b], accum_iter=2)
    m_big, _, _ = one_update([both], accum_iter=1)
    for p1, p2 in zip(m_accum.parameters(), m_big.parameters()):
        torch.testing.assert_close(p1, p2, atol=1e-6, rtol=1e-5)
    torch.manual_seed(0)
    m_mean = make_model(10, 10, N=1, d_model=32, d_ff=64, h=4, dropout=0.0)
    for x in (a, b):                                                  # the mean of the two per-token means
        out = m_mean(x.src, x.tgt, x.src_mask, x.tgt_mask)
        (SimpleLossCompute(m_mean.generator, LabelSmoothing(10, PAD))(out, x.tgt_y, x.ntokens)[1] / 2).backward()
    torch.optim.SGD(m_mean.parameters(), lr=0.1).step()
    assert not all(torch.allclose(p1, p2, atol=1e-6) for p1, p2 in zip(m_mean.parameters(), m_big.parameters()))
    assert (st_accum.batches, st_accum.steps, s_accum.last_epoch) == (2, 1, 1)


def test_check_mask_accepts_exactly_what_broadcasts():
    "`check_mask` applies broadcasting's rule itself (for speed): it must agree with torch.broadcast_shapes."
    from transformer_nb._checks import check_mask
    g = torch.Generator().manual_seed(0)
    for _ in range(2000):
        shape = tuple(torch.randint(1, 4, (int(torch.randint(1, 5, (1,), generator=g)),), generator=g).tolist())
        mask = tuple(torch.randint(0, 4, (int(torch.randint(0, 6, (1,), generator=g)),), generator=g).tolist())
        try:
            fits = torch.broadcast_shapes(mask, shape) == torch.Size(shape)
        except RuntimeError:
            fits = False
        try:
            check_mask(torch.ones(mask, dtype=torch.bool), shape)
            accepted = True
        except ValueError:
            accepted = False
        assert accepted == fits, (mask, shape)


def test_fused_adam_takes_the_loops_steps():
    """The optimizers use Adam's fused form for speed. Given the same gradients, it moves the weights as the per-tensor
    loop does up to rounding: after 50 steps of either schedule, every weight within 1e-5 of the loop's (weights of up
    to 1 that move by up to 1.3; the largest gap measured is 2.4e-7). Every setting is the paper's."""
    from transformer_nb.schedule import noam_optimizer, linear_decay_optimizer
    for make in (lambda m: noam_optimizer(m, 1.0, 10), lambda m: linear_decay_optimizer(m, 1e-2, 5, 40)):
        g = torch.Generator().manual_seed(1)
        models = [small_model(0), small_model(0)]
        optimizers = []
        for model, fused in zip(models, (True, False)):
            optimizer, scheduler = make(model)
            assert optimizer.defaults["fused"] is True and optimizer.defaults["betas"] == (0.9, 0.98)
            assert optimizer.defaults["eps"] == 1e-9
            optimizer.param_groups[0]["fused"] = fused
            optimizers.append((optimizer, scheduler))
        for _ in range(50):
            grads = [torch.randn(p.shape, generator=g) for p in models[0].parameters()]
            for model, (optimizer, scheduler) in zip(models, optimizers):
                for p, grad in zip(model.parameters(), grads):
                    p.grad = grad.clone()
                optimizer.step()
                scheduler.step()
        for a, b in zip(models[0].parameters(), models[1].parameters()):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_token_ids_are_checked_once_per_tensor(monkeypatch):
    "Each id tensor is checked once, where it enters the model (a check costs the host a look at the ids)."
    import transformer_nb._checks as checks                            # the entry points' checks call it there
    names, check = [], checks.check_tokens
    monkeypatch.setattr(checks, "check_tokens", lambda x, vocab, name="x": (names.append(name), check(x, vocab, name)))
    model = small_model(0)
    src, tgt = torch.randint(1, V, (2, 6)), torch.randint(1, V, (2, 5))
    with torch.no_grad():
        model(src, tgt, padding_mask(src, PAD), make_std_mask(tgt, PAD))
    assert names == ["src", "tgt"]


# ---- bad input: each error names the argument and what was expected ----

@pytest.fixture(scope="module")
def model():
    return small_model(0, max_positions=16)


def _args(src, tgt):
    return src, tgt, padding_mask(src, PAD), make_std_mask(tgt, PAD)


def test_wrong_rank(model):
    src = torch.randint(1, V, (2, 5))
    with pytest.raises(ValueError, match=r"`src` must be a \(batch, len\) tensor of token ids, got shape \(1, 2, 5\)"):
        model(src.unsqueeze(0), src, padding_mask(src, PAD), None)
    with pytest.raises(ValueError, match=r"`query` must have shape \(batch, len, d_model=8\)"):
        MultiHeadedAttention(2, 8)(torch.randn(5, 8), torch.randn(5, 8), torch.randn(5, 8))


def test_mismatched_batch_sizes(model):
    with pytest.raises(ValueError, match="`tgt` holds 3 sentences and `memory` 2: one target per source"):
        model(*_args(torch.randint(1, V, (2, 5)), torch.randint(1, V, (3, 4))))
    with pytest.raises(ValueError, match="`query`, `key` and `value` must have the same batch size, got 2, 3 and 3"):
        MultiHeadedAttention(2, 8)(torch.randn(2, 4, 8), torch.randn(3, 4, 8), torch.randn(3, 4, 8))


def test_mask_shapes_that_do_not_broadcast(model):
    src, tgt = torch.randint(1, V, (2, 5)), torch.randint(1, V, (2, 4))
    with pytest.raises(ValueError, match=r"`src_mask` of shape \(2, 1, 6\) does not broadcast to \(2, 1, 5\)"):
        model(src, tgt, torch.ones(2, 1, 6, dtype=torch.bool), make_std_mask(tgt, PAD))
    with pytest.raises(ValueError, match=r"`tgt_mask` of shape \(2, 3, 3\) does not broadcast to \(2, 4, 4\)"):
        model(src, tgt, padding_mask(src, PAD), torch.ones(2, 3, 3, dtype=torch.bool))


def test_token_ids_outside_the_vocabulary(model):
    src, tgt = torch.randint(1, V, (2, 5)), torch.randint(1, V, (2, 4))
    with pytest.raises(ValueError, match=r"`src` holds token ids in \[\d+, 13\], but the vocabulary has 13 tokens"):
        model(*_args(torch.cat([src, torch.full((2, 1), 13)], 1), tgt))
    with pytest.raises(ValueError, match=r"`tgt` holds token ids in \[-1, \d+\]"):
        model(*_args(src, torch.cat([tgt, torch.full((2, 1), -1)], 1)))


def test_sequence_longer_than_the_positional_table(model):
    src = torch.randint(1, V, (1, 17))
    with pytest.raises(ValueError, match="length 17 starting at `start`=0, but max_positions=16"):
        model(*_args(src, src[:, :4]))


def test_d_model_not_divisible_by_h():
    with pytest.raises(ValueError, match="d_model=30 must be divisible by the number of heads h=4"):
        make_model(V, V, N=1, d_model=30, h=4)


def test_non_integer_tokens(model):
    src = torch.rand(2, 5)
    with pytest.raises(TypeError, match="`src` must hold token ids as torch.long"):
        model(src, torch.randint(1, V, (2, 4)), torch.ones(2, 1, 5, dtype=torch.bool), None)


@FAST
@given(seed=st.integers(0, 10_000), len_q=st.integers(1, 6), len_k=st.integers(1, 6),
       kind=st.sampled_from(["padding", "any", "causal"]), empty_rows=st.booleans())
def test_fused_attention_gives_zeros_for_a_row_without_keys(seed, len_q, len_k, kind, empty_rows):
    """`sdpa_attention` hands PyTorch's kernel the mask as it is: a query row without keys comes out zero, with zero
    gradients, as in the explicit `attention` (PyTorch 2.5 and later), and the two agree to float32 rounding."""
    from transformer_nb.attention import attention, sdpa_attention
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 2, n, 4, generator=gen, requires_grad=True) for n in (len_q, len_k, len_k))
    mask = torch.rand(2, 1, 1 if kind == "padding" else len_q, len_k, generator=gen) < 0.7
    mask[..., 0] = True                                                  # every query has a key ...
    if kind == "causal":
        mask &= torch.ones(len_q, len_k, dtype=torch.bool).tril()
    if empty_rows:
        mask[0, :, -1] = False                                           # ... but the last row of sequence 0
    out, explicit = sdpa_attention(q, k, v, mask), attention(q, k, v, mask)[0]
    empty = ~mask.any(dim=-1, keepdim=True).expand_as(out)
    assert empty.any() == empty_rows and not out[empty].any()
    torch.testing.assert_close(out, explicit)
    g = torch.randn(out.shape, generator=gen)
    for a, b in zip(torch.autograd.grad(out, (q, k, v), g), torch.autograd.grad(explicit, (q, k, v), g)):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b)
