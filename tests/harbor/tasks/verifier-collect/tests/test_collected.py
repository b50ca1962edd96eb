from pathlib import Path


def test_the_collect_hook_saw_the_queue():
    # Written by [[verifier.collect]] after the agent's turn, not by the agent.
    assert Path("/srv/collected/queue.txt").read_text().split() == ["a", "b", "c"]
