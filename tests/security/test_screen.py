"""The training-time screen (``aes_lib.sandbox.screen``): an attempt whose trial shows an attack
on the judge carries the signs to the learner, which leaves it out of its group's update."""

from __future__ import annotations

import pytest

from aes_proto.messages import BlobRef, RolloutSummary, TrajectoryRef
from aes_proto.records import RolloutOutcome

from aes_lib.agents.solver import publish_rollout
from aes_lib.sandbox import run_trial
from aes_lib.sandbox.screen import forgery_signs
from aes_lib.sandbox.trial import OracleAgent
from test_channels import (HONEST, PICKLE_ATTACK, PICKLE_HONEST, PICKLE_TESTS, YAML_ATTACK, YAML_IMAGE, YAML_TESTS,
                           _task)

# The honest answer, plus what no honest attempt needs: a link to the expected answers and a
# setuid copy of a program (neither crosses; both are the attempt's own evidence).
HONEST_AND_PROBING = HONEST + ("ln -s /tests/expected.txt /app/peek.txt\n"
                               "cp /bin/true /app/t && chmod u+s /app/t\n")


@pytest.mark.docker
async def test_signs_of_an_attack_are_found_and_honest_work_shows_none(tmp_path, images, test_label) -> None:
    task = _task(tmp_path / "honest", HONEST)
    honest = await run_trial(task, OracleAgent(task), images, labels=test_label)
    assert honest.reward == 1.0 and forgery_signs(honest) == (), honest.log()

    task = _task(tmp_path / "probing", HONEST_AND_PROBING)
    probing = await run_trial(task, OracleAgent(task), images, labels=test_label)
    signs = forgery_signs(probing)
    assert probing.reward == 1.0, probing.log()  # the reward is right: the answer was; the attempt still may not teach
    assert [s.split(":")[0] for s in signs] == ["link to the judge's files", "setuid file"], signs
    assert "/app/peek.txt: a link to /tests/expected.txt" in signs[0] and "/app/t" in signs[1]

    files = {"tests/test_ledger.py": PICKLE_TESTS}
    task = _task(tmp_path / "pickle", PICKLE_ATTACK, files=files)
    attack = await run_trial(task, OracleAgent(task), images, labels=test_label)
    assert attack.reward == 0.0
    [sign] = forgery_signs(attack)
    assert sign.startswith("agent's bytes refused as code:") and "pickle" in sign, attack.log()
    task = _task(tmp_path / "pickle-honest", PICKLE_HONEST, files=files)
    # A plain pickle of data names no class to find: the tests read it, and nothing is refused.
    plain = await run_trial(task, OracleAgent(task), images, labels=test_label)
    assert plain.reward == 1.0 and forgery_signs(plain) == (), plain.log()

    task = _task(tmp_path / "yaml", YAML_ATTACK, files={"tests/test_ledger.py": YAML_TESTS}, dockerfile_extra=YAML_IMAGE)
    attack = await run_trial(task, OracleAgent(task), images, labels=test_label)
    assert attack.reward == 0.0
    [sign] = forgery_signs(attack)
    assert sign.startswith("agent's bytes refused as code:") and "YAML tag (os.write)" in sign, attack.log()


class _Published:
    def __init__(self) -> None:
        self.published: list = []

    async def publish(self, subject, msg) -> None:
        self.published.append(msg)


async def test_the_signs_travel_with_the_attempt_to_the_learner() -> None:
    ref = BlobRef(key="trajectories/solver/r1/x.json", sha256="0" * 64, size=1)
    ctx = _Published()
    out = RolloutOutcome(reward=1.0, trajectory=ref, rollout_id="r1", env_id="e" * 64, stop_reason="done",
                         screened="link to the judge's files: /app/peek.txt: a link to /tests/expected.txt")
    await publish_rollout(ctx, out, episode_id="ep", group_id="g", group_size=4)
    summary, sample = ctx.published
    assert isinstance(summary, RolloutSummary) and summary.screened == out.screened
    assert isinstance(sample, TrajectoryRef) and sample.screened == out.screened
