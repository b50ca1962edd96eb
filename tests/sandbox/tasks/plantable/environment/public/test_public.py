import sys

sys.path.insert(0, "/app")


def test_add():
    import calc

    assert calc.add(1, 2) == 3
