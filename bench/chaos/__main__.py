"""Chaos suite (``make chaos``): admission under SIGKILLs, bus restarts, store outages and poison.

    .venv/bin/python bench/chaos --candidates 100 --kills 30

Starts its own nats-server (JetStream, file store, auth, one fixed port), a SeaweedFS S3
server (``weed mini``) as the blob store, a replayed model that always gives up (a stand-in
for a hosted solver endpoint: calibration is quick and decides ``too_hard``), and the
admission services as separate processes (``aes service NAME``): two validator replicas,
contamination, reset, calibrator and pool, on the route validate,contamination,reset,calibrate.

It publishes N distinct candidates built from one small task template (one shared
``environment/`` so the validator's image cache makes builds cheap; the instruction varies,
so every env_id differs): ~10% garbage bundles (rejected at validate), ~75% that copy a
registered held-out instruction (rejected by contamination), ~15% that pass the gates and
are calibrated. It also publishes poison messages (random bytes) on aes.candidate.validate
and aes.result.calibration. While candidates are in flight it SIGKILLs a random service
every few seconds (restarting it), sometimes nats-server (restarted on the same store dir
and port), stops the store for a short outage (SIGSTOP/SIGCONT) and once for longer than a
stage budget (a hung read).

At the end every candidate must have exactly one final result on aes.result.calibration,
or dead letters that explain it: lost = neither, doubled = more than one result message
stored (counted per candidate from the stream, so JetStream's dedupe cannot hide a double
that got through). Every dead letter must carry an error and a fault; poison must come
back as ``malformed``. Prints a table and writes bench/results/chaos.md.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import shutil
import signal
import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: this folder is the package ``chaos``

from chaos.procs import ROOT, cleanup, say  # noqa: E402
from chaos.run import main_async  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--candidates", type=int, default=100, help="candidates published (default 100)")
    p.add_argument("--kills", type=int, default=30, help="SIGKILLs of services and nats-server (default 30)")
    p.add_argument("--nats-every", type=int, default=6, help="about one kill in this many is nats-server (default 6)")
    p.add_argument("--kill-interval", type=float, default=6.0, help="mean seconds between chaos steps (default 6)")
    p.add_argument("--first-kill-after", type=float, default=5.0, help="seconds after publishing before the first kill")
    p.add_argument("--restart-delay", type=float, default=2.0, help="longest pause before a killed process restarts")
    p.add_argument("--outage", type=float, default=3.0, help="seconds of the short store outage (SIGSTOP)")
    p.add_argument("--hung-read", type=float, default=30.0,
                   help="seconds the store hangs once: longer than the validator's budget (default 30)")
    p.add_argument("--store-kills", type=int, default=1,
                   help="also SIGKILL SeaweedFS this many times (restarted on the same data dir; default 1)")
    p.add_argument("--validator-budget", type=float, default=20.0,
                   help="the validator's delivery budget in seconds, set as AES_BUDGETS=validator=S (0: the built-in)")
    p.add_argument("--io-deadline", type=float, default=0.0,
                   help="AES_IO_DEADLINE for the services: seconds one blob read/write may take (0: the built-in)")
    p.add_argument("--target", choices=("busy", "random"), default="busy",
                   help="busy: kill a process of a service with unacknowledged work when there is one; random: any")
    p.add_argument("--publish-over", type=float, default=-1.0,
                   help="seconds over which the candidates are published (default: most of the chaos schedule)")
    p.add_argument("--poison", type=int, default=4, help="poison messages, alternately on aes.candidate.validate "
                                                         "and aes.result.calibration (default 4)")
    p.add_argument("--invalid-frac", type=float, default=0.10)
    p.add_argument("--pass-frac", type=float, default=0.15)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--progress", type=float, default=10.0, help="seconds between progress lines")
    p.add_argument("--settle", type=float, default=10.0, help="seconds everything must stay idle before the count")
    p.add_argument("--quiet-timeout", type=float, default=400.0,
                   help="after the chaos, stop when no candidate finishes for this long (> the longest ack_wait)")
    p.add_argument("--time-limit", type=float, default=3600.0, help="overall limit in seconds (default 3600)")
    p.add_argument("--env", action="append", default=[], metavar="VAR=VALUE",
                   help="extra environment for the services (e.g. AES_BUDGET_VALIDATOR=20); repeatable")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "chaos.md"),
                   help="markdown report (empty: none)")
    p.add_argument("--workdir", help="keep state and logs here instead of a temporary folder")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (logs) after the run")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.workdir:
        root = Path(args.workdir).resolve()
        if root.exists() and any(root.iterdir()):
            raise SystemExit(f"--workdir {root} is not empty")
        root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="aes-chaos-"))
    atexit.register(cleanup)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt(f"signal {sig}")

    signal.signal(signal.SIGTERM, on_signal)
    code = 1
    try:
        code = asyncio.run(main_async(args, root))
    except KeyboardInterrupt:
        say("interrupted")
        code = 130
    except Exception:
        traceback.print_exc()
        say(f"logs under {root}/logs")
        args.keep = True
    finally:
        cleanup()
        if args.keep or args.workdir or code != 0:
            say(f"state and logs kept under {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
