"""The training-time screen: forgery signatures in a trial's own evidence.

The verdict boundary (docs/SECURITY.md) decides the reward; this decides whether an attempt may
teach. An attempt whose trial shows an attack on the judge, whatever it earned, is left out of
its group before advantages are computed (``aes_lib.learner.batcher``) and counted: a forgery
that slipped through would otherwise be reinforced, and a failed one would still teach the
policy to try. Each sign is a channel with no honest use in a result path:

- a reward file in the verifier's logs not written by the root test runner (a program the tests
  ran wrote it or linked it in), or two reward files that disagree (one is not the verdict);
- a link into the tests, the verifier's logs or the pristine inputs (only the judge reads them),
  or through a process's view of the filesystem (``/proc/<pid>/root``, ``cwd``): where the
  crossing resolved it (``TrialResult.links``), never parsed back from the evidence's text;
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
_PROCESS_VIEW = re.compile(r"^/proc/[^/]+/(root|cwd)(/|$)")  # any folder, the tests' included
_REFUSED = re.compile(r"^.*is refused in the tests' process.*$", re.MULTILINE)


def _judges(target: str) -> bool:
    where = posixpath.normpath(target)
    return bool(_PROCESS_VIEW.match(where)) or any(where == p or where.startswith(p + "/") for p in JUDGE_PATHS)


def forgery_signs(result: TrialResult) -> tuple[str, ...]:
    """The signs of an attack on the judge in ``result`` (empty: none), each one line."""
    signs = [f"link to the judge's files: {path}: a link to {leads}" for path, leads in result.links if _judges(leads)]
    signs += [f"setuid file: {entry}" for entry in result.dropped if entry.endswith(": setuid/setgid bits cleared")]
    signs += [f"planted reward file: {entry}" for entry in result.unread]
    if refused := _REFUSED.search(result.verifier.output):
        signs.append(f"agent's bytes refused as code: {refused.group(0).strip()[:200]}")
    return tuple(signs)
