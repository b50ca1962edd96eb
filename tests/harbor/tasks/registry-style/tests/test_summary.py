from pathlib import Path


def test_sum_of_quantities():
    assert Path("/app/summary.txt").read_text() == "50\n"
