"""The input probe: do the tests judge against inputs the agent could rewrite?

Tests that recompute the expected answer from an input file in the result paths follow whatever
the agent left there: an agent shrinks the input and writes the matching answer. The image's own
copy is at ``verifier.PRISTINE``; this probe finds tasks whose reward follows the agent's copy.
Each text data file of the image under the result paths (not code, not under ``.git``) is
"mutated" (its lines halved, a one-line file doubled), in two trials:

- ``after``: the reference runs, then the files it left unchanged are mutated. A reward below
  the reference's means the verdict reads those files;
- ``before``: the files are mutated, then the reference runs on them. A full reward here means
  the tests accepted an answer computed from the agent's copy: the reward followed it.

Both together make the task ``verifier_forgeable``, naming the files. Files are picked by their
content against the image's (hashes taken before anything runs), never by timestamps.
"""

from __future__ import annotations

import dataclasses

from aes_lib.bundle import Task
from aes_lib.sandbox import changes
from aes_lib.sandbox.container import Sandbox
from aes_lib.sandbox.trial import AgentOutcome, OracleAgent, TrialResult
from aes_lib.sandbox.verifier import result_paths

MUTATED = "== mutated\n"


@dataclasses.dataclass(frozen=True)
class InputProbe:
    """The reference with the image's text inputs mutated ``before`` it runs, or after."""

    task: Task
    before: bool
    kind_paths: tuple[str, ...] = ()

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome:
        roots = result_paths(self.task, sandbox.container.attrs["Config"].get("WorkingDir"), self.kind_paths)[0]
        snap = await sandbox.exec(changes.snap(roots), timeout=120, user=0)
        if snap.exit_code != 0:
            return AgentOutcome(exit_code=snap.exit_code, output=f"cannot snapshot the inputs: {snap.output[-300:]}")
        mutate = None
        if self.before:
            mutate = await sandbox.exec(changes.mutate(), timeout=120, user=0)
        solved = await OracleAgent(self.task).run(sandbox, instruction)
        if not self.before:
            mutate = await sandbox.exec(changes.mutate(), timeout=120, user=0)
        return AgentOutcome(exit_code=mutate.exit_code or solved.exit_code, timed_out=solved.timed_out,
                            output=f"{solved.output[-2000:]}\n{MUTATED}{mutate.output}")


def mutated(result: TrialResult) -> list[str]:
    """The files an input probe's trial mutated."""
    return [line for line in result.agent.output.split(MUTATED, 1)[-1].splitlines() if line.startswith("/")]
