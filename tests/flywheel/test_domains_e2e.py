"""End to end per domain, with a replayed model: an assignment of each domain becomes a candidate
that starts at its domain's gate, then the validator and the calibrator, on a real bus with real
Docker. The proposer (Prompt mode) replays one of the domain's seeds; the replayed solver solves
half of the calibration attempts, so every domain's candidate is admitted -- except the GPU one,
which its gate answers ``needs_gpu`` here (and does not send back: no revision could fix it).
"""

import dataclasses
import re
import threading
import uuid

import pytest
from replay_server import ReplayServer

from aes_proto import subjects
from aes_proto.messages import Assignment, CalibrationResult, Lineage, RolloutSummary, ValidationResult

from aes_lib.agents.proposer.files import format_files
from aes_lib.domains import get as get_domain
from aes_lib.domains import names as domain_names
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.status import summarize
from aes_services.calibrator import CalibratorService
from aes_services.proposer import ProposerService
from aes_services.registry import DOMAIN_GATES, service_class
from aes_services.validator import ValidatorService

from flywheel_helpers import GIVE_UP_ONE, one_turn_solve, running, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.docker]

DOMAINS = [n for n in domain_names() if get_domain(n).gate]
SEEDS = {n: get_domain(n).seeds[0] for n in DOMAINS}
_DOMAIN_LINE = re.compile(r"^- domain: (\S+) ", re.MULTILINE)


def _files(seed) -> dict[str, str]:
    """The seed as the proposer's reply (the harness adds the managed tests/test.sh)."""
    return {p.relative_to(seed).as_posix(): p.read_text() for p in sorted(seed.rglob("*"))
            if p.is_file() and p.relative_to(seed).as_posix() != "tests/test.sh"}


class DomainReplay(ReplayServer):
    """Stands in for one model in both roles, answering by what it is asked: a proposer prompt
    gets the seed of the domain its assignment names; a solver gets, per task, a one-command
    solution and a give-up in turn (two of four calibration attempts pass)."""

    def __init__(self) -> None:
        super().__init__(replies=[])
        self.turn: dict[str, int] = {}
        self.turn_lock = threading.Lock()

    def _answer(self, body):
        with self._lock:
            self.requests.append(body)
        text = "\n".join(m.get("content", "") for m in body.get("messages", []))
        if m := _DOMAIN_LINE.search(text):
            return self.completion(body, format_files(_files(SEEDS[m.group(1)])))
        for name, seed in SEEDS.items():
            if (seed / "instruction.md").read_text().strip()[:200] in text:
                with self.turn_lock:
                    k = self.turn[name] = self.turn.get(name, -1) + 1
                return self.completion(body, one_turn_solve(seed) if k % 2 == 0 else GIVE_UP_ONE)
        self.errors.append(f"unrecognised request: {text[:300]}")
        return 400, {"error": {"message": "replay: unrecognised request"}}


def _assignment(domain: str) -> Assignment:
    aid = f"{domain}-{uuid.uuid4().hex[:8]}"
    return Assignment(idempotency_key=aid, episode_id=aid, direction="new",
                      lineage=Lineage(assignment_id=aid, domain=domain, mode="prompt"))


async def test_a_candidate_of_each_domain_passes_its_gate(fresh_nats, bus, monkeypatch):
    monkeypatch.setenv("AES_ASK_HUMAN_JUDGE", "keywords")
    config = FlywheelConfig(generation_mode="prompt", solver_max_turns=1, max_revisions=0)
    gates = [service_class(spec)() for spec in DOMAIN_GATES.values()]
    for g in (*gates, validator := ValidatorService()):
        g.max_revisions = 0
    with DomainReplay() as model:
        settings = dataclasses.replace(fresh_nats, model_url=model.url, model="replay", route="validate,calibrate")
        async with running(settings, ProposerService(), *gates, validator, CalibratorService(config=config)):
            for name in DOMAINS:
                await bus.publish(subjects.ASSIGNMENT, _assignment(name))
            results = await wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult,
                                     lambda rs: {r.lineage.domain for r in rs} >= set(DOMAINS))
            # A failure's logs by domain (the episode id starts with it).
            logs = {v.episode_id.rsplit("-", 1)[0]: bus.blobs.get_bytes(v.logs).decode(errors="replace")
                    for v in await bus.history(subjects.RESULT_VALIDATION, ValidationResult) if v.logs}
    for name, text in logs.items():  # pytest shows captured output in full, unlike a long assert message
        print(f"### validation logs of {name}\n{text}")
    assert not model.errors, model.errors
    final = {r.lineage.domain: r for r in results}
    for name in DOMAINS:
        r = final[name]
        stages = [v.stage for v in r.verdicts]
        assert stages[0] == name, (name, r.verdicts)  # the domain's gate comes first
        if get_domain(name).seeds[0].joinpath("task.toml").read_text().count("gpus = 1"):
            assert r.decision == "rejected" and not r.resubmitted, r
            assert (r.verdicts[-1].stage, r.verdicts[-1].reason) == (name, "needs_gpu")
        else:
            assert r.decision == "admitted", (name, r.verdicts)
            assert stages == [name, "validate", "calibrate"] and r.rewards.count(1.0) == 2, r
    table = summarize(results, [], await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary)).domains
    assert {n: (d.runs, d.accepted) for n, d in table.items()} == {
        n: (1, int(final[n].decision == "admitted")) for n in DOMAINS}
