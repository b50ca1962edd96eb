"""How ``aes`` fails: one line on stderr that says what to do, and a documented exit status.

Commands raise; only ``main`` catches, and ``report`` turns the exception into the line
and the status (docs/COMMANDS.md has the table). An exception no rule knows is
a bug: a one-line summary, a pointer to ``-v``, and ``Exit.BUG``.
"""

from __future__ import annotations

import enum
import functools
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass


class Exit(enum.IntEnum):
    OK = 0
    NEGATIVE = 1
    """The command ran and its result is negative (a task failed validation, contamination found)."""
    USAGE = 2
    """Bad arguments or input: a path, a task or bundle, an ``AES_*`` setting (argparse's own status)."""
    NO_STACK = 3
    """No stack answers: NATS unreachable or refusing the credentials, or ``aes up`` could not start a part."""
    NO_DOCKER = 4
    """No Docker engine answers."""
    ENDPOINT_UNREACHABLE = 5
    """The model endpoint cannot be reached (connection refused, DNS, timeout)."""
    KEY_REJECTED = 6
    """The model endpoint refused the API key (HTTP 401/403)."""
    BUG = 70
    """An unexpected exception (sysexits' EX_SOFTWARE)."""
    INTERRUPTED = 130
    """Ctrl-C (128 + SIGINT)."""
    PIPE_CLOSED = 141
    """The reader of stdout went away (``aes status | head``): 128 + SIGPIPE, silently, as a shell tool."""


class CommandError(Exception):
    """An expected failure a command reports itself: its message is the line, ``code`` the status."""

    def __init__(self, message: str, code: Exit = Exit.USAGE) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Rule:
    matches: Callable[[BaseException], bool]
    code: Exit
    line: str = "{e}"
    """The line after ``aes COMMAND:``; ``{e}`` is the exception's first line, ``{kind}`` its type name."""


def _settings_error(e: BaseException) -> bool:
    # By convention an error about a setting names its variable first (``AES_X: expected
    # ...``, ``AES_MODEL_URL is empty``); the typed ones are each package's ``*ConfigError``
    # / ``*SettingsError`` ValueErrors.
    return str(e).startswith("AES_") or (
        isinstance(e, ValueError) and type(e).__name__.endswith(("ConfigError", "SettingsError")))


@functools.cache
def _rules() -> tuple[Rule, ...]:
    # Imported here, on the error path only: a command that succeeds pays nothing for them.
    from docker.errors import DockerException

    from aes_lib.bundle import BundleError
    from aes_lib.bus import BusAuthError, BusUnavailableError, DeadLetterError
    from aes_lib.config import StackFileError
    from aes_lib.contamination import HeldoutFormatError, IndexFormatError
    from aes_lib.models import ModelAuthError, ModelUnavailableError
    from aes_ops.policies import UnpublishedVersionError
    from aes_ops.service import ServiceUsageError
    from aes_ops.stack import StackError

    def kind(*types: type[BaseException]) -> Callable[[BaseException], bool]:
        return lambda e: isinstance(e, types)

    return (
        Rule(kind(BusUnavailableError), Exit.NO_STACK,
             "{e}; start the stack with `aes up`, or point AES_NATS_URL at a running NATS"),
        Rule(kind(BusAuthError), Exit.NO_STACK,
             "{e}; check AES_NATS_USER and AES_NATS_PASSWORD, or run `aes down` then `aes up`"),
        Rule(kind(StackError), Exit.NO_STACK, "the stack did not start: {e}"),
        # The base class exactly: what docker.from_env raises when no engine answers (its
        # subclasses are an engine's answers: a failed build, a missing image...).
        Rule(lambda e: type(e) is DockerException, Exit.NO_DOCKER,
             "no Docker engine: {e}; start one (`make infra`) or point DOCKER_HOST at it"),
        Rule(kind(ModelUnavailableError), Exit.ENDPOINT_UNREACHABLE,
             "{e}; check AES_MODEL_URL / AES_PROPOSER_MODEL_URL (or --model-url), or unset it for the local model"),
        Rule(kind(ModelAuthError), Exit.KEY_REJECTED,
             "{e}; set AES_MODEL_API_KEY / AES_PROPOSER_MODEL_API_KEY (or OPENAI_API_KEY) to a key it accepts"),
        Rule(kind(BundleError), Exit.USAGE, "invalid task: {kind}: {e}"),
        Rule(kind(StackFileError, HeldoutFormatError, IndexFormatError, DeadLetterError, UnpublishedVersionError,
                  ServiceUsageError), Exit.USAGE),
        Rule(_settings_error, Exit.USAGE),
        Rule(kind(FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError), Exit.USAGE),
    )


def _first_line(e: BaseException) -> str:
    lines = [line for line in str(e).splitlines() if line.strip()]
    return lines[0].strip() if lines else type(e).__name__


def explain(e: BaseException) -> tuple[Exit, str]:
    """The exit status and the line (without the ``aes COMMAND:`` prefix) for ``e``."""
    if isinstance(e, CommandError):
        return e.code, _first_line(e)
    for rule in _rules():
        if rule.matches(e):
            return rule.code, rule.line.format(e=_first_line(e), kind=type(e).__name__)
    return Exit.BUG, f"internal error: {type(e).__name__}: {_first_line(e)} (run with -v for the traceback)"


def report(e: BaseException, command: str, verbose: bool) -> Exit:
    """Print ``e`` as one line on stderr (its traceback with ``verbose``); its exit status."""
    code, line = explain(e)
    if verbose:
        traceback.print_exception(e)
    else:
        print(f"{command}: {line}", file=sys.stderr, flush=True)
    return code
