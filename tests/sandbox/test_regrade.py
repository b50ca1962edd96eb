"""Re-grading from a trial's stored end state (``aes_lib.sandbox.trial.regrade``): the same
verifier gives the same reward without the agent, and a stricter one takes back what an older
verifier gave a forgery (real Docker)."""

from __future__ import annotations

import posixpath
import tarfile
from pathlib import Path

import pytest

from aes_lib.bundle import Task
from aes_lib.sandbox import NopAgent, OracleAgent, run_trial, verifier
from aes_lib.sandbox.end_state import EndStateError, pack, unpack
from aes_lib.sandbox.trial import regrade
from scripted import ShellAgent, tar_of

LEDGER = Path(__file__).parents[1] / "security" / "tasks" / "ledger-sum"
# Outputs that are links into the verifier's expected answer (red team class 3).
LINKS = ("ln -sf /tests/expected.txt /app/answer.txt && printf '#!/bin/sh\\ncat /app/answer.txt\\n' > /app/solve"
         " && chmod 755 /app/solve")


def _unchecked(start, target, roots, view):
    """The link rule of a verifier before links were checked: every link crosses."""
    return posixpath.normpath(posixpath.join(start, target)), True


def test_end_state_round_trip_and_budget():
    app = tar_of({"app/answer.txt": b"42\n"})
    state = pack([("/app", app), ("/srv/out", None)], owners=False)
    assert app.tell() == 0  # left where rebuild reads from
    [(root, raw), (gone, absent)], owners = unpack(state)
    assert (root, gone, absent, owners) == ("/app", "/srv/out", None, False)
    assert unpack(pack([("/app", None)]))[1] is True
    assert tarfile.open(fileobj=raw).extractfile("app/answer.txt").read() == b"42\n"
    big = tar_of({"app/noise": bytes(range(256)) * 4096})
    assert pack([("/app", big)], limit=4096) is None
    assert big.tell() == 0
    with pytest.raises(EndStateError, match="not a stored end state"):
        unpack(b"not a tarball")


@pytest.mark.docker
async def test_the_same_verifier_gives_the_same_reward_without_the_agent(images):
    task = Task.load(LEDGER)
    for agent, reward in ((OracleAgent(task), 1.0), (NopAgent(), 0.0), (ShellAgent("echo 41 > /app/answer.txt"), 0.0)):
        trial = await run_trial(task, agent, images)
        assert trial.reward == reward and trial.end_state
        again = await regrade(task, trial.end_state, images)
        assert (again.reward, again.metrics) == (trial.reward, trial.metrics)


@pytest.mark.docker
async def test_padding_the_results_does_not_dodge_regrading(images):
    # 16 MiB of incompressible noise beside the forgery: an end state over the old 8 MiB cap.
    task = Task.load(LEDGER)
    trial = await run_trial(task, ShellAgent(LINKS + " && head -c 16777216 /dev/urandom > /app/.pad"), images)
    assert trial.end_state is not None and len(trial.end_state) > 16 << 20
    assert (await regrade(task, trial.end_state, images)).reward == trial.reward


@pytest.mark.docker
async def test_a_stricter_verifier_takes_back_a_forged_reward(images, monkeypatch):
    task = Task.load(LEDGER)
    with monkeypatch.context() as old:
        old.setattr(verifier, "_resolve", _unchecked)
        forged = await run_trial(task, ShellAgent(LINKS), images)
    # The older verifier let the link into /tests cross: the answer-file test passed (the
    # program, run without the tests' group, could not read through it).
    assert forged.reward == 0.5
    regraded = await regrade(task, forged.end_state, images)
    assert regraded.reward == 0.0
    assert any("/app/answer.txt: a link to /tests/expected.txt" in d for d in regraded.dropped)
