"""One shot on a GPU machine: seconds per version through the nccl transport vs the filesystem
transport, into the same vLLM, and the served version on each completion.

Not run on the CPU machines this project tests on (the nccl transport is refused without CUDA,
``tests/weights/test_transports.py``). Needs a CUDA build of vLLM >= 0.32 (``AES_VLLM_PYTHON``, or
vLLM in this interpreter) and the model folder::

    AES_VLLM_PYTHON=/path/to/cuda-vllm/bin/python .venv/bin/python bench/gpu_nccl_weights.py --model DIR

It starts vLLM through ``aes_lib.models.vllm_serve`` with ``--weight-transfer-config
'{"backend": "nccl"}'`` (one GPU: the group is the trainer and one worker), then per version:
nccl (``NcclTransport.publish``: broadcast, then the store record) and filesystem
(``publish_version`` then weight sync's load); after each, one completion whose
``X-AES-Weight-Version`` must be that version. Writes ``bench/results/gpu_nccl_weights.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from weights_bench import Ctx  # noqa: E402  (the publishing context)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "gpu_nccl_weights.md"


def start_vllm(model: Path, tmp: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "AES_VLLM_ARGS": "--weight-transfer-config " + json.dumps({"backend": "nccl"}),
           "AES_VLLM_DTYPE": os.environ.get("AES_VLLM_DTYPE", "bfloat16")}
    url_file = tmp / "vllm.url"
    proc = subprocess.Popen([sys.executable, "-m", "aes_lib.models.vllm_serve", "--model", str(model),
                             "--url-file", str(url_file), "--workdir", str(tmp / "vllm")], env=env,
                            stdout=(tmp / "vllm.log").open("wb"), stderr=subprocess.STDOUT)
    while not url_file.is_file():
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM did not start: {(tmp / 'vllm.log').read_text()[-3000:]}")
        time.sleep(0.5)
    return proc, url_file.read_text().strip()


async def served_header(url: str) -> str:
    from aes_lib.models.served_version import HEADER

    async with httpx.AsyncClient(timeout=300) as c:
        r = await c.post(f"{url}/chat/completions", json={
            "model": "policy", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
        r.raise_for_status()
        return r.headers[HEADER]


async def run(model_folder: Path, versions: int) -> list[str]:
    import torch
    from transformers import AutoModelForCausalLM

    from aes_lib.blobstore import open_store
    from aes_lib.config import Settings
    from aes_lib.learner.checkpoint import write_hf_folder
    from aes_lib.models.weights import VLLMEngineClient
    from aes_lib.weights.publish import publish_version, weight_transport
from aes_lib.weights.transport import VersionMeta

    tmp = Path(tempfile.mkdtemp(prefix="aes-gpu-nccl-"))
    proc, url = start_vllm(model_folder, tmp)
    try:
        model = AutoModelForCausalLM.from_pretrained(model_folder, dtype=torch.bfloat16).cuda()
        base = Settings(home=tmp / "home", blob_url=f"file://{tmp / 'blobs'}", engine="vllm", model_url=url,
                        weights_dir=str(tmp / "shared"), nccl_master="127.0.0.1:29555", nccl_world_size=2)
        ctx = Ctx(base, open_store(base.blob_location, base))
        engine = VLLMEngineClient(url, base)

        async def write(folder: Path) -> None:
            await asyncio.to_thread(write_hf_folder, model.state_dict(), model.config, folder, dtype=torch.bfloat16,
                                    tokenizer_from=model_folder)

        nccl = weight_transport(dataclasses.replace(base, weight_transport="nccl"))
        times: dict[str, list[float]] = {"nccl broadcast (pause, send, version, resume)": [],
                                         "filesystem (write, rename, reload)": []}
        v = 0
        for _ in range(versions):
            for kind in times:
                v += 1
                with torch.no_grad():
                    next(model.parameters()).add_(1e-3)
                meta = VersionMeta(version=v, prefix="gpu/policy", base_model=model_folder.name, run_id="gpu", keep=2)
                if kind.startswith("nccl"):
                    t0 = time.monotonic()
                    await nccl.publish(ctx, write, meta, model)
                    nccl_total = time.monotonic() - t0
                    t0 = time.monotonic()
                    await nccl.record.publish(ctx, write, meta)  # the record alone, to subtract
                    times[kind].append(nccl_total - (time.monotonic() - t0))
                else:
                    t0 = time.monotonic()
                    ctx.settings = dataclasses.replace(base, weight_transport="filesystem")
                    pv = await publish_version(ctx, write, meta)
                    await engine.load(pv)
                    times[kind].append(time.monotonic() - t0)
                header = await served_header(url)
                assert header == str(v), (kind, v, header)
                print(f"v{v} {kind}: {times[kind][-1]:.2f} s, served header {header}", flush=True)
    finally:
        proc.terminate()
        proc.wait(120)
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip()
    base_s = statistics.median(times["filesystem (write, rename, reload)"])
    return ["# Weight transports on a GPU: nccl vs filesystem", "",
            f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", f"- GPU: {gpu}",
            f"- model: {model_folder.name}, bf16; median of {versions} versions each", "",
            "| transport | s / version | vs filesystem |", "|---|---|---|",
            *(f"| {k} | {statistics.median(t):.2f} | {statistics.median(t) / base_s:.2f}x |" for k, t in times.items()),
            "", "Every completion after a version carried that version in `X-AES-Weight-Version`."]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--versions", type=int, default=3)
    args = ap.parse_args()
    OUT.write_text("\n".join(asyncio.run(run(args.model, args.versions))) + "\n")
    print(OUT.read_text())


if __name__ == "__main__":
    main()
