"""One DPPO learner update under FSDP2 on one GPU: ``kernel_backend="triton"`` against ``"torch"``.

A randomly initialised model shaped like Qwen2.5-0.5B (``Qwen2Config``: vocabulary 151,936,
hidden 896, 24 layers, GQA 14/2 heads with q/k/v bias, tied embeddings; ~0.49B parameters,
nothing downloaded) is saved as a transformers folder and built by the learner's own
``LearnerRuntime`` on a 1-rank process group (nccl; gloo for the CPU dry run): ``fully_shard``
per decoder layer + root, fp32 master weights and AdamW moments, compute in each dtype
(``MixedPrecisionPolicy``), activation checkpointing on. The batch: solver groups with a few
thousand completion tokens (varied lengths; sampler log-probs from a forward pass of the same
weights, jittered so the DPPO ratio and mask are not trivially 1 / 0). For each dtype, each
backend starts from identical weights: the first step's loss, grad norm and mean divergence
must agree between the backends within a tolerance; the next steps are timed (median), with the
allocator's peak memory. The baseline is ``torch`` (full ``[tokens, vocab]`` logits for the
completion positions, log-softmax, gather), measured in the same run. Then one learner step end
to end: plan, step, export of the HF-format folder the engines load, reloaded by transformers.

Imports only torch, triton, transformers (+ safetensors, huggingface_hub) and this tree (libs/,
proto/, kernels/ are put on ``sys.path``); where msgspec is missing (the lent GPU machine has only
the ML stack) the trainer's modules are loaded without the learner package's bus-facing parts.

Run: ``python bench/gpu_learner.py --out bench/results/learner_gpu.md`` on CUDA (see
``bench/gpu_kernels.sh``); ``python bench/gpu_learner.py --device cpu --tiny`` is the dry run
(tiny model, gloo; torch backend only unless ``TRITON_INTERPRET=1``; writes to the temp folder
unless ``--out`` is given).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
for _p in ("kernels", "proto", "libs"):
    if str(ROOT / _p) not in sys.path:
        sys.path.insert(0, str(ROOT / _p))

VOCAB = 151_936
FULL = dict(vocab_size=VOCAB, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
            num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=4096,
            tie_word_embeddings=True, rms_norm_eps=1e-6, rope_theta=1_000_000.0)
TINY = dict(vocab_size=4096, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
            tie_word_embeddings=True)
# groups x group size, prompt tokens, completion lengths cycled over the samples, micro-batch tokens
FULL_BATCH = dict(groups=4, group_size=4, prompt=512, completions=(128, 192, 256, 320), micro=8192)
TINY_BATCH = dict(groups=2, group_size=2, prompt=24, completions=(8, 12), micro=256)
TOL = {"float32": 2e-3, "bfloat16": 3e-2}
"""Relative tolerance (of max(|value|, scale)) for the backends' first-step statistics."""


def _import_learner():
    """``(LearnerRuntime, LearnerConfig, Sample, TokenizedTurn)`` from this tree."""
    try:
        import msgspec  # noqa: F401
    except ImportError:
        # Without msgspec (bus/protocol layer) the learner package's __init__ cannot be run; the
        # trainer itself needs only torch and aes_kernels. Register the packages by path (no
        # __init__ executed) and stand in for the msgspec-typed module the trainer's
        # modules name only in annotations.
        for name, path in (("aes_lib", ROOT / "libs" / "aes_lib"), ("aes_lib.learner", ROOT / "libs" / "aes_lib" / "learner")):
            mod = types.ModuleType(name)
            mod.__path__ = [str(path)]
            sys.modules.setdefault(name, mod)
        batcher = types.ModuleType("aes_lib.learner.batcher")
        batcher.Batch = object  # the trainer only reads batch.samples
        sys.modules.setdefault("aes_lib.learner.batcher", batcher)
    from aes_lib.learner.config import LearnerConfig
    from aes_lib.learner.runtime import LearnerRuntime
    from aes_lib.learner.samples import Sample, TokenizedTurn
    return LearnerRuntime, LearnerConfig, Sample, TokenizedTurn


class _Batch:
    """What ``DppoTrainer.step`` reads from a ``Batch``: ``samples`` as (sample, advantage)."""

    def __init__(self, samples):
        self.samples = samples


def save_model(cfg_kw: dict, folder: Path, seed: int = 0) -> Path:
    """The random-init Qwen2-shaped model as a transformers folder (what the learner starts from)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    Qwen2ForCausalLM(Qwen2Config(**cfg_kw)).save_pretrained(folder)
    return folder


def init_group(device: str) -> None:
    """A 1-rank process group, as torchrun would give a learner with --nproc 1."""
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    if not dist.is_initialized():
        if device == "cuda":
            torch.cuda.set_device(0)
        dist.init_process_group("nccl" if device == "cuda" else "gloo")


def make_batch(folder: Path, dtype: torch.dtype, shape: dict, vocab: int, device: str, Sample, TokenizedTurn):
    """Solver groups with centred 0/1 rewards; sampler log-probs = this model's, jittered."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(device)
    g = torch.Generator().manual_seed(1)
    samples = []
    model.eval()
    k = 0
    for gi in range(shape["groups"]):
        members = []
        for i in range(shape["group_size"]):
            c_len = shape["completions"][k % len(shape["completions"])]
            k += 1
            p = torch.randint(0, vocab, (shape["prompt"],), generator=g)
            c = torch.randint(0, vocab, (c_len,), generator=g)
            ids = torch.cat([p, c])[None].to(device)
            with torch.no_grad():
                logits = model(input_ids=ids).logits[0, shape["prompt"] - 1: -1].float()
                logp = logits.log_softmax(-1).gather(-1, c[:, None].to(device))[:, 0].cpu()
            mu = (logp + torch.randn(c_len, generator=g) * 0.05).clamp(max=-1e-6)
            members.append(Sample(f"{gi}-{i}", f"g{gi}", "solver", float(i % 2),
                                  (TokenizedTurn(tuple(p.tolist()), tuple(c.tolist()), tuple(mu.tolist())),)))
            del logits
        mean = sum(s.reward for s in members) / len(members)
        samples += [(s, s.reward - mean) for s in members]
    del model
    return _Batch(samples)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def run_backend(backend: str, dtype_name: str, folder: Path, batch, shape: dict, device: str, steps: int,
                learner, export: Path | None = None) -> dict:
    LearnerRuntime, LearnerConfig, Sample, TokenizedTurn = learner
    config = LearnerConfig(solver_group_size=shape["group_size"], groups_per_batch=shape["groups"], lr=1e-6,
                           kernel_backend=backend, device=device, micro_batch_tokens=shape["micro"],
                           param_dtype=dtype_name, activation_checkpointing=True)
    rt = LearnerRuntime(None)  # one process: the batch is stepped directly, no packed shares
    rt.build(config, str(folder))
    sync(device)
    t0 = time.perf_counter()
    first = rt.trainer.step(batch)  # identical weights for both backends: the statistics compared
    sync(device)
    first_s = time.perf_counter() - t0
    if device == "cuda":
        torch.cuda.empty_cache()
        resident = torch.cuda.memory_allocated()  # fp32 weights + gradients + AdamW state
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        rt.trainer.step(batch)
        sync(device)
        times.append(time.perf_counter() - t0)
    out = {"first": first, "first_s": first_s, "secs": statistics.median(times) if times else first_s,
           "tokens": first.tokens, "all_tokens": first.sequence_tokens,
           "params": sum(p.numel() for p in rt.model.parameters())}
    if device == "cuda":
        out["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        out["resident_gib"] = resident / 2**30
    if export is not None:  # the end of a learner step: the HF-format folder the engines load
        t0 = time.perf_counter()
        rt.export(str(export))
        out["export_s"] = time.perf_counter() - t0
    del rt
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def check_export(folder: Path, params: int) -> str:
    """transformers loads the exported folder, with every parameter."""
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(folder)
    n = sum(p.numel() for p in loaded.parameters())
    size = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    if n != params:
        raise RuntimeError(f"exported folder has {n} parameters, the model {params}")
    return f"{type(loaded).__name__}, {n / 1e6:,.1f}M parameters, {size / 2**20:,.0f} MiB of safetensors"


def agree(a, b, dtype_name: str) -> tuple[bool, str]:
    tol = TOL[dtype_name]
    parts, ok = [], True
    for name, scale in (("loss", 1e-3), ("grad_norm", 1e-3), ("mean_divergence", 1e-4), ("mask_fraction", 0.0)):
        x, y = getattr(a, name), getattr(b, name)
        err = abs(x - y)
        limit = tol * max(abs(y), scale) if name != "mask_fraction" else 0.01  # a few threshold tokens may flip
        ok &= err <= limit
        parts.append(f"{name} {x:.4g} vs {y:.4g}")
    return ok, "; ".join(parts)


def machine(device: str) -> list[str]:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    out = [f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
           f"- nproc: {os.cpu_count()}, CPU: {cpu}, load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())}",
           f"- torch {torch.__version__}, python {platform.python_version()}"]
    try:
        import transformers

        out[-1] += f", transformers {transformers.__version__}"
    except ImportError:
        pass
    if device == "cuda":
        out.append(f"- GPU: {torch.cuda.get_device_name()}")
        try:
            import triton

            out[-1] += f", triton {triton.__version__}"
            out[-1] += ", driver " + subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                                    capture_output=True, text=True, timeout=20).stdout.strip()
        except (ImportError, OSError, subprocess.SubprocessError):
            pass
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--tiny", action="store_true", help="toy model and batch (smoke check)")
    ap.add_argument("--dtypes", default="", help="comma-separated: float32,bfloat16 (default: both on CUDA, float32 on CPU)")
    ap.add_argument("--steps", type=int, default=0, help="timed steps after the compared one (default 3 on CUDA, 1 on CPU)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA device visible")
    if device == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)
    cfg_kw, shape = (TINY, TINY_BATCH) if args.tiny else (FULL, FULL_BATCH)
    dtypes = [d for d in (args.dtypes or ("float32,bfloat16" if device == "cuda" else "float32")).split(",") if d]
    steps = args.steps or (3 if device == "cuda" else 1)
    triton_ok = device == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"
    backends = ("torch", "triton") if triton_ok and importlib.util.find_spec("triton") else ("torch",)
    out = args.out or (ROOT / "bench" / "results" / "learner_gpu.md" if device == "cuda"
                       else Path(tempfile.gettempdir()) / "learner_cpu_smoke.md")
    learner = _import_learner()
    init_group(device)
    work = Path(tempfile.mkdtemp(prefix="aes-gpu-learner-"))
    folder = save_model(cfg_kw, work / "base")
    n_comp = sum(shape["completions"][k % len(shape["completions"])] for k in range(shape["groups"] * shape["group_size"]))
    lines = [f"# DPPO learner update under FSDP2 on {'the GPU' if device == 'cuda' else 'the CPU (dry run)'}: "
             "triton vs torch kernels", "",
             *machine(device),
             f"- model: random-init Qwen2, vocab {cfg_kw['vocab_size']:,}, hidden {cfg_kw['hidden_size']}, "
             f"{cfg_kw['num_hidden_layers']} layers, heads {cfg_kw['num_attention_heads']}/{cfg_kw['num_key_value_heads']}, "
             "tied embeddings; FSDP2 on 1 rank (fully_shard per layer + root), fp32 master weights and AdamW, "
             "compute in the row's dtype, activation checkpointing",
             f"- batch: {shape['groups']} groups x {shape['group_size']}, prompt {shape['prompt']} + completions "
             f"{'/'.join(map(str, shape['completions']))} tokens ({n_comp:,} completion tokens), micro-batches of "
             f"<= {shape['micro']:,} padded tokens; median of {steps} steps after the compared first step", "",
             "| dtype | backend | params | first step s | s / step | completion tokens/s | all tokens/s | speed vs torch "
             "| peak GiB | peak above resident GiB | memory vs torch | loss | grad norm | mask fraction |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    checks = ["", "## Backends agree (first step, identical weights)", ""]
    out.parent.mkdir(parents=True, exist_ok=True)

    def flush() -> None:
        out.write_text("\n".join(lines + checks) + "\n")

    flush()
    failed = False
    for dt_name in dtypes:
        dtype = getattr(torch, dt_name)
        res = {}
        # The Triton interpreter does not support bf16 (its tl.dot multiplies the raw bit patterns:
        # triton-lang/triton#11584), so on the CPU bf16 runs the torch backend only.
        dt_backends = ("torch",) if device == "cpu" and dtype == torch.bfloat16 else backends
        batch = make_batch(folder, dtype, shape, cfg_kw["vocab_size"], device, learner[2], learner[3])
        for backend in dt_backends:
            t0 = time.perf_counter()
            export = work / f"export-{dt_name}-{backend}" if dt_name == dtypes[-1] and backend == dt_backends[-1] else None
            try:
                res[backend] = run_backend(backend, dt_name, folder, batch, shape, device, steps, learner, export)
                if export is not None:
                    exported = check_export(export, res[backend]["params"])
                    checks.append(f"- one learner step end to end ({dt_name}, {backend}): plan, FSDP2 step, export "
                                  f"in {res[backend]['export_s']:.1f} s; transformers loads it: {exported}")
            except torch.OutOfMemoryError:
                res[backend] = "OOM"
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001  (a one-shot run records the failure and goes on)
                res[backend] = f"error: {type(e).__name__}: {str(e)[:300]}"
            print(f"{dt_name} {backend}: {time.perf_counter() - t0:.1f} s -> "
                  f"{res[backend] if isinstance(res[backend], str) else 'ok'}", flush=True)
            r = res[backend]
            if isinstance(r, str):
                failed = True
                lines.append(f"| {dt_name} | {backend} | {r} |" + " |" * 11)
                flush()
                continue
            base = res.get("torch") if isinstance(res.get("torch"), dict) else None
            sp = f"{base['secs'] / r['secs']:.2f}x" if base else "n/a"
            peak = f"{r['peak_gib']:.2f}" if "peak_gib" in r else "n/a"
            above = f"{r['peak_gib'] - r['resident_gib']:.2f}" if "peak_gib" in r else "n/a"
            mem = (f"{(r['peak_gib'] - r['resident_gib']) / (base['peak_gib'] - base['resident_gib']):.2f}x"
                   if base and "peak_gib" in r and base["peak_gib"] > base["resident_gib"] else "n/a")
            f = r["first"]
            lines.append(f"| {dt_name} | {backend} | {r['params'] / 1e6:,.1f}M | {r['first_s']:.2f} | {r['secs']:.3f} | "
                         f"{r['tokens'] / r['secs']:,.0f} | {r['all_tokens'] / r['secs']:,.0f} | {sp} | {peak} | {above} | "
                         f"{mem} | {f.loss:.5g} | {f.grad_norm:.4g} | {f.mask_fraction:.3f} |")
            print(lines[-1], flush=True)
            flush()
        if len(dt_backends) == 2 and all(isinstance(res.get(b), dict) for b in dt_backends):
            ok, detail = agree(res["triton"]["first"], res["torch"]["first"], dt_name)
            failed |= not ok
            checks.append(f"- {dt_name}: {'yes' if ok else 'NO'} (triton vs torch: {detail}; "
                          f"relative tolerance {TOL[dt_name]:g})")
        elif len(dt_backends) == 1:
            why = ("the Triton interpreter does not support bf16" if len(backends) == 2
                   else "no CUDA and TRITON_INTERPRET unset")
            checks.append(f"- {dt_name}: only the torch backend ran ({why})")
        print(checks[-1], flush=True)
        flush()
    checks += ["", "Peak: the allocator's peak during the timed steps; resident: weights + gradients + AdamW state before "
              "them. The torch backend materializes fp32 [completion tokens, vocab] logits per micro-batch; triton never does."]
    flush()
    print(f"wrote {out}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
