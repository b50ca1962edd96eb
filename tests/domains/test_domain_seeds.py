"""Every domain's seed tasks pass admission as a candidate of their domain must: the common rule
(oracle 1.0, nop below 0.5) and then their domain's gate (nop exactly 0, the domain's own rules),
in real containers; a GPU task gets the clear ``needs_gpu`` verdict where the engine has none."""

from __future__ import annotations

import uuid

import pytest

from aes_lib.domains import get, names
from aes_lib.domains.validation import validate_in_domain
from aes_lib.sandbox.images import gpu_engine

SEEDS = [(name, seed) for name in names() if name != "terminal" for seed in get(name).seeds]


def test_every_domain_with_a_gate_has_two_seeds():
    gated = {n for n in names() if get(n).gate}
    counts = {n: sum(1 for d, _ in SEEDS if d == n) for n in gated}
    assert counts and all(c >= 2 for c in counts.values()), counts


@pytest.mark.docker
@pytest.mark.parametrize(("domain", "seed"), SEEDS, ids=[f"{d}/{s.name}" for d, s in SEEDS])
async def test_seed_is_admitted_by_the_common_rule_and_its_domain_gate(domain, seed, images):
    label = {"aes.managed": "1", "aes.test": f"domain-seed-{uuid.uuid4().hex[:8]}"}
    report = await validate_in_domain(seed, images, labels=label)
    if "gpus = 1" in (seed / "task.toml").read_text() and not gpu_engine(images.client):
        assert (report.ok, report.reason) == (False, "needs_gpu") and "needs a GPU" in report.detail, report
        return
    assert report.ok, f"{report.reason}: {report.detail}\n{report.logs[-4000:]}"
    assert (report.oracle_reward, report.nop_reward) == (1.0, 0.0)
    left = images.client.containers.list(all=True, filters={"label": f"aes.test={label['aes.test']}"})
    assert not left, f"containers left behind: {[c.name for c in left]}"
