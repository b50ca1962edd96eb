"""The browser domain's admission rules.

Static: the agent works as a named non-root user (else it could edit the saved state
directly and the task would not be a browser task), the image is ``aes-browser:latest``,
the web application is shipped as ``environment/web/app.py`` (installed at
``/srv/web/app.py``), and the reference solution acts through ``browse``. In a container,
after ``aes-web-up``: ``browse`` renders the application's front page as the agent user,
and that user cannot write anything under ``/srv/web``.
"""

from __future__ import annotations

import re

from aes_proto.messages import Verdict

from aes_lib.bundle import Task
from aes_lib.domains.gate import DomainGate
from aes_lib.sandbox import Sandbox

from aes_domains.browser import APP_DIR, APP_PATH, APP_URL

IMAGE = "aes-browser:latest"
APP_SOURCE = "web/app.py"
"""The application's place in environment/ (the Dockerfile copies web/ to /srv/web/)."""
PROBE_TIMEOUT = 90.0
BROWSE_CALL = re.compile(r"(^|[\s;&|(`$])browse\s")


class BrowserGate(DomainGate):
    stage = "browser"

    def check(self, task: Task) -> Verdict | None:
        if v := self.unprivileged_agent(task, "the web application") or self.on_image(
                task, IMAGE, "it has the browser and aes-web-up"):
            return v
        if not (task.environment_dir / APP_SOURCE).is_file():
            return self.verdict(False, "no_app", f"environment/{APP_SOURCE} is missing: the web application the "
                                f"Dockerfile installs as {APP_PATH}")
        solve = task.solution_dir / "solve.sh"
        if not BROWSE_CALL.search(solve.read_text(errors="replace") if solve.is_file() else ""):
            return self.verdict(False, "oracle_not_browsing", "solution/solve.sh never calls `browse`: the reference "
                                "solution must act through the browser, as the agent has to")
        return None

    async def probe(self, task: Task, sandbox: Sandbox) -> Verdict | None:
        if v := await self.agent_cannot_reach(task, sandbox, APP_DIR):
            return v
        user = task.config.agent.user
        r = await sandbox.exec(f"browse {APP_URL} --text", timeout=PROBE_TIMEOUT, user=user)
        if r.exit_code != 0 or "URL: " not in r.output:
            return self.verdict(False, "browser_failed", f"`browse {APP_URL}` as {user!r} exited {r.exit_code}: "
                                f"{r.output[-1500:]}")
        return None
