"""Sampled-token log-prob at a 151,936-token vocabulary: fused Triton kernel vs torch.

Three ways to get ``log_softmax(h @ W.T)[t, y_t]`` and its gradients w.r.t. ``h``
and ``W`` (one forward + backward per measurement):

* ``eager``: full ``[T, V]`` logits, ``log_softmax``, gather (the baseline);
* ``chunked``: the same per block of tokens under activation checkpointing, so only
  one block's logits live at a time (recomputed in backward);
* ``fused``: ``aes_kernels.fused_logprob`` (CUDA only).

Plus the DPPO loss: the Triton kernel against the torch reference (CUDA only).
Speed is tokens/s and a ratio to ``eager`` measured in the same run; memory is the
peak above the inputs (CUDA: allocator peak; CPU: growth of the process's peak RSS,
each measurement in a fresh process). On CUDA the run first checks the kernels
against the reference (values and gradients, fp32 and bf16).

Run: ``python bench/kernels_bench.py`` (CPU: the reference paths, writes
``bench/results/kernels_cpu.md``) or ``python bench/kernels_bench.py --device cuda``
(writes ``bench/results/kernels_gpu.md``; see ``bench/gpu_kernels.sh``).
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))  # runs without the package installed

from aes_kernels.reference import dppo_loss_reference, token_logprobs_reference  # noqa: E402

V = 151_936
CHUNK = {"cuda": 1024, "cpu": 128}
"""Tokens per block of the chunked torch version (CPU runs use fewer tokens)."""


def chunked_logprobs(h: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    c = CHUNK[h.device.type]
    parts = [checkpoint(token_logprobs_reference, h[s : s + c], w, y[s : s + c], use_reentrant=False)
             for s in range(0, h.shape[0], c)]
    return torch.cat(parts)


def fused_logprobs(h, w, y):
    from aes_kernels.fused_logprob import token_logprobs_triton

    return token_logprobs_triton(h, w, y)


IMPLS = {"eager": token_logprobs_reference, "chunked": chunked_logprobs, "fused": fused_logprobs}


def make_inputs(T: int, H: int, dtype: torch.dtype, device: str, seed: int = 0):
    g = torch.Generator(device=device).manual_seed(seed)
    h = torch.randn(T, H, device=device, dtype=torch.float32, generator=g).to(dtype).requires_grad_()
    w = (torch.randn(V, H, device=device, dtype=torch.float32, generator=g) / H**0.5).to(dtype).requires_grad_()
    y = torch.randint(0, V, (T,), device=device, generator=g)
    return h, w, y


def fwd_bwd(fn, h, w, y) -> None:
    h.grad = w.grad = None
    fn(h, w, y).sum().backward()


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_it(fn, device: str, warmup: int, reps: int) -> float:
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_cuda(impl: str, T: int, H: int, dtype: torch.dtype) -> tuple[float, float]:
    """(median seconds of one forward+backward, peak MiB above the inputs)."""
    h, w, y = make_inputs(T, H, dtype, "cuda")
    fn = IMPLS[impl]
    fwd_bwd(fn, h, w, y)  # compile / warm the allocator
    h.grad = w.grad = None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fwd_bwd(fn, h, w, y)
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    return time_it(lambda: fwd_bwd(fn, h, w, y), "cuda", warmup=1, reps=5), peak


def _cpu_child(impl: str, T: int, H: int, q) -> None:
    torch.set_num_threads(os.cpu_count() or 1)
    h, w, y = make_inputs(T, H, torch.float32, "cpu")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn = IMPLS[impl]
    secs = time_it(lambda: fwd_bwd(fn, h, w, y), "cpu", warmup=1, reps=2)
    q.put((secs, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024))


def measure_cpu(impl: str, T: int, H: int) -> tuple[float, float]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_cpu_child, args=(impl, T, H, q))
    p.start()
    out = q.get()
    p.join()
    return out


def check_cuda() -> list[str]:
    """Kernel vs reference on the GPU: max abs errors of values and gradients."""
    from aes_kernels.dppo_loss import dppo_loss_triton

    rows = ["| check | dtype | T x H | max abs err logp | max abs err dh | max abs err dW | ok |", "|---|---|---|---|---|---|---|"]
    for dtype, tol in ((torch.float32, 1e-3), (torch.bfloat16, 5e-2)):
        for T, H in ((333, 128), (2048, 896)):
            h, w, y = make_inputs(T, H, dtype, "cuda", seed=T)
            g = torch.randn(T, device="cuda")
            res = []
            for fn in (fused_logprobs, token_logprobs_reference):
                h.grad = w.grad = None
                out = fn(h, w, y)
                (out * g).sum().backward()
                res.append((out.detach().float(), h.grad.float(), w.grad.float()))
            errs = [(a - b).abs().max().item() for a, b in zip(*res)]
            scale = [max(b.abs().max().item(), 1e-6) for b in res[1]]
            ok = all(e <= tol * max(1.0, s) for e, s in zip(errs, scale))
            rows.append(f"| fused log-prob | {str(dtype)[6:]} | {T} x {H} | {errs[0]:.2e} | {errs[1]:.2e} | {errs[2]:.2e} | {'yes' if ok else 'NO'} |")
    n = 1_000_003
    g = torch.Generator(device="cuda").manual_seed(1)
    mu = -torch.rand(n, device="cuda", generator=g) * 3
    logp = (mu + torch.randn(n, device="cuda", generator=g) * 0.4).clamp(max=0.0)
    adv = torch.randn(n, device="cuda", generator=g)
    valid = (torch.rand(n, device="cuda", generator=g) > 0.1).float()
    for div in ("tv", "kl"):
        outs, grads = [], []
        for fn in (dppo_loss_triton, dppo_loss_reference):
            x = logp.clone().requires_grad_()
            o = fn(x, mu, adv, valid, divergence=div)
            o.loss.backward()
            outs.append(o)
            grads.append(x.grad)
        el = abs(outs[0].loss.item() - outs[1].loss.item())
        eg = (grads[0] - grads[1]).abs().max().item()
        # exp() may differ in the last ulp between Triton and torch: a token sitting exactly on
        # the threshold can flip, so allow two flips (each moves one gradient by ~r*A/N).
        flips = abs(outs[0].masked_tokens.item() - outs[1].masked_tokens.item())
        ok = el < 1e-4 and eg < 1e-5 and flips <= 2
        rows.append(f"| dppo loss ({div}) | float32 | N={n} | loss {el:.2e} | grad {eg:.2e} | "
                    f"masked-count difference {flips:.0f} of {outs[1].masked_tokens.item():.0f} | {'yes' if ok else 'NO'} |")
    return rows


def time_dppo_cuda() -> list[str]:
    from aes_kernels.dppo_loss import dppo_loss_triton

    n = 16 * 1024 * 1024
    mu = -torch.rand(n, device="cuda") * 3
    logp = (mu + torch.randn(n, device="cuda") * 0.4).clamp(max=0.0).requires_grad_()
    adv, valid = torch.randn(n, device="cuda"), torch.ones(n, device="cuda")

    def run(fn):
        logp.grad = None
        fn(logp, mu, adv, valid).loss.backward()

    base = time_it(lambda: run(dppo_loss_reference), "cuda", 2, 10)
    fused = time_it(lambda: run(dppo_loss_triton), "cuda", 2, 10)
    return ["| impl | tokens | ms fwd+bwd | tokens/s | speed vs torch |", "|---|---|---|---|---|",
            f"| torch reference | {n} | {base * 1e3:.2f} | {n / base:.3e} | 1.00x |",
            f"| triton | {n} | {fused * 1e3:.2f} | {n / fused:.3e} | {base / fused:.2f}x |"]


def machine(device: str) -> list[str]:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    mem = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/meminfo").read_text().splitlines()
                if ln.startswith("MemTotal")), "?")
    out = [f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
           f"- nproc: {os.cpu_count()}, CPU: {cpu}, memory: {mem}",
           f"- torch {torch.__version__}, python {platform.python_version()}"]
    if device == "cuda":
        import triton

        out.append(f"- GPU: {torch.cuda.get_device_name()}, triton {triton.__version__}")
        try:
            out.append("- driver: " + subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                                    capture_output=True, text=True, timeout=20).stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA device visible")
    out = args.out or Path(__file__).parent / "results" / f"kernels_{'gpu' if device == 'cuda' else 'cpu'}.md"

    lines = [f"# Sampled-token log-prob, V = {V:,} ({device})", "", *machine(device), ""]
    out.parent.mkdir(parents=True, exist_ok=True)

    def flush() -> None:  # after each section, so a run cut short keeps what it measured
        out.write_text("\n".join(lines) + "\n")

    if device == "cuda":
        try:
            checks = check_cuda()
        except Exception as e:  # noqa: BLE001  (a one-shot run records the failure and still times the rest)
            checks = [f"check failed: {type(e).__name__}: {e}"]
        lines += ["## Correctness: fused kernels vs torch reference on the GPU", "", *checks, ""]
        print("\n".join(lines), flush=True)
        flush()
        configs = [(T, H, dt) for dt in (torch.bfloat16, torch.float32) for T, H in ((4096, 896), (16384, 896), (8192, 2048))]
        impls = ("eager", "chunked", "fused")
    else:
        configs = [(T, 128, torch.float32) for T in (256, 1024)]
        impls = ("eager", "chunked")

    lines += ["## Forward + backward (grad wrt h and W)", "",
              "| dtype | T | H | impl | ms | tokens/s | speed vs eager | peak MiB above inputs | memory vs eager |",
              "|---|---|---|---|---|---|---|---|---|"]
    for T, H, dt in configs:
        res = {}
        for impl in impls:
            try:
                res[impl] = measure_cuda(impl, T, H, dt) if device == "cuda" else measure_cpu(impl, T, H)
                if device == "cuda":
                    torch.cuda.empty_cache()  # the next measurement starts from the inputs only
            except torch.OutOfMemoryError:
                res[impl] = "OOM"
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001
                res[impl] = f"error: {type(e).__name__}: {str(e)[:200]}"
        base = res["eager"] if isinstance(res["eager"], tuple) else None
        for impl, r in res.items():
            if isinstance(r, str):
                lines.append(f"| {str(dt)[6:]} | {T} | {H} | {impl} | {r} | | | | |")
                continue
            secs, peak = r
            sp = f"{base[0] / secs:.2f}x" if base else "n/a"
            mem = f"{peak / base[1]:.3f}x" if base and base[1] > 0 else "n/a"
            lines.append(f"| {str(dt)[6:]} | {T} | {H} | {impl} | {secs * 1e3:.1f} | {T / secs:,.0f} | {sp} | {peak:,.1f} | {mem} |")
        print("\n".join(lines[-len(res):]), flush=True)
        flush()
    if device == "cuda":
        try:
            lines += ["", "## DPPO loss, forward + backward", "", *time_dppo_cuda()]
        except Exception as e:  # noqa: BLE001
            lines.append(f"DPPO timing failed: {type(e).__name__}: {e}")
    lines += ["", "Eager materializes T x V fp32 logits (and log-softmax) for backward; chunked keeps one "
              f"{CHUNK[device]}-token block; fused keeps none (fp32 gradient buffers only). CPU memory is peak-RSS growth in a "
              "fresh process (coarse); CUDA memory is the allocator's peak above the inputs."]
    flush()
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
