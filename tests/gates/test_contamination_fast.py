"""The contamination check's C path (aes_lib.contamination._ngram) against its pure-Python path:
identical indexes, verdicts and reported matches, on random texts and on the tokenizer's edge cases."""

from __future__ import annotations

import importlib.util
import random

import pytest

import aes_lib.contamination.index as index_module
from aes_lib.contamination import HeldoutTask, NgramIndex, tokens

from test_gates_contamination import _reference

SEPARATORS = [" ", "  ", ", ", "\n", "`/", "!? ", "...", "\t", "-", "(", ") "]


def _both(heldout: list[HeldoutTask]) -> tuple[NgramIndex, NgramIndex]:
    """The index built and checked in C, and the same built and checked in pure Python."""
    fast = NgramIndex.build(heldout)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(index_module, "_ngram", None)
        slow = NgramIndex.build(heldout)
    assert fast._probe is not None and slow._probe is None
    assert fast.to_bytes() == slow.to_bytes()
    return fast, slow


def _assert_same(heldout: list[HeldoutTask], texts: list[str]) -> None:
    fast, slow = _both(heldout)
    for first_only in (True, False):
        assert fast.check_many(texts, first_only) == slow.check_many(texts, first_only)
    for text in texts:
        match = fast.check(text)
        assert match == slow.check(text)
        assert (None if match is None else (match.position, match.ngram, match.heldout_id)) == _reference(heldout, text)


def test_the_c_extension_is_built_and_used():
    # Optional for an install without a compiler, but built by `pip install -e .`: without it
    # the gate silently runs ~2x slower.
    assert importlib.util.find_spec("aes_lib.contamination._ngram") is not None
    assert index_module._ngram is not None
    assert NgramIndex.build([HeldoutTask("a", "a b c")])._probe is not None


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
        "STRASSE naïve abc " + " ".join(words[:12]),  # non-ASCII: the Python path
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


def test_window_hashes_equal_the_vectorized_ones():
    rng = random.Random(1)
    heldout = [HeldoutTask(str(i), " ".join(rng.choices("abcdefghij", k=rng.randint(0, 40)))) for i in range(50)]
    for n in (1, 2, 13, 40):
        fast = NgramIndex.build(heldout, n=n)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(index_module, "_ngram", None)
            assert NgramIndex.build(heldout, n=n).to_bytes() == fast.to_bytes()


def test_the_probe_takes_only_ascii_text():
    index = NgramIndex.build([HeldoutTask("a", "a b c")])
    with pytest.raises(ValueError, match="ASCII"):
        index._probe.may_share("é")
    assert index.check("é a b c") is None  # non-ASCII text takes the Python path
