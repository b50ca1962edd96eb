"""Task review: answer schema, lenient parsing, strict validation, retries, the real model."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from replay_server import ReplayServer  # a replay/fault server standing in for a model

from aes_lib.models import ChatClient, RetryPolicy
from aes_lib.review import (
    CRITERION_NAMES,
    ReviewAnswer,
    ReviewParseError,
    ReviewSettings,
    ReviewSettingsError,
    answer_schema,
    parse_review,
    review_task,
)


def _answer(**overrides: str) -> dict:
    ans = {name: {"outcome": "pass", "reason": f"{name} looks right"} for name in CRITERION_NAMES}
    for name, outcome in overrides.items():
        ans[name] = {"outcome": outcome, "reason": "because"}
    return ans


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    (tmp_path / "environment").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "solution").mkdir()
    (tmp_path / "instruction.md").write_text("Write the sum of the numbers in /app/nums.txt to /app/sum.txt.\n")
    (tmp_path / "task.toml").write_text('schema_version = "1.0"\n[task]\nname = "aes/sum"\n')
    (tmp_path / "environment" / "Dockerfile").write_text("FROM aes-base:latest\nWORKDIR /app\nRUN seq 1 8 > nums.txt\n")
    (tmp_path / "solution" / "solve.sh").write_text("#!/bin/sh\npaste -sd+ /app/nums.txt | bc > /app/sum.txt\n")
    (tmp_path / "tests" / "test.sh").write_text("#!/bin/sh\n[ \"$(cat /app/sum.txt)\" = 36 ] && echo 1 > /logs/verifier/reward.txt\n")
    (tmp_path / "environment" / "blob.bin").write_bytes(b"\x00\x01binary")
    return tmp_path


def test_schema_requires_every_criterion_once_with_a_closed_outcome():
    schema = answer_schema()
    assert sorted(schema["required"]) == sorted(CRITERION_NAMES)
    assert "binary_reward" not in schema["properties"]
    assert schema["additionalProperties"] is False
    one = schema["properties"]["typos"]
    assert sorted(one["properties"]["outcome"]["enum"]) == ["fail", "not_applicable", "pass"]
    assert "$ref" not in json.dumps(schema)  # inlined for endpoints without $ref support


def test_valid_answer_parses_into_verdicts_that_validate_against_the_schema():
    verdicts = parse_review(json.dumps(_answer(typos="fail", structured_data_schema="not_applicable")))
    assert [v.name for v in verdicts] == list(CRITERION_NAMES)
    by_name = {v.name: v for v in verdicts}
    assert by_name["typos"].outcome == "fail" and by_name["typos"].reason == "because"
    assert by_name["structured_data_schema"].outcome == "not_applicable"
    # What the parser accepted round-trips through the strict schema type.
    msgspec.json.decode(json.dumps({v.name: {"outcome": v.outcome, "reason": v.reason} for v in verdicts}), type=ReviewAnswer)


def test_parser_is_lenient_about_wrapping_and_spelling():
    ans = _answer()
    ans["typos"] = {"outcome": "Not Applicable", "reason": "no names"}
    ans["pinned_dependencies"] = {"outcome": "PASS", "reason": "pinned"}
    text = "Sure! Here is my review:\n```json\n" + json.dumps(ans) + "\n```\nHope it helps."
    by_name = {v.name: v.outcome for v in parse_review(text)}
    assert by_name["typos"] == "not_applicable" and by_name["pinned_dependencies"] == "pass"
    as_list = {"criteria": [{"name": k, **v} for k, v in _answer(typos="failed").items()]}
    assert {v.name: v.outcome for v in parse_review(json.dumps(as_list))}["typos"] == "fail"


@pytest.mark.parametrize(
    "text, message",
    [
        ("I think the task is fine.", "no JSON object"),
        ('{"typos": {"outcome": "pass", "reason": "x"},}', "not valid JSON"),
        (json.dumps({k: v for k, v in _answer().items() if k != "typos"}), "missing criteria: typos"),
        (json.dumps(_answer(typos="maybe")), r"\$.typos.outcome"),
        (json.dumps({**_answer(), "binary_reward": {"outcome": "pass", "reason": ""}}), "binary_reward"),
        (json.dumps({**_answer(), "typos": {"outcome": "pass"}}), "reason"),
    ],
)
def test_invalid_answers_raise_review_parse_error(text, message):
    with pytest.raises(ReviewParseError, match=message):
        parse_review(text)


def _settings(**kw) -> ReviewSettings:
    return ReviewSettings(**kw)


async def test_malformed_output_is_retried_then_reported(task_dir):
    junk = ["<html>oops</html>", "{not json at all", json.dumps({"typos": {"outcome": "pass", "reason": "x"}})]
    with ReplayServer(junk) as srv:
        async with ChatClient(srv.url, "replay", retry=RetryPolicy(attempts=1)) as client:
            review = await review_task(task_dir, client, _settings(retries=2))
    assert review.criteria == ()
    assert review.attempts == 3 and len(srv.requests) == 3
    assert "no valid review after 3 attempts" in review.error and "missing criteria" in review.error
    # Each retry shows the model its previous answer and what was wrong with it.
    retry = srv.requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": junk[0]}
    assert "no JSON object" in retry[-1]["content"]


async def test_a_retry_that_succeeds_gives_verdicts(task_dir):
    with ReplayServer(["nope", json.dumps(_answer(hardcoded_solution="fail"))]) as srv:
        async with ChatClient(srv.url, "replay", retry=RetryPolicy(attempts=1)) as client:
            review = await review_task(task_dir, client, _settings(retries=2))
    assert review.error == "" and review.attempts == 2
    assert [v.name for v in review.failed] == ["hardcoded_solution"]
    prompt = srv.requests[0]["messages"][-1]["content"]
    assert "=== instruction.md ===" in prompt and "=== tests/test.sh ===" in prompt
    assert "blob.bin" not in prompt  # binary files are not shown


async def test_prompt_respects_the_character_budget(task_dir):
    (task_dir / "environment" / "big.csv").write_text("1,2,3\n" * 5000)
    with ReplayServer([json.dumps(_answer())]) as srv:
        async with ChatClient(srv.url, "replay", retry=RetryPolicy(attempts=1)) as client:
            await review_task(task_dir, client, _settings(max_file_chars=500, max_total_chars=2000))
    prompt = srv.requests[0]["messages"][-1]["content"]
    assert "more characters]" in prompt
    # Tests and solution come before bulky environment data, so the budget cuts the data.
    assert prompt.index("=== tests/test.sh ===") < prompt.index("=== environment/big.csv ===")
    files_part = prompt.split("The task's files:", 1)[1]
    assert len(files_part) < 2000 + 400  # budget plus headers and truncation notes


def test_review_settings_from_env(monkeypatch):
    monkeypatch.setenv("AES_REVIEW_ENFORCE", "yes")
    monkeypatch.setenv("AES_REVIEW_RETRIES", "4")
    s = ReviewSettings.from_env()
    assert s.enforce is True and s.retries == 4
    monkeypatch.setenv("AES_REVIEW_ENFORCE", "sometimes")
    with pytest.raises(ReviewSettingsError, match="AES_REVIEW_ENFORCE"):
        ReviewSettings.from_env()


@pytest.mark.model
async def test_the_real_local_model_produces_a_recorded_review(task_dir, local_model_url):
    async with ChatClient(local_model_url, "smollm2-135m") as client:
        review = await review_task(task_dir, client, _settings(retries=1, max_tokens=800))
    # SmolLM2-135M's verdicts are noise; what matters is that grammar-constrained output
    # makes a complete, schema-valid review that can be recorded.
    assert review.error == "", review.error
    assert [v.name for v in review.criteria] == list(CRITERION_NAMES)
    assert {v.outcome for v in review.criteria} <= {"pass", "fail", "not_applicable"}
