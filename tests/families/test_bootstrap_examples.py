"""The bootstrap's examples: reference solutions, and the family's near miss at the asked share."""

from __future__ import annotations

import json
import dataclasses

import pytest

from aes_lib import families
from aes_lib.families import Params
from aes_ops.bootstrap_policy import BOOTSTRAP_SEEDS, PolicySpec, examples

NAMES = ["echo-words", "pick-first"]


def _commands(spec: PolicySpec) -> list[tuple[str, str]]:
    """(family, command) of each example, the command read back out of its fenced reply."""
    return [(NAMES[i % 2], reply.removeprefix("```bash\n").removesuffix("\n```"))
            for i, (_, reply) in enumerate(examples(NAMES, spec))]


def test_without_a_near_miss_every_reply_is_the_reference_solution():
    spec = PolicySpec(examples=64)
    for name, command in _commands(spec):
        assert command.startswith("printf '%s\\n' "), (name, command)


@pytest.mark.parametrize("share", [0.25, 0.5])
def test_the_near_miss_share_replaces_that_share_of_the_replies_where_a_family_has_one(share):
    spec = PolicySpec(examples=400, near_miss_share=share)
    got = _commands(spec)
    plain = examples(NAMES, dataclasses.replace(spec, near_miss_share=0.0))
    echo = [c for name, c in got if name == "echo-words"]
    misses = [c for c in echo if c.startswith("echo ")]
    assert abs(len(misses) / len(echo) - share) < 0.1
    assert all(not c.startswith("echo ") for name, c in got if name == "pick-first")  # no near miss: untouched
    # The same instances in the same order: only the replies differ.
    assert [instruction for instruction, _ in examples(NAMES, spec)] == [instruction for instruction, _ in plain]
    # Each near miss is the family's own, for its instance.
    f = families.get("echo-words")
    for i, (name, command) in enumerate(got):
        if command.startswith("echo "):
            assert any(f.instance(Params(d, BOOTSTRAP_SEEDS + i)).near_miss == command for d in (1, 2)), command


def test_a_folder_taught_other_text_is_not_reused(tmp_path, monkeypatch):
    from aes_ops import bootstrap_policy

    spec = bootstrap_policy.PolicySpec(examples=8)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / bootstrap_policy.RECIPE).write_text(json.dumps(bootstrap_policy.recipe(["ladder"], spec)))
    assert bootstrap_policy.made_from(tmp_path, ["ladder"], spec)
    taught = bootstrap_policy.examples
    monkeypatch.setattr(bootstrap_policy, "examples",
                        lambda names, s: [(i.replace("exactly", "precisely"), r) for i, r in taught(names, s)])
    assert not bootstrap_policy.made_from(tmp_path, ["ladder"], spec)  # same spec, the family's words changed
