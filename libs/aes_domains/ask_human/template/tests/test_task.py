from pathlib import Path


def test_greeting_word():
    assert Path("/app/greeting.txt").read_text().startswith("welcome back, ")


def test_customer_name():
    assert Path("/app/greeting.txt").read_text().endswith(", Ada Lovelace\n")
