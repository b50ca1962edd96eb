"""``aes generate`` over all three modes on one recorded conversation, and ``aes solve``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from replay_server import ReplayServer
from test_baselines import GOOD

from aes_cli.main import main
from aes_lib.agents.proposer.files import format_files

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]


def test_generate_reports_rate_interval_and_cost(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AES_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("AES_BLOB_URL", raising=False)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"replay": [1000.0, 2000.0]}))  # make the cost visible
    monkeypatch.setenv("AES_MODEL_PRICES", str(prices))
    agent = json.loads((ROOT / "tests/replay/proposer_episode.json").read_text())["replies"]
    # One endpoint serves the proposer and, during `aes-tool solver`, the solver (one reply).
    replies = [format_files(GOOD), "not files", format_files(GOOD)] + agent[:10] + ["TASK_DONE"] + agent[10:]
    with ReplayServer(replies) as srv:
        rc = main(["generate", "--mode", "prompt,feedback,agent", "--n", "1", "--model-url", srv.url, "--model", "replay"])
    assert rc == 0 and not srv.errors and len(srv.requests) == len(replies)
    rows = {line.split("|")[1].strip(): line.split("|") for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ") and not line.startswith("| mode")}
    assert set(rows) == {"prompt", "feedback", "agent"}
    for mode, row in rows.items():
        assert row[3].strip() == "1", mode  # valid
        assert row[4].strip() == "1.00 [0.21, 1.00]", mode  # Wilson 95% for 1 of 1
        assert row[6].strip().startswith("$") and float(row[6].strip()[1:]) > 0, mode
        assert "ok 1" in row[9]
    assert rows["prompt"][5] == rows["prompt"][6]  # one valid: cost per valid = cost
    assert float(rows["feedback"][5].strip()[1:]) > float(rows["prompt"][5].strip()[1:])  # two calls


def test_generate_json_is_one_document_per_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AES_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("AES_BLOB_URL", raising=False)
    with ReplayServer([format_files(GOOD)]) as srv:
        rc = main(["generate", "--mode", "prompt", "--n", "1", "--model-url", srv.url, "--model", "replay", "--json"])
    out, err = capsys.readouterr()
    [row] = json.loads(out)
    assert rc == 0 and row["mode"] == "prompt" and row["n"] == 1 and row["valid"] == 1 and row["rate"] == 1.0
    assert row["reasons"] == {"ok": 1} and row["interval95"] == pytest.approx([0.21, 1.0], abs=0.01)
    assert "[generate 1/1] prompt 1/1: ok" in err.splitlines()  # progress on stderr, off a terminal


def test_generate_rejects_unknown_mode(capsys):
    with pytest.raises(SystemExit):
        main(["generate", "--mode", "prompt,oracle"])
    assert "modes are prompt, feedback, agent" in capsys.readouterr().err


def test_solve_prints_reward(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AES_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("AES_BLOB_URL", raising=False)
    seed = ROOT / "seeds" / "csv-sales-rollup"
    replies = ["```bash\nbash -c \"$(cat <<'X'\n" + (seed / "solution/solve.sh").read_text() + "X\n)\"\n```", "TASK_DONE"]
    with ReplayServer(replies) as srv:
        assert main(["solve", str(seed), "--model-url", srv.url, "--model", "replay"]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == "reward: 1"
    assert (tmp_path / "home" / "blobs").is_dir()


def test_generate_shows_earlier_tasks_to_later_agent_episodes(tmp_path, monkeypatch):
    """Two agent episodes: the second finds the first's valid task in past_environments/ (a
    "new" task must differ from it), where it used to start from a blank workspace."""
    monkeypatch.setenv("AES_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("AES_BLOB_URL", raising=False)
    agent = json.loads((ROOT / "tests/replay/proposer_episode.json").read_text())["replies"]
    second = ["```bash\nls past_environments\n```", "TASK_DONE"]
    replies = ["```bash\nls past_environments\n```"] + agent[:10] + ["TASK_DONE"] + agent[10:] + second
    with ReplayServer(replies) as srv:
        assert main(["generate", "--mode", "agent", "--n", "2", "--model-url", srv.url, "--model", "replay"]) == 0
    listings = [r["messages"][-1]["content"] for r in srv.requests
                if r["messages"][-2]["content"].endswith("ls past_environments\n```")]
    first, later = listings
    assert not re.search(r"[0-9a-f]{64}", first)
    assert len(re.findall(r"\b[0-9a-f]{64}\b", later)) == 1
