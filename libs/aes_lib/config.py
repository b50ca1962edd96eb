"""Settings shared by every service, read from ``AES_*`` environment variables by ``read_env``,
the one typed reader every settings class uses (``aes_lib.settings_table`` lists them)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, Literal, get_args, get_origin, get_type_hints


STACK_FILE = "stack.json"
"""Under ``home``: the embedded stack's processes and connection settings (mode 0600)."""


def _home() -> Path:
    return Path(os.environ.get("AES_HOME", Path.cwd() / ".aes")).resolve()


def _stack_settings(home: Path) -> dict[str, object]:
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
    """An ``AES_*`` variable whose value is not of its setting's type."""


DOC_DEFAULT = "doc_default"
"""Field metadata key: the default as the settings table shows it, where the real one is
computed (``home``) or a fallback is taken elsewhere (``model_api_key``)."""

_BOOLS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def _names(raw: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in raw.split(",") if p.strip())


# Annotated type -> (conversion, what an error says was expected).
_CONVERTERS: dict[object, tuple[Callable[[str], object], str]] = {
    str: (str, "a string"),
    int: (int, "an integer"),
    float: (float, "a number"),
    bool: (lambda raw: _BOOLS[raw.strip().lower()], "one of 1, 0, true, false, yes, no"),
    Path: (Path, "a path"),
    tuple[str, ...]: (_names, "comma-separated names"),
}


def _convert(kind: object, raw: str) -> object:
    """``raw`` as the annotated type ``kind``; ValueError saying what was expected."""
    if get_origin(kind) is Literal:
        if raw not in get_args(kind):
            raise ValueError(f"expected one of {', '.join(map(str, get_args(kind)))}")
        return raw
    if kind not in _CONVERTERS:
        raise TypeError(f"no reader for settings of type {kind!r}")
    parse, expected = _CONVERTERS[kind]
    try:
        return parse(raw)
    except (ValueError, KeyError):
        raise ValueError(f"expected {expected}") from None


def parse_fields(cls: type, raw: dict[str, str]) -> dict[str, object]:
    """``raw`` field values, written as text (``stack.json`` keeps them so), converted to
    the annotated types of the settings dataclass ``cls``; ValueError for one that does not convert."""
    hints = get_type_hints(cls)
    return {name: _convert(hints[name], value) for name, value in raw.items()}


def read_env(cls: type, error: type[Exception] = SettingsError) -> dict[str, object]:
    """The fields of the settings dataclass ``cls`` that are set in the environment as
    ``<cls.env_prefix><FIELD>``, each converted to its annotated type.

    A value that does not convert raises ``error`` (each class keeps the error its
    callers catch) naming the variable, the expected type and the value.
    """
    hints = get_type_hints(cls)
    values: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        var = f"{cls.env_prefix}{f.name.upper()}"
        raw = os.environ.get(var)
        if raw is None:
            continue
        try:
            values[f.name] = _convert(hints[f.name], raw)
        except ValueError as e:
            raise error(f"{var}: {e}, got {raw!r}") from None
    return values


@dataclasses.dataclass(frozen=True)
class Settings:
    """Where the shared infrastructure is and how to reach it.

    Every field can be set with the environment variable ``AES_<FIELD>`` (upper case).
    """

    env_prefix: ClassVar[str] = "AES_"
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
    engine: str = "torch"
    """What serves the policy: ``vllm`` (``aes_lib.models.vllm_serve``: vLLM in its own venv,
    ``make vllm``; follows the learner's weights, the fastest), ``torch``
    (``aes_lib.models.torch_serve``: follows the learner's weights, needs no extra install) or
    ``gguf`` (the bundled xllamacpp server: fast, but it cannot take new weights, so nothing trains)."""
    vllm_python: str = ""
    """Interpreter that runs vLLM; empty: the checkout's ``.venv-vllm``, else this one if it has vLLM."""
    vllm_dtype: str = "float32"
    """Weights' dtype in vLLM: ``float32`` matches the trainer's log-probs to ~1e-5 on a CPU;
    ``bfloat16`` is faster and differs by ~0.1 nats."""
    vllm_max_model_len: int = 2048
    """Context (prompt + completion tokens) vLLM serves."""
    vllm_kvcache_gb: int = 1
    """GiB of key/value cache vLLM's CPU backend reserves (``VLLM_CPU_KVCACHE_SPACE``)."""
    vllm_args: str = ""
    """More arguments for the vLLM server the stack starts (e.g. ``--tensor-parallel-size 2``)."""
    vllm_checkpoint_dir: str = ""
    """Folder where weight sync unpacks each version for vLLM to read (it loads from a path, so an
    engine on another machine needs this on a shared mount); empty: ``<home>/vllm/checkpoints``."""
    policy_mode: str = "shared"
    """``shared``: one model plays both roles and one learner trains it on both roles' samples
    (the paper's headline setting); ``separate``: a solver model and a proposer model, each
    with its own learner and engine."""
    proposer_model_url: str = ""
    """Endpoint for the proposer; empty: same as the solver's."""
    proposer_model: str = ""
    """Model name for the proposer; empty: same as the solver's."""
    model_prices: str = ""
    """Prices of models beyond the built-in table: JSON, or a JSON file's path, of
    ``{"model": [usd_in_per_1M, usd_out_per_1M]}``; a model without a price costs
    "unknown", never zero."""
    model_api_key: str = dataclasses.field(default="", metadata={DOC_DEFAULT: "$OPENAI_API_KEY"})
    """Bearer token for the solver's endpoint; empty: ``$OPENAI_API_KEY`` when set, else none."""
    proposer_model_api_key: str = ""
    """Bearer token for the proposer's endpoint; empty: the solver's."""
    vllm_token_ids: str = "auto"
    """Ask for token ids the vLLM way (``return_token_ids``, ``return_tokens_as_token_ids``), which the learner needs:
    ``auto`` (when the server says it is vLLM), ``on`` or ``off``."""
    otlp_endpoint: str = ""
    """OTLP/HTTP traces endpoint (e.g. Jaeger's ``http://jaeger:4318``); empty: no export."""
    reset_paths: tuple[str, ...] = ()
    """Absolute paths (comma-separated) the reset gate compares between two builds, besides
    those the task's instruction, tests and solution name."""
    contamination_required: bool = True
    """Whether the contamination gate needs a held-out index (``aes contamination index SRC``):
    without one it rejects every candidate (``no_heldout_index``). ``0`` lets candidates pass
    unchecked instead, as the embedded stack (``aes up``, ``aes run``) does unless this is set;
    ``aes health`` and ``aes status`` warn while no index is registered."""
    route: str = "validate,contamination,review,reset,calibrate"
    """Admission stages in order (comma-separated); a domain gate is one more name. Checked
    at startup: every stage needs a consumer and the last must decide (``calibrate``)."""
    io_deadline: float = 120.0
    """Seconds one blob read or write may take before it counts as hung and is retried."""
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
        """Overrides, then ``AES_*`` variables, then a running embedded stack's
        ``<home>/stack.json`` (written by ``aes up``), then the defaults."""
        values = {**read_env(cls), **overrides}
        home = Path(values["home"]) if "home" in values else _home()  # type: ignore[arg-type]
        for name, value in _stack_settings(home).items():
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
