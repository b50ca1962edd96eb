from pathlib import Path


def test_answer_is_the_word():
    answer = Path("/app/answer.txt")
    assert answer.is_file() and answer.read_text().strip() == "banana"
