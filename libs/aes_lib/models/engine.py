"""A sampling engine over a transformers causal LM that can take new weights.

This is what serves the policy wherever it is trained without vLLM (the embedded
stack, CPU machines): the same weights the learner updates, loaded in place from
its safetensors checkpoints. Each completion token's recorded log-prob is that of
the distribution it was actually drawn from, ``log_softmax(logits / T)``, which
is what the trainer recomputes with the same temperature (DPPO's anchor ``mu``).
Temperature 0 decodes greedily and records the untempered log-probs.

Requests that arrive together are decoded together (left-padded, one KV cache),
so several solver attempts share each forward pass; a request arriving during a
batch waits for the next one. ``policy_version`` is the version of the weights
that produced a completion; a weight load waits for the running batch to end.
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
        """The chat template applied with the assistant's turn opened, as token ids."""
        if self.tokenizer is None:
            raise EngineError("this engine has no tokenizer: it serves token ids only")
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # BatchEncoding in newer transformers
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    # -- weights ------------------------------------------------------------------

    def load_state_dict(self, tensors: dict[str, torch.Tensor], version: int) -> bool:
        """Load ``tensors`` as ``version`` unless it is not newer than the served one."""
        with self._weights:
            if version <= self.version:
                return False
            self.model.load_state_dict(tensors, strict=True)
            self.version = version
            return True

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
        while not self._stop.is_set():
            try:
                batch = [self._queue.get(timeout=0.2)]
            except queue.Empty:
                continue
            while len(batch) < self.max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                with self._weights:
                    results = self._decode([r for r, _ in batch])
                for (_, fut), res in zip(batch, results):
                    fut.set_result(res)
            except Exception as e:  # reported to every waiting caller, the engine keeps serving
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)

    @torch.no_grad()
    def _decode(self, reqs: list[GenRequest]) -> list[GenResult]:
        n, dev = len(reqs), self.device
        width = max(len(r.prompt_ids) for r in reqs)
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, r in enumerate(reqs):  # left padding: every row's next token is at the end
            ids[i, width - len(r.prompt_ids):] = torch.tensor(r.prompt_ids)
            mask[i, width - len(r.prompt_ids):] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        # Only the last position's logits are needed to sample: skip [prompt, vocab] for the rest.
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
        gens = [torch.Generator().manual_seed(r.seed if r.seed is not None else int(time.time_ns()) + i)
                for i, r in enumerate(reqs)]
        temps = torch.tensor([r.temperature if r.temperature > 0 else 1.0 for r in reqs], device=dev)
        limit = [min(r.max_tokens, self.context - len(r.prompt_ids)) for r in reqs]
        tokens: list[list[int]] = [[] for _ in reqs]
        logps: list[list[float]] = [[] for _ in reqs]
        finish = [""] * n
        last_pos = pos[:, -1]
        for step in range(max(limit)):
            logp = (out.logits[:, -1].float() / temps[:, None]).log_softmax(-1)
            nxt = torch.empty(n, dtype=torch.long)
            for i, r in enumerate(reqs):
                if finish[i]:
                    nxt[i] = self.pad_id
                    continue
                row = logp[i].cpu()
                t = int(row.argmax()) if r.temperature == 0 else int(torch.multinomial(row.exp(), 1, generator=gens[i]))
                nxt[i] = t
                tokens[i].append(t)
                logps[i].append(float(row[t]))
                if t in self.eos_ids:
                    finish[i] = "stop"
                elif r.stop and self.tokenizer is not None and self._hits_stop(tokens[i], r.stop):
                    finish[i] = "stop"
                elif len(tokens[i]) >= limit[i]:
                    finish[i] = "length"
            if all(finish):
                break
            mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long, device=dev)], dim=1)
            last_pos = last_pos + 1
            out = self.model(input_ids=nxt[:, None].to(dev), attention_mask=mask, position_ids=last_pos[:, None],
                             cache=out.cache, use_cache=True)
        return [GenResult(t, lp, self._text(t), f or "length", self.version)
                for t, lp, f in zip(tokens, logps, finish)]

    def _hits_stop(self, toks: list[int], stop: tuple[str, ...]) -> bool:
        tail = self.tokenizer.decode(toks[-24:], skip_special_tokens=True)
        return any(s in tail for s in stop)

    def _text(self, toks: list[int]) -> str:
        if self.tokenizer is None:
            return ""
        return self.tokenizer.decode([t for t in toks if t not in self.eos_ids], skip_special_tokens=True)
