"""Domains as plug-ins: the registry, routes, the proposer's view of a domain, the domain image
cache, and the per-domain numbers of ``aes status``."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from importlib.metadata import entry_points
from pathlib import Path

import docker
import pytest

from aes_proto.messages import Assignment, CalibrationResult, Lineage, RolloutSummary, Verdict

from aes_lib.agents.proposer.workspace import assignment_text, install_template
from aes_lib.bundle import Task
from aes_lib.domains import TERMINAL, UnknownDomainError, domain_of, get, names, registry
from aes_lib.domains.base import Domain
from aes_lib.domains.gate import DomainGate
from aes_lib.flywheel.status import render, summarize
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache, validate_task
from aes_lib.sandbox.images import DOMAIN_RECIPE_LABEL

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = ("terminal", "swe", "tool-calling", "browser", "gpu-kernels", "ask-human")


def test_every_built_in_domain_loads_with_a_gate_and_seeds():
    assert names()[0] == TERMINAL and set(BUILT_IN) <= set(names())
    for name in BUILT_IN[1:]:
        d = get(name)
        gate = d.gate_class()
        assert issubclass(gate, DomainGate) and gate.stage == name, name
        assert len(d.seeds) >= 2, f"{name}: at least two seed tasks"
        assert d.proposer_guide.strip(), f"{name}: no proposer.md"
        for seed in d.seeds:
            assert domain_of(Task.load(seed)).name == name, seed
    assert get("").name == TERMINAL and get(TERMINAL).gate is None and len(get(TERMINAL).seeds) >= 12


def test_unknown_domain_is_a_specific_error(tmp_path):
    with pytest.raises(UnknownDomainError, match="unknown domain 'chemistry' .*known: terminal"):
        get("chemistry")
    task = _copy_seed(tmp_path, "fix-permissions", metadata='domain = "chemistry"\n')
    with pytest.raises(UnknownDomainError, match="chemistry"):
        domain_of(Task.load(task))
    task = _copy_seed(tmp_path / "b", "fix-permissions", metadata="domain = 3\n")
    with pytest.raises(UnknownDomainError, match="must be a domain's name"):
        domain_of(Task.load(task))


def _installed(path: Path, dist: str, entry_points: str) -> None:
    """A dist-info folder as pip leaves one, declaring ``entry_points`` (lines of ``[aes.domains]``)."""
    info = path / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[aes.domains]\n{entry_points}\n")


@pytest.fixture
def fresh_registry(monkeypatch):
    """The registry re-reads the installed entry points, and forgets them again after the test."""
    registry._modules.cache_clear()
    get.cache_clear()
    yield monkeypatch
    registry._modules.cache_clear()
    get.cache_clear()


def test_the_shipped_domains_come_from_entry_points_and_the_library_names_none(fresh_registry):
    found = {ep.name: ep.value for ep in entry_points(group=registry.ENTRY_POINT_GROUP)}
    assert {n: found.get(n) for n in BUILT_IN[1:]} == {n: f"aes_domains.{n.replace('-', '_')}" for n in BUILT_IN[1:]}
    assert [get(n).root.parent.name for n in BUILT_IN[1:]] == ["aes_domains"] * 5
    fresh_registry.setattr(registry, "entry_points", lambda group: [])  # an install without our metadata
    registry._modules.cache_clear()
    get.cache_clear()
    assert names() == [TERMINAL]
    with pytest.raises(UnknownDomainError, match="unknown domain 'swe' .*make install"):
        get("swe")


def test_two_packages_that_register_one_name_are_a_specific_error(tmp_path, fresh_registry):
    _installed(tmp_path / "a", "lab-a", "lab-work = lab_a")
    _installed(tmp_path / "b", "lab-b", "lab-work = lab_b")
    fresh_registry.syspath_prepend(str(tmp_path / "a"))
    fresh_registry.syspath_prepend(str(tmp_path / "b"))
    with pytest.raises(UnknownDomainError, match="two packages register the domain 'lab-work'"):
        names()


def test_a_package_cannot_replace_the_terminal_default(tmp_path, fresh_registry):
    _installed(tmp_path, "shell-plus", "terminal = shell_plus")
    fresh_registry.syspath_prepend(str(tmp_path))
    with pytest.raises(UnknownDomainError, match="shell_plus: 'terminal' is the default domain"):
        get("swe")


def test_a_domain_gate_heads_its_candidates_route():
    base = ("validate", "contamination", "calibrate")
    assert get("browser").route(base) == ("browser", *base)
    assert get(TERMINAL).route(base) == base
    assert get("swe").route(("swe", "calibrate")) == ("swe", "calibrate")  # never twice


def test_the_proposer_reads_the_domains_guide_and_template(tmp_path):
    a = Assignment(idempotency_key="a", episode_id="a", direction="new",
                   lineage=Lineage(assignment_id="a", domain="ask-human"))
    text = assignment_text(a)
    assert "- domain: ask-human (" in text and get("ask-human").proposer_guide.strip()[:80] in text
    plain = assignment_text(Assignment(idempotency_key="b", episode_id="b", direction="new",
                                       lineage=Lineage(assignment_id="b")))
    assert "- domain: terminal (Terminal)" in plain and "## Writing a" not in plain
    overlay = get("ask-human").template_dir
    assert overlay is not None
    install_template(tmp_path / "t", "ask-human")
    for f in overlay.rglob("*"):
        if f.is_file():
            assert (tmp_path / "t" / f.relative_to(overlay)).read_bytes() == f.read_bytes()
    assert (tmp_path / "t" / "tests" / "test.sh").is_file()


def _result(domain: str, decision: str, revision: int = 0, resubmitted: bool = False) -> CalibrationResult:
    aid = f"{domain}-{decision}-{revision}-{resubmitted}"
    return CalibrationResult(idempotency_key=aid, episode_id=aid, env_id=aid, decision=decision,  # type: ignore[arg-type]
                             lineage=Lineage(assignment_id=aid, domain=domain, revision=revision),
                             resubmitted=resubmitted,
                             verdicts=(Verdict(stage=domain or "validate", ok=decision == "admitted", reason="x"),))


def test_status_shows_acceptance_and_rounds_per_domain_and_asking():
    results = [
        _result("browser", "admitted", revision=1), _result("browser", "rejected", resubmitted=True),
        _result("browser", "rejected"), _result("swe", "admitted"), _result("", "admitted", revision=2),
    ]
    rollouts = [RolloutSummary(idempotency_key=f"r{i}", episode_id="e", rollout_id=f"r{i}", env_id="x",
                               role="solver", reward=r, metrics=m)
                for i, (r, m) in enumerate([(1.0, {"asks": 2, "ask_f1": 1.0}), (0.0, {"asks": 0, "ask_f1": 0.0}),
                                            (0.5, {})])]
    s = summarize(results, [], rollouts)
    got = {n: (d.runs, d.accepted, d.rounds_per_accepted) for n, d in s.domains.items()}
    # the resubmitted browser candidate is no finished run: its revision decided
    assert got == {"browser": (2, 1, 2.0), "swe": (1, 1, 1.0), "terminal": (1, 1, 3.0)}
    assert s.ask is not None and (s.ask.attempts, s.ask.asked, s.ask.mean_ask_f1) == (2, 1, 0.5)
    text = render(s, 0, {})
    assert "browser        1/2 = 50.0%   rounds 2.00" in text
    assert "ask_human: 2 attempts, ask rate 50.0%, Ask-F1 50.0%" in text


def _copy_seed(tmp_path: Path, seed: str, metadata: str = "") -> Path:
    dest = tmp_path / seed
    shutil.copytree(ROOT / "seeds" / seed, dest)
    if metadata:
        toml = dest / "task.toml"
        toml.write_text(toml.read_text().replace("[metadata]\n", "[metadata]\n" + metadata, 1))
    return dest


@pytest.mark.docker
def test_a_task_of_an_unknown_domain_or_without_a_gpu_gets_a_clear_verdict(tmp_path):
    images = ImageCache(kinds=DomainKinds())
    unknown = asyncio.run(validate_task(_copy_seed(tmp_path, "fix-permissions", 'domain = "chemistry"\n'), images))
    assert (unknown.ok, unknown.reason) == (False, "unknown_domain") and "chemistry" in unknown.detail
    gpu = _copy_seed(tmp_path / "g", "fix-permissions")
    (gpu / "task.toml").write_text((gpu / "task.toml").read_text().replace("allow_internet", "gpus = 1\nallow_internet"))
    report = asyncio.run(validate_task(gpu, images))
    assert (report.ok, report.reason) == (False, "needs_gpu") and "needs a GPU" in report.detail


@pytest.mark.docker
def test_a_domain_image_is_built_once_per_recipe(tmp_path):
    (tmp_path / "image").mkdir()
    recipe = tmp_path / "image" / "Dockerfile"
    recipe.write_text("FROM aes-base:latest\nRUN echo one > /etc/aes-domain-test\n")
    domain = Domain(name=f"test-{tmp_path.name[-8:].lower()}", title="Test", root=tmp_path)

    class Unregistered:
        """The kinds of this one domain, which no registry holds."""

        def recipe(self, image: str) -> Path | None:
            return domain.image_dir if image == domain.image else None

        def startup(self, task: Task) -> str | None:
            return domain.startup

    images = ImageCache(kinds=Unregistered())
    try:
        first = asyncio.run(images.base_image(domain.image))
        built = images.client.images.get(domain.image)
        assert built.labels[DOMAIN_RECIPE_LABEL] == first
        assert asyncio.run(images.base_image(domain.image)) == first
        assert images.client.images.get(domain.image).id == built.id  # same recipe: not rebuilt
        recipe.write_text("FROM aes-base:latest\nRUN echo two > /etc/aes-domain-test\n")
        second = asyncio.run(images.base_image(domain.image))
        assert second != first and images.client.images.get(domain.image).id != built.id
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):  # a failed build left none
            images.client.images.remove(domain.image, force=True)
