"""The contamination check's two paths (the k-gram prefilter, and without it as for a held-out
set too large to hold it) and the hashed index: identical verdicts and reported matches, equal to
the plain definition, on random texts and on the tokenizer's edge cases."""

from __future__ import annotations

import random

import pytest

import aes_lib.contamination.index as index_module
from aes_lib.contamination import HashedIndex, HeldoutTask, NgramIndex, Source, tokens

from test_gates_contamination import _reference

SEPARATORS = [" ", "  ", ", ", "\n", "`/", "!? ", "...", "\t", "-", "(", ") "]


def _both(heldout: list[HeldoutTask]) -> tuple[NgramIndex, NgramIndex]:
    """The index with its k-gram prefilter, and the same index without it (every candidate checked exactly)."""
    fast = NgramIndex.build(heldout)
    slow = NgramIndex.from_bytes(fast.to_bytes())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(index_module, "_ANCHOR_MAX_TOKENS", -1)
        assert slow._anchors is None  # cached on first use: stays off
    assert fast._anchors is not None
    return fast, slow


def _as_tuple(m) -> tuple | None:
    return None if m is None else (m.candidate, m.position, m.ngram, m.heldout_id)


def _assert_same(heldout: list[HeldoutTask], texts: list[str]) -> None:
    fast, slow = _both(heldout)
    hashed = HashedIndex.build(heldout, [Source("test", "o/r", "0" * 40)])
    for first_only in (True, False):
        want = list(map(_as_tuple, fast.check_many(texts, first_only)))
        assert want == list(map(_as_tuple, slow.check_many(texts, first_only)))
        assert want == list(map(_as_tuple, hashed.check_many(texts, first_only)))
    for text in texts:
        match = fast.check(text)
        assert match == slow.check(text) and _as_tuple(match) == _as_tuple(hashed.check(text))
        assert (None if match is None else (match.position, match.ngram, match.heldout_id)) == _reference(heldout, text)


def _zipf_words(rng: random.Random, vocab: list[str], count: int) -> list[str]:
    weights = [1 / (rank + 1) ** 1.1 for rank in range(len(vocab))]
    return rng.choices(vocab, weights, k=count)


@pytest.mark.parametrize("seed", range(6))
def test_random_zipf_texts_with_planted_ngrams(seed):
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(300)] + ["Mixed_Case", "x_1", "42", "A9", "naïve", "ÉTÉ", "日本"]
    ascii_only = seed % 2 == 0
    if ascii_only:
        vocab = [w for w in vocab if w.isascii()]

    def text(words: list[str]) -> str:
        return "".join(w + rng.choice(SEPARATORS) for w in words)

    heldout = [HeldoutTask(f"h{i}", text(_zipf_words(rng, vocab, rng.randint(5, 120)))) for i in range(60)]
    cands = []
    for _ in range(300):
        words = _zipf_words(rng, vocab, rng.randint(0, 120))
        src = tokens(rng.choice(heldout).instruction)
        if len(src) >= 13 and rng.random() < 0.3:
            length = rng.choice([12, 13, 20])  # near misses and hits, re-cased and re-punctuated
            at = rng.randrange(len(src) - min(length, len(src)) + 1)
            piece = [w.upper() if rng.random() < 0.3 else w for w in src[at : at + length]]
            words[rng.randint(0, len(words)) : 0] = piece
        cands.append(text(words))
    _assert_same(heldout, cands)
    assert sum(_reference(heldout, c) is not None for c in cands) > 20


def test_edge_cases_of_the_tokenizer_and_windows():
    long_word = "L" * 300 + "_9"  # a token longer than 255 bytes
    words = [f"t{i}" for i in range(20)]
    heldout = [
        HeldoutTask("under", " ".join(["my_var", "__init__", "007", "x__y", "_"] + words[:10])),
        HeldoutTask("long", " ".join([long_word] + words[5:17])),
        HeldoutTask("tail", "...  " + " ".join(words[7:20]) + " !!!"),
        HeldoutTask("mixed", "straße naïve ＡＢＣ " + " ".join(words[:12])),
        HeldoutTask("short", "only three words"),
    ]
    exact = " ".join(words[7:20])
    texts = [
        "",
        "   \n\t ",
        "!!!...,,,",
        "only three words",
        " ".join(words[7:19]),  # shorter than n
        exact,  # exactly n tokens
        f"---{exact}---",  # leading and trailing separators
        ";;".join(words[7:20]),  # punctuation runs between tokens
        exact.upper(),
        "MY_VAR __INIT__ 007 x__y _ " + " ".join(words[:8]),
        "my_var __init__ 007 x__y _ " + " ".join(words[:8]) + " t_8",
        long_word.lower() + " " + " ".join(words[5:17]),
        long_word + "x " + " ".join(words[5:17]),  # a longer token: no match
        "intro words here, " + " ".join(words[6:19]),  # the match is the very last window
        "STRASSE naïve abc " + " ".join(words[:12]),  # non-ASCII: the Unicode tokenizer
        "plain ascii then é " + exact,
        "1" * 1000 + " " + exact,
    ]
    _assert_same(heldout, texts)


def test_a_repeated_ngram_names_the_first_heldout_instruction():
    gram = " ".join(f"r{i}" for i in range(13))
    heldout = [
        HeldoutTask("a", "before " + gram),
        HeldoutTask("b", f"{gram} and again {gram} and {gram}"),
        HeldoutTask("c", gram),
    ]
    fast, _ = _both(heldout)
    assert fast.check("x " + gram.upper()).heldout_id == "a"
    _assert_same(heldout, ["x " + gram, gram + " " + gram, " ".join(f"r{i}" for i in range(12))])
