"""``DomainGate``: a domain's admission stage, the paper's cross-domain rules plus its own.

In order, each a verdict of its own: the task names this domain; it gets the GPUs it asks
for (``needs_gpu`` otherwise: a fact about this machine, never sent back to the proposer);
``check`` (the domain's static rules); the image builds; ``probe`` in a fresh container
after the domain's startup (its services answer, its tools work); and the do-nothing agent
earns exactly 0 (the validator only asks for below 0.5). A domain's gate is a subclass
with ``stage`` set to the domain's name; ``check_task`` runs it without a bus (``aes
validate`` and tests call it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import shlex
from typing import ClassVar

from aes_proto.messages import CandidateEnv, Verdict

from aes_lib.bundle import Task
from aes_lib.domains.kinds import DomainKinds
from aes_lib.domains.registry import domain_name, domain_of
from aes_lib.gate import Judgement, SandboxGate
from aes_lib.sandbox import ImageCache, Limits, NopAgent, Sandbox, run_trial
from aes_lib.sandbox.images import FROM_LINE, BuildFailedError, gpu_engine
from aes_lib.sandbox.trial import start_services
from aes_lib.service import Context


@dataclasses.dataclass(frozen=True)
class DomainReport:
    """What the gate found; ``logs`` is the evidence a revision reads."""

    verdict: Verdict
    logs: str = ""


class DomainGate(SandboxGate):
    """Subclass with ``stage = "<domain name>"``; override ``check`` and/or ``probe``."""

    budget = 1800.0
    not_sent_back: ClassVar[frozenset[str]] = frozenset()
    """Reasons that are not the candidate's fault (beyond ``needs_gpu``): never sent back."""

    def task_kinds(self) -> DomainKinds:
        return DomainKinds()

    def check(self, task: Task) -> Verdict | None:
        """The domain's rules on the task's files; a failing verdict, or None to go on."""
        return None

    async def probe(self, task: Task, sandbox: Sandbox) -> Verdict | None:
        """The domain's rules in a fresh container of the task's image, its services started;
        a failing verdict, or None to go on."""
        return None

    def verdict(self, ok: bool, reason: str, detail: str = "") -> Verdict:
        return Verdict(stage=self.stage, ok=ok, reason=reason, detail=detail)

    # Rules several domains share: the state lives behind an interface (a service, a web app)
    # that an unprivileged agent must go through, on the domain's own image.

    def unprivileged_agent(self, task: Task, interface: str) -> Verdict | None:
        """``[agent] user`` names a non-root user, so the agent can change the task's state only
        through ``interface``."""
        user = task.config.agent.user
        if user is None or user == "":
            return self.verdict(False, "no_agent_user", f"[agent] user must name the non-root user the agent runs "
                                f"as (created in the Dockerfile): it may change the state only through {interface}")
        if str(user) in ("root", "0"):
            return self.verdict(False, "agent_is_root", f"[agent] user = {user!r}: as root the agent could edit the "
                                f"state directly instead of going through {interface}; use a non-root user")
        return None

    def on_image(self, task: Task, image: str, why: str) -> Verdict | None:
        """The environment's Dockerfile starts ``FROM image`` (which holds ``why``)."""
        dockerfile = task.environment_dir / "Dockerfile"
        text = dockerfile.read_text(errors="replace") if dockerfile.is_file() else ""
        bases = [m.group(2) for m in FROM_LINE.finditer(text)]
        if bases[:1] != [image]:
            return self.verdict(False, "wrong_image", f"environment/Dockerfile must start FROM {image} ({why}); "
                                f"found FROM {', '.join(bases) or 'nothing'}")
        return None

    async def agent_cannot_reach(self, task: Task, sandbox: Sandbox, state_dir: str, readable: str = "") -> Verdict | None:
        """In the container: the agent user exists, is not uid 0 under another name, and can write
        nothing under ``state_dir`` (nor read files matching the ``find -name`` pattern ``readable``)."""
        user = str(task.config.agent.user)
        who = await sandbox.exec(f"id -u {shlex.quote(user)}", timeout=30, user=0)
        if who.exit_code != 0:
            return self.verdict(False, "no_such_user", f"[agent] user {user!r} does not exist in the image: "
                                f"{who.output.strip()[-300:]}")
        if who.output.strip() == "0":
            return self.verdict(False, "agent_is_root", f"[agent] user {user!r} has uid 0")
        test = "-writable" + (f" -o \\( -name {shlex.quote(readable)} -readable \\)" if readable else "")
        # Unreadable folders are fine (the agent cannot write there either): their errors are dropped.
        exposed = await sandbox.exec(f"find {shlex.quote(state_dir)} \\( {test} \\) -print 2>/dev/null",
                                     timeout=60, user=user)
        if found := exposed.output.split():
            return self.verdict(False, "state_exposed", f"the agent user {user!r} can "
                                f"{'read or write' if readable else 'write'} {', '.join(found[:5])}: the task's "
                                "state must be out of its reach")
        return None

    async def check_task(self, task: Task, images: ImageCache | None = None,
                         labels: dict[str, str] | None = None) -> DomainReport:
        """Judge ``task`` by every rule above, in order; its containers carry ``labels``."""
        images = images or self.images
        assert images is not None, "setup() not run"
        if (named := domain_name(task.config.metadata)) != self.stage:
            return DomainReport(self.verdict(False, "wrong_domain", f"the task is of domain {named!r}, not {self.stage!r}"))
        if (gpus := task.config.environment.gpus) and not await asyncio.to_thread(gpu_engine, images.client):
            return DomainReport(self.verdict(False, "needs_gpu", f"needs a GPU: the task asks for {gpus} and this "
                                             "Docker engine has no GPU runtime"))
        if (v := self.check(task)) is not None:
            return DomainReport(v)
        try:
            image = await images.build(task)
        except BuildFailedError as e:
            return DomainReport(self.verdict(False, "build_failed", str(e)), e.log)
        # A container only when there is something to check in it: the domain's startup or a probe.
        startup = domain_of(task).startup
        if startup or type(self).probe is not DomainGate.probe:
            env = task.config.environment
            async with Sandbox.start(image, Limits.for_task(env, self.caps), client=images.client, labels=labels,
                                     env=env.env, workdir=env.workdir) as sb:
                started = await start_services(sb, startup)
                if started is not None and started.exit_code != 0:
                    return DomainReport(self.verdict(False, "startup_failed", f"startup exited {started.exit_code}"),
                                        started.output)
                if (v := await self.probe(task, sb)) is not None:
                    return DomainReport(v)
        nop = await run_trial(task, NopAgent(), images, image=image, caps=self.caps, labels=labels)
        if nop.reward != 0.0:
            return DomainReport(self.verdict(False, "nop_earns_reward",
                                             f"the do-nothing agent earns {nop.reward:g}, not exactly 0"), nop.log())
        return DomainReport(self.verdict(True, "ok", "nop earns 0"))

    async def judge(self, task: Task, candidate: CandidateEnv, ctx: Context) -> Judgement:
        report = await self.check_task(task, labels={"aes.env_id": candidate.env_id[:32], "aes.stage": self.stage})
        return Judgement(report.verdict, report)

    def feedback(self, judgement: Judgement) -> str | None:
        v = judgement.verdict
        if v.reason == "needs_gpu" or v.reason in self.not_sent_back:
            return None
        report = judgement.evidence
        return report.logs if isinstance(report, DomainReport) else ""

