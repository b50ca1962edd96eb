"""Every ``aes`` command builds the whole argument parser, so every command module is imported on
each call: none may pull in torch, transformers or matplotlib at import (seconds each, and
matplotlib builds a font cache in a fresh container), only the command that needs them."""

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "matplotlib")


def test_the_cli_starts_without_the_heavy_libraries() -> None:
    code = ("import json, sys\nfrom aes_cli.main import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.splitlines()[-1]) == []
