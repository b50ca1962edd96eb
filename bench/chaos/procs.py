"""The chaos suite's child processes: each in its own process group, logging to a file across
restarts, killed, stopped and continued on purpose, and all reaped (with the sandbox containers
they left) however the run ends."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


CHILDREN: list["Child"] = []
SPAWNED_PIDS: set[int] = set()
SPAWNED: list[subprocess.Popen] = []
"""Every process started, restarts included: cleanup reaps each group still alive."""


class Child:
    """One process in its own process group, logging to ``log`` (appended across restarts)."""

    def __init__(self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.name, self.argv, self.log, self.env, self.cwd = name, argv, log, env, cwd
        self.proc: subprocess.Popen | None = None
        self.stopped = False
        self.expected_down = False
        """Set while the harness has killed it and not yet restarted it."""
        self.starts = 0
        CHILDREN.append(self)

    def start(self) -> None:
        with self.log.open("ab") as f:
            f.write(f"\n===== chaos: start #{self.starts + 1} at {time.strftime('%H:%M:%S')}\n".encode())
            self.proc = subprocess.Popen(self.argv, stdout=f, stderr=subprocess.STDOUT, env=self.env,
                                         cwd=self.cwd, start_new_session=True)
        SPAWNED_PIDS.add(self.proc.pid)
        SPAWNED.append(self.proc)
        self.starts += 1
        self.expected_down = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the whole process group and reap it."""
        if self.proc is None:
            return
        self.expected_down = True
        if self.stopped:
            self.cont()
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)

    def stop(self) -> None:
        self.signal(signal.SIGSTOP)
        self.stopped = True

    def cont(self) -> None:
        self.signal(signal.SIGCONT)
        self.stopped = False

    def terminate(self, grace: float = 5.0) -> None:
        if not self.alive():
            return
        if self.stopped:
            self.cont()
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(grace)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            self.kill()

    def tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def cleanup() -> None:
    for c in reversed(CHILDREN):
        with contextlib.suppress(Exception):
            c.cont() if c.stopped else None
    for c in reversed(CHILDREN):
        with contextlib.suppress(Exception):
            c.terminate(grace=3.0)
    for proc in SPAWNED:  # anything a restart left behind
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
    _reap_containers()


def _reap_containers() -> None:
    """Remove sandbox containers created by our (now dead) service processes."""
    if not SPAWNED_PIDS:
        return
    try:
        import docker

        from aes_lib.sandbox.container import MANAGED_LABEL, OWNER_HOST_LABEL, OWNER_PID_LABEL

        client = docker.from_env()
        host = socket.gethostname()
        for c in client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=1"}, ignore_removed=True):
            if c.labels.get(OWNER_HOST_LABEL) == host and c.labels.get(OWNER_PID_LABEL, "").isdigit() \
                    and int(c.labels[OWNER_PID_LABEL]) in SPAWNED_PIDS:
                with contextlib.suppress(Exception):
                    c.remove(force=True)
    except Exception as e:  # cleanup is best effort
        say(f"container cleanup: {e}")


def _container_owners() -> set[int]:
    """Pids owning a running sandbox container on this host (the process is mid-message)."""
    try:
        import docker

        from aes_lib.sandbox.container import MANAGED_LABEL, OWNER_HOST_LABEL, OWNER_PID_LABEL

        client = docker.from_env()
        host = socket.gethostname()
        return {int(c.labels[OWNER_PID_LABEL])
                for c in client.containers.list(filters={"label": f"{MANAGED_LABEL}=1", "status": "running"},
                                                ignore_removed=True)
                if c.labels.get(OWNER_HOST_LABEL) == host and c.labels.get(OWNER_PID_LABEL, "").isdigit()}
    except Exception:
        return set()


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_until(check, what: str, child: Child, timeout: float = 60.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not child.alive():
            raise RuntimeError(f"{what} exited with {child.proc.returncode}:\n{child.tail(30)}")  # type: ignore[union-attr]
        with contextlib.suppress(Exception):
            if check():
                return time.monotonic() - t0
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {timeout:.0f}s:\n{child.tail(30)}")
