"""Admission of tool-calling tasks: the solver must be an unprivileged user on the domain's
image, the task must ship its service, and once started the service must offer the agent
user typed methods while keeping its state unreadable to that user."""

from __future__ import annotations

import re

from aes_proto.messages import Verdict

from aes_lib.bundle import Task
from aes_lib.domains.gate import DomainGate
from aes_lib.sandbox import Sandbox

IMAGE = "aes-tool-calling:latest"
STATE_DIR = "/srv/service"
METHOD_LINE = re.compile(r"^\w+\(", re.M)
"""A method's first line in `aes-call list`: ``name(param: type, ...)``."""


class ToolCallingGate(DomainGate):
    stage = "tool-calling"

    def check(self, task: Task) -> Verdict | None:
        if v := self.unprivileged_agent(task, "the service's calls") or self.on_image(
                task, IMAGE, "it has aes-call and aes-tools-up"):
            return v
        if not any(task.environment_dir.rglob("service.py")):
            return self.verdict(False, "no_service", "environment/ ships no service.py for the Dockerfile to copy "
                                f"to {STATE_DIR}/service.py")
        return None

    async def probe(self, task: Task, sandbox: Sandbox) -> Verdict | None:
        # The state must be out of the agent's reach for reading too: the tests read it.
        if v := await self.agent_cannot_reach(task, sandbox, STATE_DIR, readable="*.json"):
            return v
        user = str(task.config.agent.user)
        listed = await sandbox.exec("aes-call list", timeout=60, user=user)
        if listed.exit_code != 0:
            return self.verdict(False, "list_failed", f"`aes-call list` as {user} exited {listed.exit_code}: "
                                f"{listed.output.strip()[-800:]}")
        if not METHOD_LINE.search(listed.output):
            return self.verdict(False, "no_methods", "the service declares no methods")
        return None
