"""Tool calling: the task's state sits behind a typed service, and the solver, a non-root
user, changes it only through calls (``aes-call``). The image ``aes-tool-calling`` holds the
framework (``aestools``), the launcher and the client; see ``image/`` and ``proposer.md``."""

from pathlib import Path

from aes_lib.domains.base import Domain

SERVICE_DIR = "/srv/service"
"""Where a task's image puts its service (``service.py``) and the service keeps its state."""
SERVICE_PATH = f"{SERVICE_DIR}/service.py"

SOLVER_PROMPT = """\
This environment is a service you operate through typed calls; you run as an unprivileged
user, and the service's data is not readable by you: change it only through calls.
- `aes-call list` shows every method with its parameters, their types, defaults and docs.
- `aes-call <method> '<json object>'` calls a method, e.g.
  `aes-call get_item '{"item_id": 7}'`; or with key=value words, each read as its
  parameter's type: `aes-call get_item item_id=7`.
- Arguments are type-checked before sending: an int must be a JSON number, not "7"; a
  list is a JSON array. A refused call prints why and exits non-zero (2: bad arguments,
  never sent; 1: the service refused or failed it; 3: the service does not answer).
- Results are JSON on stdout (pipe them to `jq`). Methods marked [changes state] are not
  undone: read before you write, and touch only what the task asks for."""

DOMAIN = Domain(
    name="tool-calling",
    title="Tool calling",
    root=Path(__file__).parent,
    gate="aes_domains.tool_calling.gate:ToolCallingGate",
    solver_prompt=SOLVER_PROMPT,
    startup=f"aes-tools-up {SERVICE_PATH}",
    results=(SERVICE_DIR,),
)
