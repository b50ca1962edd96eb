"""``deploy/images/secrets.sh``: the NATS password it writes is one nats-server's config accepts.

compose's nats.conf takes the password as ``$AES_NATS_PASSWORD``, which nats-server expands and
then parses as a config value: a token that starts with '-' or with digits is read as a number or
a date, and the server exits at start (CI met one: "Expected a digit but got 'n'")."""

import os
import subprocess
from pathlib import Path

from aes_ops.localinfra import find_binary

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "images"


def _valid(password: str) -> bool:
    check = subprocess.run([find_binary("nats-server"), "-c", str(DEPLOY / "nats.conf"), "-t"],
                           env=dict(os.environ, AES_NATS_USER="aes", AES_NATS_PASSWORD=password),
                           capture_output=True, text=True, timeout=30)
    return check.returncode == 0


def test_the_config_refuses_what_a_bare_token_can_start_with() -> None:
    # Why the generator leads with letters: these are token_urlsafe shapes nats-server refused.
    assert not any(map(_valid, ["-B2475FOZKn5f1BFN2jauSIiXm3QWYsE", "18-pWHqNTraaTP4wnyTe9jyuWXdsDtJ5"]))
    assert _valid("aes-B2475FOZKn5f1BFN2jauSIiXm3QWYsE") and _valid("aes18-pWHqNTraaTP4wnyTe9jyuWXdsDtJ5")


def test_every_generated_password_starts_with_a_letter_and_is_accepted(tmp_path) -> None:
    # 20 runs: a bare token starts with a letter 52 times in 64, so all 20 would by chance 1.6% of the time.
    for i in range(20):
        env_file = tmp_path / f"secrets-{i}.env"
        subprocess.run(["bash", str(DEPLOY / "secrets.sh"), str(env_file)], check=True, capture_output=True,
                       timeout=60)
        values = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
        password = values["AES_NATS_PASSWORD"]
        assert password[0].isalpha() and len(password) >= 32, password
    assert _valid(password)
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"
