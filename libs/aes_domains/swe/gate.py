"""Admission of software-engineering tasks: ``[metadata]`` names the repository (absolute
path) and the command that runs its public tests; in a fresh container the repository is
a git work tree with history and nothing uncommitted, and its public tests pass (the
issue's bug is one they miss, so a regression the hidden tests find is a real one)."""

from __future__ import annotations

import shlex

from aes_proto.messages import Verdict

from aes_lib.bundle import Task
from aes_lib.domains.gate import DomainGate
from aes_lib.sandbox import Sandbox

PUBLIC_TESTS_TIMEOUT = 300.0
"""Seconds the public tests may take in the probe."""
GIT = "git -c safe.directory='*'"
"""The repository's owner need not be the probe's user (root)."""


class SweGate(DomainGate):
    stage = "swe"

    def check(self, task: Task) -> Verdict | None:
        meta = task.config.metadata or {}
        repo, tests = meta.get("repo"), meta.get("public_tests")
        if not isinstance(repo, str) or not repo:
            return self.verdict(False, "no_repo_path", '[metadata] repo must be the repository\'s absolute path '
                                '(e.g. "/app/repo")')
        if not repo.startswith("/"):
            return self.verdict(False, "repo_not_absolute", f"[metadata] repo = {repo!r} is not an absolute path")
        if not isinstance(tests, str) or not tests.strip():
            return self.verdict(False, "no_public_tests", "[metadata] public_tests must be the command, run in the "
                                "repository, that runs its own public tests (e.g. \"python3 -m pytest -q tests\")")
        return None

    async def probe(self, task: Task, sandbox: Sandbox) -> Verdict | None:
        meta = task.config.metadata
        repo = shlex.quote(meta["repo"])
        inside = await sandbox.exec(f"{GIT} -C {repo} rev-parse --show-toplevel", timeout=30, user=0)
        if inside.exit_code != 0:
            return self.verdict(False, "no_repo", f"{meta['repo']} is not a git repository: "
                                f"{inside.output.strip()[-300:]}")
        commits = await sandbox.exec(f"{GIT} -C {repo} rev-list --count HEAD", timeout=30, user=0)
        if commits.exit_code != 0 or not commits.output.strip().isdigit() or int(commits.output) < 1:
            return self.verdict(False, "no_commits", f"{meta['repo']} has no commit: {commits.output.strip()[-300:]}")
        status = await sandbox.exec(f"{GIT} -C {repo} status --porcelain --untracked-files=all", timeout=30, user=0)
        if status.exit_code != 0 or status.output.strip():
            return self.verdict(False, "dirty_repo", "the repository must start clean (commit or .gitignore "
                                f"everything): {status.output.strip()[:500]}")
        run = await sandbox.exec(f"cd {repo} && {meta['public_tests']}", timeout=PUBLIC_TESTS_TIMEOUT,
                                 user=task.config.agent.user)
        if run.timed_out or run.exit_code != 0:
            why = f"ran past {PUBLIC_TESTS_TIMEOUT:g}s" if run.timed_out else f"exited {run.exit_code}"
            return self.verdict(False, "public_tests_fail", f"the public tests ({meta['public_tests']}) {why} at the "
                                f"start; they must pass before the fix:\n{run.output.strip()[-1500:]}")
        return None
