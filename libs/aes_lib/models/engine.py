"""A sampling engine over a transformers causal LM that can take new weights.

This is what serves the policy wherever it is trained without vLLM (the embedded
stack, CPU machines): the same weights the learner updates, loaded in place from
its safetensors checkpoints. Each completion token's recorded log-prob is that of
the distribution it was actually drawn from, ``log_softmax(logits / T)``, which
is what the trainer recomputes with the same temperature (DPPO's anchor ``mu``).
Temperature 0 decodes greedily and records the untempered log-probs.

Requests are decoded together (continuous batching): a request that arrives while
others decode is prefilled and joins the running batch at the next step (their
key/value caches left-padded to one length, the padding masked out), and a
finished one leaves it, so concurrent solver attempts share each forward pass.
``policy_version`` is the version of the weights that produced a completion; a
weight load stops admissions, waits for the running batch to drain, and swaps.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import torch

MAX_BATCH = 8
"""Requests decoded together at most."""


class EngineError(ValueError):
    """A request the engine cannot serve (empty prompt, prompt longer than the context...)."""


@dataclasses.dataclass(frozen=True)
class GenRequest:
    prompt_ids: tuple[int, ...]
    max_tokens: int = 256
    temperature: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None


@dataclasses.dataclass(frozen=True)
class GenResult:
    token_ids: list[int]
    logprobs: list[float]
    """Log-prob of each token under the distribution it was sampled from."""
    text: str
    finish_reason: str
    """``stop`` (end-of-sequence token or stop string) or ``length``."""
    policy_version: int


def chat_prompt_ids(tokenizer, messages: list[dict[str, str]]) -> list[int]:
    """The chat template applied with the assistant's turn opened, as token ids."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # BatchEncoding in newer transformers
        ids = ids["input_ids"]
    return [int(i) for i in ids]


class TorchEngine:
    """``submit(GenRequest) -> Future[GenResult]``; ``load_state_dict`` swaps weights between batches.

    ``model`` is any transformers causal LM; without a ``tokenizer`` the engine serves
    token ids only (no chat template, text or stop strings), as the learner's tests need.
    """

    def __init__(self, model: torch.nn.Module, tokenizer=None, *, max_batch: int = MAX_BATCH, version: int = 0,
                 name: str = "") -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.device = next(model.parameters()).device
        self.max_batch = max_batch
        self.version = version
        self.context = int(getattr(self.model.config, "max_position_embeddings", 8192))
        eos = self.model.generation_config.eos_token_id if self.model.generation_config else None
        eos = eos if isinstance(eos, list) else [eos]
        tok_eos = tokenizer.eos_token_id if tokenizer is not None else None
        self.eos_ids = {int(e) for e in (*eos, tok_eos, self.model.config.eos_token_id) if e is not None}
        pad = tokenizer.pad_token_id if tokenizer is not None else None
        self.pad_id = int(pad if pad is not None else min(self.eos_ids, default=0))
        self._queue: queue.Queue[tuple[GenRequest, Future]] = queue.Queue()
        self._weights = threading.Lock()
        """Held by the decode loop while a batch runs: a completion never mixes two versions."""
        self._loading = threading.Event()
        self.peak_batch = 0
        """Most requests decoded together so far."""
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._run, name="engine", daemon=True)
        self._worker.start()

    @classmethod
    def from_folder(cls, path: str | Path, *, device: str = "cpu", **kw) -> "TorchEngine":
        """A transformers model folder (config, safetensors, tokenizer)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device)
        return cls(model, AutoTokenizer.from_pretrained(path), name=str(path), **kw)

    # -- prompts ------------------------------------------------------------------

    def chat_prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        if self.tokenizer is None:
            raise EngineError("this engine has no tokenizer: it serves token ids only")
        return chat_prompt_ids(self.tokenizer, messages)

    # -- weights ------------------------------------------------------------------

    def load_state_dict(self, tensors: dict[str, torch.Tensor], version: int) -> bool:
        """Load ``tensors`` as ``version`` unless it is not newer than the served one."""
        self._loading.set()  # the running batch admits no one more and drains
        try:
            with self._weights:
                if version <= self.version:
                    return False
                from aes_lib.learner.checkpoint import load_tensors

                load_tensors(self.model, tensors, f"version {version}")
                self.version = version
                return True
        finally:
            self._loading.clear()

    # -- generation ---------------------------------------------------------------

    def submit(self, req: GenRequest) -> Future:
        if not req.prompt_ids:
            raise EngineError("empty prompt")
        if len(req.prompt_ids) + 1 > self.context:
            raise EngineError(f"prompt of {len(req.prompt_ids)} tokens exceeds the context of {self.context}")
        if req.max_tokens < 1 or req.temperature < 0:
            raise EngineError(f"max_tokens must be >= 1 and temperature >= 0, got {req.max_tokens}, {req.temperature}")
        fut: Future = Future()
        self._queue.put((req, fut))
        return fut

    def generate(self, req: GenRequest) -> GenResult:
        return self.submit(req).result()

    def close(self) -> None:
        self._stop.set()
        self._worker.join(timeout=10)

    def _run(self) -> None:
        batch: _Batch | None = None
        while not self._stop.is_set():
            try:
                if batch is None:  # idle: wait for work, then hold the weights for the whole batch
                    first = self._queue.get(timeout=0.2)
                    self._weights.acquire()
                    batch = _Batch([], None, None, None)
                    self._admit(batch, [first])
                elif not self._loading.is_set():  # a pending load stops admissions until the batch drains
                    self._admit(batch, self._waiting(self.max_batch - batch.size))
                self._step(batch)
            except queue.Empty:
                continue
            except Exception as e:  # reported to every caller in the batch; the engine keeps serving
                for row in batch.rows if batch else ():
                    if not row.fut.done():
                        row.fut.set_exception(e)
                batch = None
                self._weights.release()
                continue
            if batch.size == 0:
                batch = None
                self._weights.release()

    def _waiting(self, room: int) -> list[tuple[GenRequest, Future]]:
        out = []
        while len(out) < room:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return out

    @torch.no_grad()
    def _admit(self, batch: "_Batch", new: list[tuple[GenRequest, Future]]) -> None:
        """Prefill ``new`` requests and join them to the running batch (continuous batching):
        both key/value caches are left-padded to one length, the padding masked out."""
        if not new:
            return
        dev = self.device
        width = max(len(r.prompt_ids) for r, _ in new)
        ids = torch.full((len(new), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(new), width), dtype=torch.long)
        for i, (r, _) in enumerate(new):  # left padding: every row's next token is at the end
            ids[i, width - len(r.prompt_ids):] = torch.tensor(r.prompt_ids)
            mask[i, width - len(r.prompt_ids):] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        try:
            # Only the last position's logits are needed to sample: skip [prompt, vocab] for the rest.
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
        except Exception as e:
            for _, fut in new:
                fut.set_exception(e)
            raise
        rows = [_Row(r, fut, torch.Generator().manual_seed(r.seed if r.seed is not None else time.time_ns() + i),
                     min(r.max_tokens, self.context - len(r.prompt_ids)), int(pos[i, -1]) + 1)
                for i, (r, fut) in enumerate(new)]
        batch.join(rows, out.cache, mask, out.logits[:, -1].float())
        self.peak_batch = max(self.peak_batch, batch.size)

    @torch.no_grad()
    def _step(self, batch: "_Batch") -> None:
        """Sample one token for every row from its last logits, retire finished rows, and run
        the next forward pass for the others."""
        temps = torch.tensor([r.req.temperature or 1.0 for r in batch.rows], device=self.device)
        logp = (batch.logits / temps[:, None]).log_softmax(-1).cpu()
        keep, nxt = [], []
        for i, row in enumerate(batch.rows):
            t = int(logp[i].argmax()) if row.req.temperature == 0 else int(
                torch.multinomial(logp[i].exp(), 1, generator=row.gen))
            row.tokens.append(t)
            row.logps.append(float(logp[i, t]))
            if t in self.eos_ids or (row.req.stop and self.tokenizer is not None
                                     and self._hits_stop(row.tokens, row.req.stop)):
                finish = "stop"
            elif len(row.tokens) >= row.limit:
                finish = "length"
            else:
                keep.append(i)
                nxt.append(t)
                continue
            row.fut.set_result(GenResult(row.tokens, row.logps, self._text(row.tokens), finish, self.version))
        batch.select(keep)
        if not keep:
            return
        dev = self.device
        batch.mask = torch.cat([batch.mask, torch.ones((len(keep), 1), dtype=torch.long, device=dev)], dim=1)
        pos = torch.tensor([[row.pos] for row in batch.rows], device=dev)
        out = self.model(input_ids=torch.tensor(nxt, device=dev)[:, None], attention_mask=batch.mask,
                         position_ids=pos, cache=batch.cache, use_cache=True)
        for row in batch.rows:
            row.pos += 1
        batch.cache, batch.logits = out.cache, out.logits[:, -1].float()

    def _hits_stop(self, toks: list[int], stop: tuple[str, ...]) -> bool:
        tail = self.tokenizer.decode(toks[-24:], skip_special_tokens=True)
        return any(s in tail for s in stop)

    def _text(self, toks: list[int]) -> str:
        if self.tokenizer is None:
            return ""
        return self.tokenizer.decode([t for t in toks if t not in self.eos_ids], skip_special_tokens=True)


@dataclasses.dataclass
class _Row:
    """One request being decoded."""

    req: GenRequest
    fut: Future
    gen: torch.Generator
    limit: int
    """Tokens it may produce (its max_tokens, within the context)."""
    pos: int
    """Position id of its next input token."""
    tokens: list[int] = dataclasses.field(default_factory=list)
    logps: list[float] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Batch:
    """The rows decoding together: one key/value cache, attention mask and last logits for all."""

    rows: list[_Row]
    cache: object
    mask: torch.Tensor | None
    logits: torch.Tensor | None

    @property
    def size(self) -> int:
        return len(self.rows)

    def join(self, rows: list[_Row], cache, mask: torch.Tensor, logits: torch.Tensor) -> None:
        if not self.rows:
            self.rows, self.cache, self.mask, self.logits = rows, cache, mask, logits
            return
        width = max(self.mask.shape[1], mask.shape[1])
        for old, new in zip(self.cache.layers, cache.layers):
            old.keys = torch.cat([_left_pad(old.keys, width, -2), _left_pad(new.keys, width, -2)])
            old.values = torch.cat([_left_pad(old.values, width, -2), _left_pad(new.values, width, -2)])
        self.mask = torch.cat([_left_pad(self.mask, width, 1), _left_pad(mask, width, 1)])
        self.logits = torch.cat([self.logits, logits])
        self.rows += rows

    def select(self, keep: list[int]) -> None:
        """Keep only the rows at ``keep`` (finished ones leave the batch)."""
        if len(keep) == len(self.rows):
            return
        self.rows = [self.rows[i] for i in keep]
        if keep:
            idx = torch.tensor(keep, device=self.mask.device)
            self.cache.batch_select_indices(idx)
            self.mask, self.logits = self.mask[idx], self.logits[idx]


def _left_pad(t: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    """``t`` zero-padded on the left of ``dim`` to ``width`` (masked positions, never attended)."""
    missing = width - t.shape[dim]
    if missing == 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t.new_zeros(shape), t], dim=dim)
