import pytest

from tsbucket import bucket_range, bucket_start, group_events, parse_width, rollup


@pytest.mark.parametrize("ts, width, start", [(0, 60, 0), (59, 60, 0), (60, 60, 60), (125, 60, 120),
                                              (1_700_000_123, 300, 1_700_000_100)])
def test_bucket_start(ts, width, start):
    assert bucket_start(ts, width) == start


@pytest.mark.parametrize("width", [0, -5, 1.5, True])
def test_bad_width(width):
    with pytest.raises(ValueError):
        bucket_start(10, width)


def test_bucket_range():
    assert bucket_range(100, 250, 60) == [60, 120, 180, 240]
    assert bucket_range(120, 180, 60) == [120]
    assert bucket_range(50, 50, 60) == []


def test_group_events_keeps_order():
    events = [(70, "b"), (5, "a"), (65, "c")]
    assert group_events(events, 60) == {0: ["a"], 60: ["b", "c"]}


def test_rollup_zero_fills():
    assert rollup([(5, 1.0), (130, 2.0), (10, 0.5)], 60) == [(0, 2, 1.5), (60, 0, 0.0), (120, 1, 2.0)]
    assert rollup([], 60) == []


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("5m", 300), ("2h", 7200), ("1d", 86400), ("45", 45)])
def test_parse_width(text, seconds):
    assert parse_width(text) == seconds


@pytest.mark.parametrize("text", ["", "0m", "5w", "-5m", "m"])
def test_parse_width_rejects(text):
    with pytest.raises(ValueError):
        parse_width(text)
