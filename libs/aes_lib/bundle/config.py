"""``task.toml``: Harbor 0.26's field names, parsed strictly.

Harbor itself ignores nothing it does not know only by accident of pydantic's
defaults: it accepts unknown sections and fields. An admission gate should not,
so every section and field outside the subset below raises
:class:`UnknownFieldError` (this includes Harbor features this sandbox does not
implement: multi-step tasks, MCP servers, network allow-lists, a separate
verifier image). Wrong types and out-of-range values raise
:class:`InvalidFieldError`; a file that is not TOML raises :class:`TomlSyntaxError`.

One deliberate difference in defaults: Harbor gives a task the public network
unless told otherwise; here ``allow_internet`` defaults to false.
"""

from __future__ import annotations

import tomllib
from typing import Annotated, Any, Literal

import msgspec

from aes_lib.bundle.errors import InvalidFieldError, TomlSyntaxError, UnknownFieldError

PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
PositiveInt = Annotated[int, msgspec.Meta(gt=0)]
EnvVars = dict[Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], str]

_NAME_PATTERN = r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]*/[A-Za-z0-9_\-][A-Za-z0-9_.\-]*$"


class _Section(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    pass


class Author(_Section, frozen=True):
    name: str
    """Author's name."""
    email: str | None = None
    """Author's e-mail address."""


class TaskInfo(_Section, frozen=True):
    """``[task]``: identity of the task as a package."""

    name: Annotated[str, msgspec.Meta(pattern=_NAME_PATTERN)]
    """``org/name``: letters, digits, ``-``, ``_`` and ``.``, neither part starting with a dot."""
    version: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    """Package version, any non-empty string."""
    description: str = ""
    """One-line human description."""
    authors: tuple[Author, ...] = ()
    """Authors as ``{name, email}`` tables."""
    keywords: tuple[str, ...] = ()
    """Search keywords."""


class AgentConfig(_Section, frozen=True):
    """``[agent]``: the solver's (or oracle's) turn."""

    timeout_sec: PositiveFloat | None = None
    """Seconds the agent may work; None: the runner's default."""
    user: str | int | None = None
    """User (name or uid) the agent's commands run as; None: the image's USER."""


class VerifierConfig(_Section, frozen=True):
    """``[verifier]``: how tests/test.sh is run."""

    timeout_sec: PositiveFloat = 600.0
    """Seconds tests/test.sh may run."""
    env: EnvVars = {}
    """Environment variables set for the verifier."""
    environment_mode: Literal["shared"] | None = None
    """Only ``shared`` (the verifier sees the agent's final files; this sandbox runs it in a fresh
    container of the same image, see ``aes_lib.sandbox.verifier``); ``separate`` needs a
    verifier image, which this sandbox does not build."""


class EnvironmentConfig(_Section, frozen=True):
    """``[environment]``: the container the agent works in."""

    build_timeout_sec: PositiveFloat = 600.0
    """Seconds the image build may take."""
    docker_image: str | None = None
    """Prebuilt image name; used only when present locally (there is no registry)."""
    cpus: PositiveFloat | None = None
    """CPU quota; None: the sandbox default. Capped by the sandbox."""
    memory_mb: PositiveInt | None = None
    """Memory limit in MiB; None: the sandbox default. Capped by the sandbox."""
    storage_mb: PositiveInt | None = None
    """Disk the task expects; recorded, not enforced (overlay2 without quotas)."""
    gpus: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """GPUs requested; where the Docker engine has no GPU runtime, validation says ``needs_gpu``."""
    allow_internet: bool = False
    """Whether the container gets a network at all (Harbor's default is true)."""
    env: EnvVars = {}
    """Environment variables of the container."""
    workdir: Annotated[str, msgspec.Meta(pattern=r"^/")] | None = None
    """Absolute working directory for every exec; None: the image's WORKDIR."""


class SolutionConfig(_Section, frozen=True):
    """``[solution]``: the reference solution's run."""

    env: EnvVars = {}
    """Environment variables set for solution/solve.sh."""


class TaskConfig(_Section, frozen=True):
    """The whole of task.toml."""

    schema_version: Annotated[str, msgspec.Meta(pattern=r"^1\.\d+$")] = "1.4"
    """Harbor task schema version (``1.x``)."""
    task: TaskInfo | None = None
    """``[task]``; optional as in Harbor."""
    metadata: dict[str, Any] = {}
    """Free-form: difficulty, category, tags, ..."""
    agent: AgentConfig = AgentConfig()
    """``[agent]``: the agent's time limit and user."""
    verifier: VerifierConfig = VerifierConfig()
    """``[verifier]``: how tests/test.sh runs."""
    environment: EnvironmentConfig = EnvironmentConfig()
    """``[environment]``: image build and container resources."""
    solution: SolutionConfig = SolutionConfig()
    """``[solution]``: the reference solution's environment."""


def parse_task_toml(text: str) -> TaskConfig:
    """Parse and check task.toml's text; raises one BundleError subclass per problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TomlSyntaxError(f"task.toml: {e}") from e
    try:
        return msgspec.convert(data, TaskConfig)
    except msgspec.ValidationError as e:
        # msgspec names the path in the message; an unknown key is its own error type.
        if "unknown field" in str(e):
            raise UnknownFieldError(f"task.toml: {e}") from e
        raise InvalidFieldError(f"task.toml: {e}") from e
