"""Tests for ampkit.data's character corpus: determinism, the grammar, the vocabulary, the windows and batches."""
import re

import pytest
import torch

from ampkit.data import (
    CHAR_VOCAB,
    CHARS,
    CharVocab,
    char_batches,
    char_windows,
    make_char_windows,
    make_corpus,
    make_data,
)

WORD = r"[a-z]+"
SENTENCE = re.compile(rf"^(the {WORD} {WORD}|{WORD}) {WORD} an? {WORD} {WORD}"
                      rf"( (in|near|behind|under|over|by) the {WORD}|, then {WORD} {WORD} it)\.$")
SUM = re.compile(r"^(\d+)\+(\d+)=(\d+)$")


def test_corpus_is_deterministic_exact_in_length_and_seeded():
    a = make_corpus(20000, seed=0)
    assert a == make_corpus(20000, seed=0) and len(a) == 20000
    b = make_corpus(20000, seed=1)
    assert a != b
    assert make_corpus(500, seed=0) == a[:500]  # a shorter corpus is a prefix of a longer one
    assert set(a) == set(CHARS)  # every character of the vocabulary is used, none outside it
    assert len(CHARS) == len(CHAR_VOCAB) == 42


def test_every_line_follows_the_grammar_and_sums_are_right():
    lines = make_corpus(30000, seed=2).split("\n")[:-1]  # the last line may be cut
    sums = [m for m in map(SUM.match, lines) if m]
    assert 0.1 < len(sums) / len(lines) < 0.35
    assert all(int(m[1]) + int(m[2]) == int(m[3]) for m in sums)
    sentences = [line for line in lines if not SUM.match(line)]
    bad = [s for s in sentences if not SENTENCE.match(s)]
    assert not bad, bad[:3]
    assert all(" an " not in s or re.search(r" an [aeiou]", s) for s in sentences)  # a/an follows the adjective
    assert len(set(lines)) > 0.8 * len(lines)  # varied, not one line repeated


def test_vocab_round_trips_and_refuses_unknown_characters():
    text = make_corpus(3000, seed=5)
    ids = CHAR_VOCAB.encode(text)
    assert ids.dtype == torch.int64 and ids.shape == (3000,) and 0 <= int(ids.min()) and int(ids.max()) < 42
    assert CHAR_VOCAB.decode(ids) == text and CHAR_VOCAB.decode(ids.tolist()) == text
    assert CHAR_VOCAB.encode("a").item() == CHARS.index("a")
    with pytest.raises(ValueError, match=r"\['A', '!'\]|\['!', 'A'\]"):
        CHAR_VOCAB.encode("A cat!")
    with pytest.raises(ValueError, match="0..41"):
        CHAR_VOCAB.decode([0, 42])
    with pytest.raises(TypeError, match="str"):
        CHAR_VOCAB.encode(b"abc")
    with pytest.raises(ValueError, match="distinct"):
        CharVocab("aab")
    with pytest.raises(TypeError, match="non-empty"):
        CharVocab("")


def test_windows_are_next_character_pairs_of_the_text():
    ids = CHAR_VOCAB.encode(make_corpus(2000, seed=0))
    x, y = char_windows(ids, 50, context=24, generator=torch.Generator().manual_seed(3))
    assert x.shape == y.shape == (50, 24) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    for row_x, row_y in zip(x[:5], y[:5]):  # each window is a slice of the text, its target the next slice
        start = [i for i in range(len(ids) - 24) if torch.equal(ids[i:i + 24], row_x)]
        assert any(torch.equal(ids[i + 1:i + 25], row_y) for i in start)
    x2, _ = char_windows(ids, 50, context=24, generator=torch.Generator().manual_seed(3))
    assert torch.equal(x, x2)
    with pytest.raises(ValueError, match="longer than context"):
        char_windows(ids[:10], 2, context=10)
    with pytest.raises(TypeError, match="1-D integer"):
        char_windows(ids.float(), 2)


def test_batches_and_make_data():
    ids = CHAR_VOCAB.encode(make_corpus(2000, seed=0))
    a = [x for x, _ in char_batches(ids, 4, context=16, seed=1, steps=3)]
    b = [x for x, _ in char_batches(ids, 4, context=16, seed=1, steps=3)]
    c = [x for x, _ in char_batches(ids, 4, context=16, seed=2, steps=3)]
    assert len(a) == 3 and all(torch.equal(p, q) for p, q in zip(a, b))
    assert not all(torch.equal(p, q) for p, q in zip(a, c))
    it = char_batches(ids, 2, context=8)
    assert all(next(it)[0].shape == (2, 8) for _ in range(50))  # steps=None: forever
    with pytest.raises(ValueError, match="longer than context"):
        char_batches(ids[:5], 2, context=8)  # raised at the call, not at the first next()
    X, y = make_data("decoder", 6, seed=0)
    assert X.shape == y.shape == (6, 64)
    assert torch.equal(X, make_char_windows(6)[0])
    assert not torch.equal(make_char_windows(6, corpus_seed=0)[0], make_char_windows(6, corpus_seed=1)[0])
