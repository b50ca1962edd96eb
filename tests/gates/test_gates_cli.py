"""``aes contamination index`` and ``check`` from the command line."""

from __future__ import annotations

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
