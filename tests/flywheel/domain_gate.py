"""A gate from outside the package, as a third party would write one: a stage name and a judge.

It checks a house rule of some task collection: the instruction must name the file the
tests read (``/app/...``), so a solver is never left guessing where the data lives.
"""

import re

from aes_proto.messages import Verdict

from aes_lib.gate import Gate

_APP_PATH = re.compile(r"/app/[\w./-]+")


class NamesItsDataGate(Gate):
    stage = "names-data"

    async def judge(self, task, candidate, ctx) -> Verdict:
        named = sorted(set(_APP_PATH.findall(task.instruction)))
        if not named:
            return Verdict(stage=self.stage, ok=False, reason="no_data_path",
                           detail="the instruction names no /app/ path for the data")
        return Verdict(stage=self.stage, ok=True, reason="ok", detail=f"names {', '.join(named)}")
