from intervals import gaps, merge, total_length


def test_merge_overlapping():
    assert merge([(3, 6), (1, 4)]) == [(1, 6)]


def test_merge_keeps_disjoint():
    assert merge([(1, 2), (5, 6)]) == [(1, 2), (5, 6)]


def test_total_length():
    assert total_length([(0, 10), (5, 15)]) == 15


def test_gaps_simple():
    assert gaps([(2, 3)], 0, 10) == [(0, 2), (3, 10)]
