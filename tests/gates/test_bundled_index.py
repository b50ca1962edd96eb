"""The held-out index bundled with aes: Terminal-Bench's instructions as hashes, on by default."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest
from gate_tasks import write_task

from aes_proto import subjects
from aes_proto.messages import CandidateEnv, ContaminationResult, Lineage

from aes_lib.bundle import pack
from aes_lib.contamination import (KV_BUCKET, HashedIndex, HeldoutTask, IndexFormatError, NgramIndex, Source,
                                   open_index, registered)
from aes_lib.contamination.bundled import bundled_bytes, bundled_index, register_bundled
from aes_services.contamination import ContaminationService

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "flywheel"))
from flywheel_helpers import running, wait_for  # noqa: E402

TB_QUOTE = ("You are placed in a blind maze exploration challenge. "
            "Your goal is to fully explore and map an unknown maze.")
"""The opening of Terminal-Bench core's blind-maze-explorer-5x5 instruction (20 words)."""
TB_TASK = "terminal-bench-core/blind-maze-explorer-5x5"
CLEAN = "Count the lines of /app/data.txt that contain the word error and print the count."


def test_bundled_index_is_hashes_of_terminal_bench_with_its_source():
    index = bundled_index()
    [source] = index.sources
    assert source.repository == "laude-institute/terminal-bench-leaderboard"
    assert re.fullmatch(r"[0-9a-f]{40}", source.commit) and "Terminal-Bench core 0.1.1" in source.name
    assert index.n == 13 and len(index.doc_ids) == 80 and len(index.hashes) > 5000
    data = bundled_bytes()
    assert len(data) < 256 * 1024
    assert b"exploration challenge" not in data.lower()  # hashes and task names, never the text
    assert index.check(f"Please note: {TB_QUOTE} Then write a report.").heldout_id == TB_TASK
    assert index.check(CLEAN) is None


HELDOUT = [
    HeldoutTask("a", "Write a bash script that rotates the nginx access logs every night and compresses "
                     "the old ones with gzip keeping fourteen days of history"),
    HeldoutTask("b", "Compile the Straße kernel module with the patched Makefile and load it into the "
                     "running kernel without rebooting the virtual machine please"),
]


def test_hashed_index_finds_what_the_ngram_index_finds():
    candidates = [
        CLEAN,
        "First rotates the nginx access logs every night and compresses the old ones with gzip keeping fourteen",
        "COMPILE the STRASSE kernel module with the patched Makefile and load it into the running kernel!",
        "twelve words only: rotates the nginx access logs every night and compresses",
    ]
    hashed = HashedIndex.build(HELDOUT, [Source("test", "o/r", "0" * 40)])
    exact = NgramIndex.build(HELDOUT)
    found = [(m.candidate, m.position, m.ngram, m.heldout_id) for m in hashed.check_many(candidates, False)]
    assert found == [(m.candidate, m.position, m.ngram, m.heldout_id) for m in exact.check_many(candidates, False)]
    assert {c for c, *_ in found} == {1, 2}
    again = open_index(hashed.to_bytes())
    assert isinstance(again, HashedIndex) and again.sources == hashed.sources
    assert again.check(candidates[2]).heldout_id == "b"
    with pytest.raises(IndexFormatError, match="bytes, header says"):
        open_index(hashed.to_bytes()[:-1])


async def test_the_gate_rejects_a_candidate_quoting_terminal_bench(fresh_nats, bus, tmp_path):
    kv = await bus.kv(KV_BUCKET)
    ref, now = await register_bundled(kv, bus.blobs)
    assert now and await registered(kv) == ref
    assert (await register_bundled(kv, bus.blobs))[1] is False  # registered once
    task = write_task(tmp_path, "quoting", "FROM aes-base:latest\nWORKDIR /app\n",
                      f"Here is a twist on a classic. {TB_QUOTE} Save the map to /app/maze_map.txt.")
    bundle = pack(task)
    candidate = CandidateEnv(
        idempotency_key="quoting", episode_id="ep-quoting", env_id=bundle.sha256,
        bundle=bus.blobs.put_content("bundles", bundle.data, suffix=".tar.gz"),
        lineage=Lineage(assignment_id="as-quoting"), route=("contamination", "review", "calibrate"))
    async with running(fresh_nats, ContaminationService()):
        await bus.publish(subjects.stage("contamination"), candidate)
        [result] = await asyncio.wait_for(wait_for(bus, subjects.RESULT_CONTAMINATION, ContaminationResult, bool), 30)
    assert not result.ok and result.heldout_task == TB_TASK
    assert result.matched_ngram.startswith("you are placed in a blind maze")


def test_a_merged_index_finds_both_and_names_what_it_misses():
    from aes_lib.contamination.bundled import missing

    bundled = bundled_index()
    assert missing(bundled.sources) == ["Terminal-Bench 2.1", "Terminal-Bench 4.0", "HiL-Bench"]
    added = HashedIndex.build(HELDOUT, [Source("Terminal-Bench 2.1", "o/r", "0" * 40)])
    both = open_index(bundled.merged(added).to_bytes())
    assert both.check(TB_QUOTE).heldout_id == TB_TASK
    assert both.check(HELDOUT[1].instruction).heldout_id == "b"
    assert both.check(CLEAN) is None and len(both.doc_ids) == 82
    assert missing(both.sources) == ["Terminal-Bench 4.0", "HiL-Bench"]
    with pytest.raises(IndexFormatError, match="both indexes name held-out task 'a'"):
        added.merged(added)
    with pytest.raises(IndexFormatError, match="cannot merge a 5-gram index into a 13-gram one"):
        bundled.merged(HashedIndex.build(HELDOUT, [], n=5))
