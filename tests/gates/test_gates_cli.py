"""``aes contamination index`` and ``check`` from the command line."""

from __future__ import annotations

import asyncio
import json

from aes_cli.main import main

HELDOUT = "Write a bash script that rotates the nginx access logs every night and compresses the old ones with gzip."
COPY = "Task: write a bash script that rotates the nginx access logs every night and compresses them."
CLEAN = "Sort the numbers in /app/in.txt and write them to /app/out.txt."


def _sources(tmp_path):
    held = tmp_path / "held.jsonl"
    held.write_text(json.dumps({"id": "tb/rotate", "instruction": HELDOUT}) + "\n")
    cands = tmp_path / "cands"
    for name, text in [("copy", COPY), ("clean", CLEAN)]:
        (cands / name).mkdir(parents=True)
        (cands / name / "instruction.md").write_text(text)
    return held, cands


def test_index_file_then_check_flags_the_copy(tmp_path, capsys):
    held, cands = _sources(tmp_path)
    assert main(["contamination", "index", str(held), "--out", str(tmp_path / "ix.bin")]) == 0
    assert main(["contamination", "check", str(cands), "--index", str(tmp_path / "ix.bin")]) == 1
    out = capsys.readouterr().out
    assert "CONTAMINATED copy: token 1 shares 'write a bash script that rotates the nginx access logs every night and'" in out
    assert "with held-out tb/rotate" in out and "2 checked against 1 held-out instructions (13-grams): 1 contaminated" in out
    assert main(["contamination", "check", str(cands / "clean"), "--index", str(tmp_path / "ix.bin")]) == 0


def test_registered_index_is_used_by_default(tmp_path, capsys, monkeypatch, fresh_nats):
    for field in ("nats_url", "nats_user", "nats_password", "blob_url"):
        monkeypatch.setenv(f"AES_{field.upper()}", str(getattr(fresh_nats, field)))
    held, cands = _sources(tmp_path)
    assert main(["contamination", "check", str(cands), "--index", str(tmp_path / "missing.bin")]) == 2
    assert main(["contamination", "check", str(cands)]) == 2
    assert "no index registered" in capsys.readouterr().err
    assert main(["contamination", "index", str(held)]) == 0
    assert "registered for the gate" in capsys.readouterr().out
    assert main(["contamination", "check", str(cands / "copy" / "instruction.md")]) == 1


def test_bad_source_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "bad.jsonl").write_text('{"id": 3}\n')
    assert main(["contamination", "index", str(tmp_path / "bad.jsonl"), "--out", str(tmp_path / "x")]) == 2
    assert "bad.jsonl:1:" in capsys.readouterr().err


def test_status_names_what_the_index_covers_and_add_extends_it(tmp_path, capsys, monkeypatch, fresh_nats):
    from aes_lib.config import Settings
    from aes_ops import contamination
    from aes_ops.connect import with_bus

    for field in ("nats_url", "nats_user", "nats_password", "blob_url"):
        monkeypatch.setenv(f"AES_{field.upper()}", str(getattr(fresh_nats, field)))
    assert asyncio.run(with_bus("test", contamination.register_default, Settings.from_env()))
    assert main(["contamination", "status"]) == 0
    out = capsys.readouterr().out
    assert "covers: Terminal-Bench core 0.1.1 (80 instructions): laude-institute/terminal-bench-leaderboard @ " in out
    assert "not covered: Terminal-Bench 2.1, Terminal-Bench 4.0, HiL-Bench" in out and "--add 'NAME VERSION'" in out
    held = tmp_path / "tb21"
    (held / "rotate").mkdir(parents=True)
    (held / "rotate" / "instruction.md").write_text(HELDOUT)
    _, cands = _sources(tmp_path)
    assert main(["contamination", "check", str(cands / "copy")]) == 0
    assert main(["contamination", "index", str(held), "--add", "Terminal-Bench 2.1",
                 "--repository", "example/tb-2.1", "--commit", "a" * 40]) == 0
    assert "added 1 held-out instructions of Terminal-Bench 2.1" in capsys.readouterr().out
    assert main(["contamination", "status"]) == 0
    out = capsys.readouterr().out
    assert "covers: Terminal-Bench core 0.1.1" in out and f"covers: Terminal-Bench 2.1: example/tb-2.1 @ {'a' * 40}" in out
    assert "not covered: Terminal-Bench 4.0, HiL-Bench" in out and "81 held-out instructions" in out
    assert main(["contamination", "check", str(cands)]) == 1  # the added benchmark is checked, the bundled still is
    assert "with held-out Terminal-Bench 2.1/rotate" in capsys.readouterr().out
    assert main(["contamination", "index", str(held), "--add", "Terminal-Bench 2.1"]) == 2
    assert "both indexes name held-out task 'Terminal-Bench 2.1/rotate'" in capsys.readouterr().err
    assert main(["contamination", "index", str(held), "--add", "X 1", "--out", str(tmp_path / "f")]) == 2
