import json
from pathlib import Path


def test_report_and_nothing_else():
    assert json.loads(Path("/app/report.json").read_text()) == {"count": 4, "max": 230}
    # The verifier's image never had the agent's input: only the artifact was carried in.
    assert not Path("/app/readings.txt").exists()
