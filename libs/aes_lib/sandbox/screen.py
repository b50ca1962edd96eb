"""The training-time screen: forgery signatures in a trial's own evidence.

The verdict boundary (docs/SECURITY.md) decides the reward; this decides whether an attempt may
teach. An attempt whose trial shows an attack on the judge, whatever it earned, is left out of
its group before advantages are computed (``aes_lib.learner.batcher``) and counted: a forgery
that slipped through would otherwise be reinforced, and a failed one would still teach the
policy to try. Each sign is a channel with no honest use in a result path:

- a reward file in the verifier's logs not written by the root test runner (a program the tests
  ran wrote it);
- a link into the tests, the verifier's logs or the pristine inputs (only the judge reads them);
- a file with setuid or setgid bits (the judge's identity, borrowed);
- the tests' process refusing to run the agent's bytes as code (a pickle, a module or a string
  the audit hook stopped: an admitted task's tests never do that for the reference).
"""

from __future__ import annotations

import posixpath
import re

from aes_lib.sandbox.trial import TrialResult
from aes_lib.sandbox.verifier import PRISTINE

JUDGE_PATHS = ("/tests", "/logs/verifier", PRISTINE)
_LINK = re.compile(r"^(.+?): a link to (.+) that leaves the result paths$")
_REFUSED = re.compile(r"^.*is refused in the tests' process.*$", re.MULTILINE)


def _judges(target: str) -> bool:
    where = posixpath.normpath(target)
    return any(where == p or where.startswith(p + "/") for p in JUDGE_PATHS)


def forgery_signs(result: TrialResult) -> tuple[str, ...]:
    """The signs of an attack on the judge in ``result`` (empty: none), each one line."""
    signs: list[str] = []
    for entry in result.dropped:
        if "not the root test runner, not read" in entry or entry.endswith("not a regular file, not read"):
            signs.append(f"planted reward file: {entry}")
        elif entry.endswith("setuid/setgid bits cleared"):
            signs.append(f"setuid file: {entry}")
        elif (link := _LINK.match(entry)) and _judges(posixpath.join(posixpath.dirname(link[1]), link[2])):
            signs.append(f"link to the judge's files: {entry}")
    if refused := _REFUSED.search(result.verifier.output):
        signs.append(f"agent's bytes refused as code: {refused.group(0).strip()[:200]}")
    return tuple(signs)
