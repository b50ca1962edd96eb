"""Settings shared by every service, and the one typed reader every settings class uses.

A settings class is a frozen dataclass with ``env_prefix`` and ``section``. ``read_settings``
takes its fields from four layers, each overriding the one before: the model profile in force
(``aes_lib.profiles``, chosen by ``[core] model_profile``), the run's config file
(``aes.toml``, or the file ``AES_CONFIG`` names; its ``[section]``), the environment
(``<env_prefix><FIELD>``), then ``--set section.key=value`` overrides (``AES_SET``, which
``aes --set`` fills so that the services it starts see them too). Values are converted to
the annotated types by msgspec; ``aes_lib.runconfig`` lists the classes and shows the result.

Why not pydantic-settings: its sources merge before validating, so naming the layer of a bad
value and each value's source (``aes config show``) would need a custom source per layer,
each validated alone, which is what this reader does (~170 lines with docstrings); and the
classes would stop being dataclasses, which ``dataclasses.replace`` calls across the code and
tests rely on.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import os
import tomllib
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any, ClassVar, Literal, NamedTuple, get_args, get_origin, get_type_hints

import msgspec

from aes_lib.profiles import PROFILES, ProfileName


STACK_FILE = "stack.json"
"""Under ``home``: the embedded stack's processes and connection settings (mode 0600)."""
CONFIG_FILE = "aes.toml"
"""The config file read from the working directory when ``AES_CONFIG`` names none."""
CONFIG_VAR = "AES_CONFIG"
"""Path of the run's config file (``aes --config PATH`` sets it)."""
SET_VAR = "AES_SET"
"""JSON list of ``section.key=value`` overrides (``aes --set`` sets it)."""


def _home() -> Path:
    return Path(os.environ.get("AES_HOME", Path.cwd() / ".aes")).resolve()


def stack_settings(home: Path) -> dict[str, object]:
    """The settings a running embedded stack recorded in ``<home>/stack.json`` (``{}`` without one)."""
    try:
        data = json.loads((home / STACK_FILE).read_text())
        return parse_fields(Settings, {k: str(v) for k, v in data.get("settings", {}).items()})
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError) as e:
        raise StackFileError(f"cannot read {home / STACK_FILE}: {e}; run `aes down` then `aes up`") from e


class StackFileError(ValueError):
    """``<home>/stack.json`` exists but cannot be read."""


class SettingsError(ValueError):
    """A setting whose value is not of its type, or a config key no settings class has."""


DOC_DEFAULT = "doc_default"
"""Field metadata key: the default as the settings table shows it, where the real one is
computed (``home``) or a fallback is taken elsewhere (``model_api_key``)."""

_BOOLS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}

# Annotated type -> what an error says was expected of text (a variable, a --set) and of a typed
# value (TOML, a profile); a type not listed has no reader.
_EXPECTED: dict[object, tuple[str, str]] = {
    str: ("a string", "a string"),
    int: ("an integer", "an integer"),
    float: ("a number", "a number"),
    bool: ("one of 1, 0, true, false, yes, no", "true or false"),
    Path: ("a path", "a path"),
    tuple[str, ...]: ("comma-separated names", "an array of strings"),
}


class Sourced(NamedTuple):
    """A value set by a layer, and which: the config file's path, ``AES_<FIELD>`` or ``--set``."""

    value: object
    source: str


def _from_text(kind: object, raw: str) -> object:
    # Text in the shape msgspec's lax conversion takes (it reads numbers and literals itself).
    if kind is bool:
        return _BOOLS.get(raw.strip().lower(), raw)
    if kind == tuple[str, ...]:
        return [p.strip() for p in raw.split(",") if p.strip()]
    return raw


def _dec_path(kind: type, obj: Any) -> Any:
    if kind is Path and isinstance(obj, str):
        return Path(obj)
    raise NotImplementedError


def convert(kind: object, raw: object, typed: bool = False) -> object:
    """``raw`` as the annotated type ``kind``; ValueError saying what was expected. Text (a
    variable, a ``--set``) is parsed; a ``typed`` value (from TOML) must be of the type already
    (a number, not a quoted number; an array of names, not a comma-separated string)."""
    literal = get_origin(kind) is Literal
    if not literal and kind not in _EXPECTED:
        raise TypeError(f"no reader for settings of type {kind!r}")
    text = isinstance(raw, str) and not typed
    try:
        return msgspec.convert(_from_text(kind, raw) if text else raw, kind, strict=typed, dec_hook=_dec_path)
    except msgspec.ValidationError:
        expected = f"one of {', '.join(map(str, get_args(kind)))}" if literal else _EXPECTED[kind][typed]
        raise ValueError(f"expected {expected}") from None


def parse_fields(cls: type, raw: dict[str, str]) -> dict[str, object]:
    """``raw`` field values, written as text (``stack.json`` keeps them so), converted to
    the annotated types of the settings dataclass ``cls``; ValueError for one that does not convert."""
    hints = get_type_hints(cls)
    return {name: convert(hints[name], value) for name, value in raw.items()}


def config_path() -> Path | None:
    """The run's config file: ``AES_CONFIG``'s (which must exist), else ``./aes.toml`` if any."""
    named = os.environ.get(CONFIG_VAR)
    if named:
        path = Path(named)
        if not path.is_file():
            raise SettingsError(f"{CONFIG_VAR}: no config file at {path}")
        return path
    local = Path.cwd() / CONFIG_FILE
    return local if local.is_file() else None


def layers_in_use() -> bool:
    """Whether a config file or a ``--set`` applies (else only variables do)."""
    return bool(os.environ.get(CONFIG_VAR) or os.environ.get(SET_VAR) or (Path.cwd() / CONFIG_FILE).is_file())


def config_file(path: Path) -> dict[str, Any]:
    """The TOML document at ``path`` (parsed again only when the file changes)."""
    st = path.stat()
    return _parsed(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _parsed(path: Path, _mtime_ns: int, _size: int) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SettingsError(f"{path}: not valid TOML: {e}") from None


def set_overrides() -> dict[str, dict[str, str]]:
    """``AES_SET``'s ``section.key=value`` overrides as section -> key -> text."""
    raw = os.environ.get(SET_VAR, "")
    try:
        items = json.loads(raw) if raw else []
    except ValueError:
        items = None
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise SettingsError(f"{SET_VAR}: expected a JSON list of section.key=value, got {raw!r}")
    out: dict[str, dict[str, str]] = {}
    for item in items:
        name, sep, value = item.partition("=")
        section, dot, key = name.strip().partition(".")
        if not sep or not dot or not section or not key:
            raise SettingsError(f"--set {item!r}: expected section.key=value")
        out.setdefault(section, {})[key] = value
    return out


_Setting = tuple[str, object, str, str, bool]
"""(key, value, how an error names it, its source, whether the value is typed) as a layer sets it."""


def _layers(section: str, env_prefix: str, names: list[str], error: type[Exception]) -> Iterator[_Setting]:
    """What the layers above the profile set in ``section``, lowest first: the config file, the
    environment (``<env_prefix><NAME>`` of each of ``names``), then ``--set``."""
    path = config_path()
    if path is not None:
        table = config_file(path).get(section, {})
        if not isinstance(table, dict):
            raise error(f"{path}: {section}: expected a [{section}] table, got {table!r}")
        yield from ((key, raw, f"{path}: {section}.{key}", str(path), True) for key, raw in table.items())
    for key in names:
        if (var := f"{env_prefix}{key.upper()}") in os.environ:
            yield key, os.environ[var], var, var, False
    yield from ((key, raw, f"--set {section}.{key}", "--set", False)
                for key, raw in set_overrides().get(section, {}).items())


def profile_name() -> str:
    """``[core] model_profile`` as the layers above a profile set it (the profile is the layer
    beneath them, so it is read from them alone)."""
    name, where = "small", "the default"
    for key, raw, named, _, _ in _layers("core", "AES_", ["model_profile"], SettingsError):
        if key == "model_profile":
            name, where = raw, named
    if name not in PROFILES:
        raise SettingsError(f"{where}: expected one of {', '.join(PROFILES)}, got {name!r}")
    return name  # type: ignore[return-value]


def sourced(cls: type, error: type[Exception] = SettingsError) -> dict[str, Sourced]:
    """The fields of the settings dataclass ``cls`` that a layer sets (profile < file <
    environment < ``--set``), converted to their annotated types, each with its source.

    A value that does not convert, or a key ``cls`` has no field for, raises ``error`` (each
    class keeps the error its callers catch) in one line naming the key and where it was set.
    """
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    section: str = cls.section  # type: ignore[attr-defined]
    profile = profile_name()
    below = ((key, raw, f"profile {profile}: {section}.{key}", f"profile {profile}", True)
             for key, raw in PROFILES[profile].get(section, {}).items())
    values: dict[str, Sourced] = {}
    for key, raw, named, source, typed in chain(below, _layers(section, cls.env_prefix, names, error)):  # type: ignore[attr-defined]
        if key not in names:
            near = difflib.get_close_matches(key, names, 1)
            raise error(f"{named}: unknown key" + (f" (did you mean {near[0]}?)" if near else ""))
        try:
            values[key] = Sourced(convert(hints[key], raw, typed), source)
        except ValueError as e:
            raise error(f"{named}: {e}, got {raw!r}") from None
    return values


def read_settings(cls: type, error: type[Exception] = SettingsError) -> dict[str, object]:
    """The values ``sourced`` finds for ``cls``, without their sources."""
    return {name: s.value for name, s in sourced(cls, error).items()}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Where the shared infrastructure is and how to reach it.

    Every field can be set in the config file's ``[core]`` section or with the environment
    variable ``AES_<FIELD>`` (upper case).
    """

    env_prefix: ClassVar[str] = "AES_"
    section: ClassVar[str] = "core"
    home: Path = dataclasses.field(default_factory=_home, metadata={DOC_DEFAULT: "./.aes"})
    """Embedded stack's state: NATS data, blobs, logs, credentials."""
    nats_url: str = "nats://127.0.0.1:4222"
    """NATS server with JetStream; a cluster's servers comma-separated (clients fail over)."""
    nats_user: str = ""
    """NATS user; empty for a server without auth."""
    nats_password: str = ""
    """NATS password."""
    stream_replicas: int = 1
    """Copies of every JetStream stream and KV bucket (``num_replicas``): 1 for one server; 3 on a
    three-server cluster (``aes up --nats-cluster 3``) survives the loss of any one server."""
    blob_url: str = ""
    """``file:///path`` or ``s3://bucket?endpoint=host:port&secure=0``; empty: ``file://<home>/blobs``."""
    s3_access_key: str = ""
    """Credentials for an ``s3://`` blob store."""
    s3_secret_key: str = ""
    """Credentials for an ``s3://`` blob store."""
    model_url: str = ""
    """OpenAI-compatible endpoint (``.../v1``); empty: the embedded local model."""
    model: str = "smollm2-135m"
    """Model name sent to the endpoint (solver)."""
    model_profile: ProfileName = "small"
    """The limits the harness applies to the models, set together (``aes_lib.profiles``):
    ``small`` (the embedded model: short turns, a few exchanges of history, 8192 tokens of
    context) or ``capable`` (a hosted or large model: long turns, the whole history until a
    128k context is full). Any of its values can still be set on its own."""
    engine: str = "torch"
    """What serves the policy: ``vllm`` (``aes_lib.models.vllm_serve``: vLLM in its own venv,
    ``make vllm``; follows the learner's weights, the fastest), ``torch``
    (``aes_lib.models.torch_serve``: follows the learner's weights, needs no extra install) or
    ``gguf`` (the bundled xllamacpp server: fast, but it cannot take new weights, so nothing trains)."""
    vllm_python: str = ""
    """Interpreter that runs vLLM; empty: the checkout's ``.venv-vllm``, else this one if it has vLLM."""
    vllm_dtype: str = "float32"
    """Weights' dtype in vLLM: ``float32`` matches the trainer's log-probs to ~4e-5 nats on a CPU;
    ``bfloat16`` is faster and differs by ~0.04 nats on average, up to ~0.4
    (``bench/results/vllm_logprobs.md``)."""
    vllm_max_model_len: int = 0
    """Context (prompt + completion tokens) vLLM serves; 0: the model's own (its config's
    ``max_position_embeddings``: 8192 for SmolLM2, whose review prompts pass 2048 tokens)."""
    vllm_kvcache_gb: int = 1
    """GiB of key/value cache vLLM's CPU backend reserves (``VLLM_CPU_KVCACHE_SPACE``)."""
    vllm_args: str = ""
    """More arguments for the vLLM server the stack starts (e.g. ``--tensor-parallel-size 2``)."""
    vllm_checkpoint_dir: str = ""
    """Folder where weight sync unpacks each version for vLLM to read (it loads from a path, so an
    engine on another machine needs this on a shared mount); empty: ``<home>/vllm/checkpoints``."""
    weight_transport: str = "store"
    """How each new policy version reaches the engines (``aes_lib.weights``): ``store`` (the blob
    store, then weight sync fetches it: engines anywhere), ``filesystem`` (the trainer writes one
    folder under ``weights_dir`` that the engines read in place: one machine or a shared mount)
    or ``nccl`` (the trainer broadcasts to vLLM's GPU workers; the store keeps the record)."""
    weights_dir: str = ""
    """Where the filesystem transport writes each version (shared by trainer and engines);
    empty: ``<home>/weights``."""
    nccl_master: str = ""
    """``host:port`` where the nccl transport's group meets (the trainer's rank 0 listens)."""
    nccl_world_size: int = 2
    """The nccl transport's group: the trainer's rank 0 plus every vLLM worker."""
    policy_mode: str = "shared"
    """``shared``: one model plays both roles and one learner trains it on both roles' samples
    (the paper's headline setting); ``separate``: a solver model and a proposer model, each
    with its own learner and engine."""
    proposer_model_url: str = ""
    """Endpoint for the proposer; empty: same as the solver's."""
    proposer_model: str = ""
    """Model name for the proposer; empty: same as the solver's."""
    model_prices: str = ""
    """Prices over LiteLLM's cost map (hosted models' list prices, read offline): JSON, or a JSON
    file's path, of ``{"model": [usd_in_per_1M, usd_out_per_1M]}``; a model without a price costs
    "unknown", never zero."""
    model_api_key: str = dataclasses.field(default="", metadata={DOC_DEFAULT: "$OPENAI_API_KEY"})
    """Bearer token for the solver's endpoint; empty: ``$OPENAI_API_KEY`` when set, else none."""
    proposer_model_api_key: str = ""
    """Bearer token for the proposer's endpoint; empty: the solver's."""
    vllm_token_ids: str = "auto"
    """Ask for token ids the vLLM way (``return_token_ids``, ``return_tokens_as_token_ids``), which the learner needs:
    ``auto`` (when the server says it is vLLM), ``on`` or ``off``."""
    model_timeout_s: float = 300.0
    """Seconds one model call may take; past it the call is abandoned and retried from the start
    (the tokens generated so far are lost). A completion is returned whole, so this bounds a
    whole generation: a small model on a busy CPU can need minutes for one long reply."""
    otlp_endpoint: str = ""
    """OTLP/HTTP traces endpoint (e.g. Jaeger's ``http://jaeger:4318``); empty: no export."""
    reset_paths: tuple[str, ...] = ()
    """Absolute paths (comma-separated) the reset gate compares between two builds, besides
    those the task's instruction, tests and solution name."""
    contamination_required: bool = True
    """Whether the contamination gate needs a held-out index (``aes contamination index SRC``):
    without one it rejects every candidate (``no_heldout_index``). ``0`` lets candidates pass
    unchecked instead; ``aes health`` and ``aes status`` warn while no index is registered.
    ``aes up`` registers the bundled Terminal-Bench index, so the embedded stack has one."""
    route: str = "validate,strength,contamination,novelty,review,reset,calibrate"
    """Admission stages in order (comma-separated); a domain gate is one more name. Checked
    at startup: every stage needs a consumer and the last must decide (``calibrate``)."""
    io_deadline: float = 120.0
    """Seconds one blob read or write may take before it counts as hung and is retried."""
    bundle_cache_mb: int = 1024
    """Megabytes of unpacked bundles a host keeps under ``<home>/cache/bundles`` (the admission stages
    and solver runners read a candidate's files there instead of fetching it again); least recently used go first."""
    base_image_fallback: str = "aes-base:latest"
    """Image a task's ``FROM`` is built on when its own is neither local nor pullable (no
    registry), noted in the build log; empty: no substitution, such a build fails."""
    imported_network: Literal["off", "harbor"] = "off"
    """Network of an imported human-written task (``aes pool seed --from``, ``aes validate
    --imported``) whose task.toml leaves it unset: ``off`` (this sandbox's default: none) or
    ``harbor`` (Harbor's default: the network, written into the seeded copy's task.toml; given
    only under ``AES_SANDBOX_NETWORK=imported``). Generated tasks never get it this way."""
    sandbox_network: Literal["none", "imported"] = "none"
    """Which sandboxes and image builds may have a network at all: ``none`` (none, whatever a
    task.toml says) or ``imported`` (tasks the operator imported, run with
    ``LimitCaps(allow_network=True)``, that ask for it get ``AES_SANDBOX_EGRESS_NETWORK``: egress
    only, never the host, other containers or private addresses). A generated task never gets one."""
    sandbox_runtime: str = ""
    """OCI runtime of every sandbox (Docker's ``--runtime``): empty, the engine's default (runc);
    ``runsc`` runs them under gVisor, a user-space kernel between the agent and the host's
    (``deploy/install_runsc.sh`` installs and registers it, networking off). A runtime the engine
    does not have refuses every sandbox, naming it."""
    sandbox_egress_network: str = "aes-egress"
    """Docker network (created on first use, with firewall rules scoped to its bridge) that
    networked sandboxes join under ``AES_SANDBOX_NETWORK=imported``."""
    sandbox_egress_allow: tuple[str, ...] = ()
    """Addresses or CIDRs (comma-separated) in the blocked private ranges the egress network may
    still reach, e.g. a package mirror's; the host's own addresses stay unreachable."""
    log_level: str = "info"
    """Level of every service's and the CLI's log lines: ``debug``, ``info``, ``warning`` or ``error``."""
    log_format: str = "text"
    """``text`` (one readable line per record) or ``json`` (one JSON object per line, with the
    episode's trace id) for log collectors."""
    budgets: str = ""
    """Per-service delivery budgets overriding the built-in ones, e.g. ``validator=900,review=300``:
    a delivery running longer is cancelled and redelivered."""

    @classmethod
    def from_env(cls, **overrides: object) -> "Settings":
        """Overrides, then ``--set``, ``AES_*`` variables and the config file (``read_settings``),
        then a running embedded stack's ``<home>/stack.json`` (written by ``aes up``), then the defaults."""
        values = {**read_settings(cls), **overrides}
        home = Path(values["home"]) if "home" in values else _home()  # type: ignore[arg-type]
        for name, value in stack_settings(home).items():
            values.setdefault(name, value)
        return cls(**values)  # type: ignore[arg-type]

    def endpoint(self, role: str = "solver") -> tuple[str, str, str]:
        """(url, model, api key) of the ``solver``'s or the ``proposer``'s model endpoint."""
        key = self.model_api_key or os.environ.get("OPENAI_API_KEY", "")
        if role == "solver":
            return self.model_url, self.model, key
        if role == "proposer":
            return (self.proposer_model_url or self.model_url, self.proposer_model or self.model,
                    self.proposer_model_api_key or key)
        raise ValueError(f"role must be solver or proposer, got {role!r}")

    def budget(self, service: str, default: float) -> float:
        """Delivery budget of ``service``: its entry in ``budgets``, else ``default``."""
        for item in filter(None, (x.strip() for x in self.budgets.split(","))):
            name, sep, value = item.partition("=")
            try:
                seconds = float(value)
            except ValueError:
                seconds = 0.0
            if not sep or seconds <= 0:
                raise ValueError(f"AES_BUDGETS: expected name=seconds (seconds > 0), got {item!r}")
            if name.strip() == service:
                return seconds
        return default

    @property
    def blob_location(self) -> str:
        return self.blob_url or f"file://{self.home / 'blobs'}"

    @property
    def route_stages(self) -> tuple[str, ...]:
        return tuple(s.strip() for s in self.route.split(",") if s.strip())
