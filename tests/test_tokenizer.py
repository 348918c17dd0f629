"""Property-based tests of the translation chapter's tokenizer and batching (hypothesis), on small random corpora:
text survives encode/decode, new text splits like training text, batches hold every example once within budget."""
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from transformer_nb.data import bucket_batches, bucket_count
from transformer_nb.tokenizer import Tokenizer, detokenize, _learn_bpe, pre_tokenize, _merge_word

FAST = settings(max_examples=40, deadline=None)
# letters with and without diacritics, digits, punctuation and several kinds of whitespace
CHARS = st.sampled_from(list("abcdeäöüßxyzABCÄ0129.,;:!?()'\"-") + [" ", "  ", "\t", "\u00a0"])
TEXT = st.lists(CHARS, min_size=0, max_size=40).map("".join)


@FAST
@given(texts=st.lists(TEXT, min_size=1, max_size=12), extra=TEXT, vocab_extra=st.integers(0, 60))
def test_encode_decode_round_trip(texts, extra, vocab_extra):
    "Any text made of characters seen in training comes back exactly, up to runs of whitespace."
    alphabet = {c for t in texts for w in pre_tokenize(t) for c in w}
    if not alphabet:                                                       # nothing to learn from: refused
        with pytest.raises(ValueError, match="`texts` holds no characters"):
            Tokenizer.train(texts, vocab=len(Tokenizer.specials) + vocab_extra)
        return
    tok = Tokenizer.train(texts, vocab=len(Tokenizer.specials) + len(alphabet) + vocab_extra)
    assert len(tok) <= len(Tokenizer.specials) + len(alphabet) + vocab_extra
    for text in texts:
        assert tok.decode(tok.encode(text)) == " ".join(text.split())
        assert tok.unk not in tok.encode(text)
    new_text = "".join(c for c in extra if c.isspace() or c in alphabet)     # unseen text, seen characters
    assert tok.decode(tok.encode(new_text)) == " ".join(new_text.split())
    assert tok.encode("Ω")[-1] == tok.unk                                  # an unseen character


@FAST
@given(texts=st.lists(TEXT, min_size=1, max_size=12), n_merges=st.integers(0, 40))
def test_split_replays_training(texts, n_merges):
    "Splitting a training word with the learned ranks gives exactly the segmentation training ended with."
    _, merges = _learn_bpe(texts, n_merges, min_frequency=1)
    tok = Tokenizer(sorted({c for t in texts for w in pre_tokenize(t) for c in w}), merges)
    words = {w: list(w) for t in texts for w in pre_tokenize(t)}
    for pair in merges:
        words = {w: _merge_word(s, pair, pair[0] + pair[1]) for w, s in words.items()}
    for w, pieces in words.items():
        assert tok.split_word(w) == pieces
        assert "".join(pieces) == w


@FAST
@given(text=TEXT)
def test_pre_tokenize_keeps_every_visible_character(text):
    assert detokenize(pre_tokenize(text)) == " ".join(text.split())


@FAST
@given(lengths=st.lists(st.tuples(st.integers(2, 30), st.integers(2, 30)), min_size=1, max_size=80),
       max_tokens=st.integers(30, 400), seed=st.integers(0, 1000), shuffle=st.booleans())
def test_bucket_batches_cover_every_example_once_within_budget(lengths, max_tokens, seed, shuffle):
    examples = [([i + 1] * s, [i + 1] * t) for i, (s, t) in enumerate(lengths)]       # example i made of token i + 1
    batches = bucket_batches(examples, max_tokens, shuffle=shuffle, seed=seed)
    seen = Counter(int(row[0]) for b in batches for row in b.src)
    assert seen == Counter(range(1, len(examples) + 1))
    for b in batches:
        longest = max(b.src.size(1), b.tgt.size(1) + 1)              # Batch drops one target position
        assert b.src.size(0) == 1 or b.src.size(0) * longest <= max_tokens


@FAST
@given(lengths=st.lists(st.tuples(st.integers(2, 30), st.integers(2, 30)), min_size=1, max_size=80),
       max_tokens=st.integers(1, 400), seeds=st.lists(st.integers(0, 10**6), min_size=1, max_size=4))
def test_bucket_count_is_the_number_of_batches_for_every_seed(lengths, max_tokens, seeds):
    examples = [([i + 1] * s, [i + 1] * t) for i, (s, t) in enumerate(lengths)]
    count = bucket_count(examples, max_tokens)
    assert count == len(bucket_batches(examples, max_tokens, shuffle=False))
    for seed in seeds:
        assert count == len(bucket_batches(examples, max_tokens, seed=seed))
