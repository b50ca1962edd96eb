"""Contamination index: 13-gram flags, 12-gram near misses, scale, persistence, sources."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from aes_lib.contamination import (
    HeldoutFormatError,
    HeldoutTask,
    IndexFormatError,
    NgramIndex,
    load_heldout,
    tokens,
)

HELDOUT = (
    "Configure the nginx server so that requests to /api are proxied to the backend "
    "running on port 8080, and write the final configuration to /etc/nginx/site.conf."
)


def test_tokenization_is_nfkc_casefolded_words():
    assert tokens("Write `/app/out.txt`, then RUN it!") == ["write", "app", "out", "txt", "then", "run", "it"]
    # full-width letters (NFKC), sharp s (casefold), underscore kept inside a word
    assert tokens("ＡＢＣ Straße my_var") == ["abc", "strasse", "my_var"]


def test_copied_13_gram_is_flagged_with_that_ngram():
    index = NgramIndex.build([HeldoutTask("tb/nginx-proxy", HELDOUT), HeldoutTask("tb/other", "sort a list")])
    words = tokens(HELDOUT)
    copied = words[3:16]  # 13 tokens from the middle
    candidate = "Please do this: " + " ".join(w.upper() for w in copied) + ". Then stop."
    match = index.check(candidate)
    assert match is not None
    assert match.ngram == " ".join(copied)
    assert match.heldout_id == "tb/nginx-proxy"
    assert match.position == 3  # after "please do this"


def test_overlap_of_12_tokens_is_not_flagged():
    index = NgramIndex.build([HeldoutTask("tb/nginx-proxy", HELDOUT)])
    words = tokens(HELDOUT)
    # Two 12-token runs of the held-out text, broken where a 13th token would continue them.
    candidate = " ".join(words[0:12]) + " banana " + " ".join(words[13:25])
    assert index.check(candidate) is None
    assert index.check(" ".join(words[0:13])) is not None  # one more token and it is flagged


def test_windows_never_span_two_heldout_instructions():
    a = " ".join(f"a{i}" for i in range(20))
    b = " ".join(f"b{i}" for i in range(20))
    index = NgramIndex.build([HeldoutTask("a", a), HeldoutTask("b", b)])
    tail_head = " ".join([f"a{i}" for i in range(14, 20)] + [f"b{i}" for i in range(7)])
    assert index.check(tail_head) is None


def test_hash_hit_without_exact_tokens_is_not_reported():
    index = NgramIndex.build([HeldoutTask("x", " ".join(f"w{i}" for i in range(30)))])
    candidate = " ".join(f"w{i}" for i in range(13))
    assert index.check(candidate) is not None
    # Point every entry at a different window: the hashes still match, the stored tokens do not.
    forged = NgramIndex(
        index.n, index.vocab, index.doc_ids, index.offsets, index.token_ids, index.hashes,
        (index.starts + 1) % (len(index.token_ids) - index.n),
    )
    assert forged.check(candidate) is None


def _random_text(rng: random.Random, vocab: list[str], n: int) -> list[str]:
    return [rng.choice(vocab) for _ in range(n)]


def test_10000_candidates_against_1000_heldout_flags_exactly_the_planted_ones():
    rng = random.Random(4)
    vocab = [f"w{i:05d}" for i in range(20000)]
    heldout = [HeldoutTask(f"held/{i}", " ".join(_random_text(rng, vocab, rng.randint(40, 200)))) for i in range(1000)]
    index = NgramIndex.build(heldout)

    candidates = [_random_text(rng, vocab, rng.randint(40, 200)) for _ in range(10000)]
    planted: dict[int, tuple[str, str]] = {}
    near_miss: set[int] = set()
    for c in rng.sample(range(10000), 80):
        src = rng.choice(heldout)
        words = tokens(src.instruction)
        length = 13 if len(planted) < 50 else 12  # 50 real plants, 30 near misses
        start = rng.randrange(len(words) - length)
        piece = words[start : start + length]
        at = rng.randrange(len(candidates[c]))
        candidates[c][at:at] = ["xunknownx"] + piece + ["xunknownx"]
        if length == 13:
            planted[c] = (" ".join(piece), src.id)
        else:
            near_miss.add(c)

    matches = index.check_many([" ".join(c) for c in candidates])
    found = {m.candidate: (m.ngram, m.heldout_id) for m in matches}
    assert len(planted) == 50 and len(near_miss) == 30
    assert found == planted


def test_index_round_trips_through_bytes(tmp_path):
    tasks = [HeldoutTask("a/b", HELDOUT), HeldoutTask("ü", "ünïcödé " * 20)]
    index = NgramIndex.build(tasks)
    again = NgramIndex.from_bytes(index.to_bytes())
    assert again.doc_ids == ["a/b", "ü"]
    assert np.array_equal(again.hashes, index.hashes)
    copied = " ".join(tokens(HELDOUT)[5:18])
    assert again.check(copied) == index.check(copied)
    assert again.check("ünïcödé " * 13).heldout_id == "ü"


def test_corrupt_index_bytes_raise_index_format_error():
    data = NgramIndex.build([HeldoutTask("a", HELDOUT)]).to_bytes()
    with pytest.raises(IndexFormatError, match="magic"):
        NgramIndex.from_bytes(b"garbage" + data)
    with pytest.raises(IndexFormatError, match="bytes"):
        NgramIndex.from_bytes(data[:-3])


def test_heldout_from_harbor_folder_and_jsonl(tmp_path):
    for name, text in [("t1", "first task"), ("nested/t2", "second task")]:
        (tmp_path / "tasks" / name).mkdir(parents=True)
        (tmp_path / "tasks" / name / "instruction.md").write_text(text)
    assert load_heldout(tmp_path / "tasks") == [
        HeldoutTask("nested/t2", "second task"),
        HeldoutTask("t1", "first task"),
    ]
    jsonl = tmp_path / "h.jsonl"
    jsonl.write_text(json.dumps({"id": "x", "instruction": "do x", "category": "extra is fine"}) + "\n\n")
    assert load_heldout(jsonl) == [HeldoutTask("x", "do x")]


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"id": "x", "instruction": "a"}\n{"id": "x"}\n', r"h.jsonl:2: .*instruction"),
        ('{"id": "x", "instruction": "a"}\n{"id": "x", "instruction": "b"}\n', "duplicate held-out id 'x'"),
        ("not json\n", r"h.jsonl:1:"),
        ("\n", "no held-out instructions"),
    ],
)
def test_bad_heldout_jsonl_raises_heldout_format_error(tmp_path, content, message):
    (tmp_path / "h.jsonl").write_text(content)
    with pytest.raises(HeldoutFormatError, match=message):
        load_heldout(tmp_path / "h.jsonl")


def test_missing_heldout_source_raises(tmp_path):
    with pytest.raises(HeldoutFormatError, match="no such file"):
        load_heldout(tmp_path / "nope")


def _reference(heldout: list[HeldoutTask], text: str, n: int = 13) -> tuple[int, str, str] | None:
    """The plain definition: the first window of ``text`` found in a dict of held-out n-token tuples."""
    table: dict[tuple[str, ...], str] = {}
    for t in heldout:
        ws = tokens(t.instruction)
        for i in range(len(ws) - n + 1):
            table.setdefault(tuple(ws[i : i + n]), t.id)
    ws = tokens(text)
    for i in range(len(ws) - n + 1):
        if tuple(ws[i : i + n]) in table:
            return i, " ".join(ws[i : i + n]), table[tuple(ws[i : i + n])]
    return None


def _random_case(rng: random.Random) -> tuple[list[HeldoutTask], list[str]]:
    vocab = ["alpha", "Beta", "straße", "ＡＢＣ", "x_1", "42", "naïve", "go", "to", "the"]
    seps = [" ", "  ", ", ", "\n", "`/", "!? ", "—", "\t"]

    def text(words: list[str]) -> str:
        return "".join(w + rng.choice(seps) for w in words)

    heldout = [HeldoutTask(f"h{i}", text(rng.choices(vocab, k=rng.randint(5, 40)))) for i in range(4)]
    cands = []
    for _ in range(10):
        words = rng.choices(vocab, k=rng.randint(0, 40))
        src = tokens(rng.choice(heldout).instruction)
        if len(src) >= 13 and rng.random() < 0.7:
            length = rng.choice([11, 12, 13, 14])  # near misses and hits, re-punctuated and re-cased
            at = rng.randrange(len(src) - min(length, len(src)) + 1)
            piece = [w.upper() if rng.random() < 0.3 else w for w in src[at : at + length]]
            words[rng.randint(0, len(words)) : 0] = piece
        cands.append(text(words))
    return heldout, cands


def _as_tuple(match):
    return None if match is None else (match.position, match.ngram, match.heldout_id)


@pytest.mark.parametrize("seed", range(40))
def test_verdicts_equal_the_tuple_reference_on_random_inputs(seed):
    rng = random.Random(seed)
    heldout, cands = _random_case(rng)
    index = NgramIndex.build(heldout)
    many = {m.candidate: _as_tuple(m) for m in index.check_many(cands)}
    for c, text in enumerate(cands):
        want = _reference(heldout, text)
        assert _as_tuple(index.check(text)) == want
        assert many.get(c) == want


def test_forced_hash_collisions_never_change_a_verdict(monkeypatch):
    """Every token and every window hashing alike: only exact verification may decide."""
    import aes_lib.contamination.index as index_module

    monkeypatch.setattr(index_module, "_mix", lambda x: np.zeros(len(x), dtype=np.uint64))
    for seed in range(20):
        rng = random.Random(100 + seed)
        heldout, cands = _random_case(rng)
        index = NgramIndex.build(heldout)
        assert len(set(index.hashes.tolist())) <= 1
        for text in cands:
            assert _as_tuple(index.check(text)) == _reference(heldout, text)


def test_exact_check_alone_when_the_kgram_set_is_skipped(monkeypatch):
    import aes_lib.contamination.index as index_module

    monkeypatch.setattr(index_module, "_ANCHOR_MAX_TOKENS", 0)
    heldout, cands = _random_case(random.Random(7))
    index = NgramIndex.build(heldout)
    for text in cands:
        assert _as_tuple(index.check(text)) == _reference(heldout, text)


def test_token_bytes_equal_tokens_encoded():
    from aes_lib.contamination.tokenize import token_bytes

    rng = random.Random(3)
    alphabet = [chr(c) for c in range(128)] + ["é", "ß", "Ａ", "ﬁ", "٣", "\u00a0"]
    for _ in range(3000):
        s = "".join(rng.choices(alphabet if rng.random() < 0.3 else alphabet[:128], k=rng.randint(0, 50)))
        assert token_bytes(s) == [t.encode() for t in tokens(s)]
