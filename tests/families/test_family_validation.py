"""Family instances pass the validator's checks with real Docker, at their easiest and hardest:
the image builds, the reference solution scores 1.0, the empty solution below 0.5 (here 0),
and no tamper probe forges the reward."""

from __future__ import annotations

import uuid

import pytest

from aes_lib import families
from aes_lib.domains.validation import validate_in_domain
from aes_lib.families import Params

pytestmark = pytest.mark.docker

CASES = [(name, level) for name in families.names()[:3] for level in ("min", "max")]


@pytest.mark.parametrize(("name", "level"), CASES)
async def test_instance_validates(tmp_path, images, name, level):
    f = families.get(name)
    difficulty = f.min_difficulty if level == "min" else f.max_difficulty
    root = families.write_instance(f, Params(difficulty, 2026), tmp_path / "task")
    label = {"aes.managed": "1", "aes.test": f"families-{uuid.uuid4().hex[:8]}"}
    report = await validate_in_domain(root, images, labels=label)
    assert report.ok, f"{report.reason}: {report.detail}\n{report.logs[-4000:]}"
    assert report.oracle_reward == 1.0 and report.nop_reward == 0.0
    left = images.client.containers.list(all=True, filters={"label": f"aes.test={label['aes.test']}"})
    assert not left, f"containers left behind: {[c.name for c in left]}"
