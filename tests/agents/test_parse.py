"""Reading actions out of model replies, including a tiny model's junk."""

from aes_lib.agents.parse import DONE_MARKER, parse_action
from aes_lib.text import truncate


def test_fenced_command():
    a = parse_action("I will look around.\n```bash\nls -la /app\n```\nthen continue")
    assert a.command == "ls -la /app" and not a.done and not a.error


def test_plain_fence_and_multiline_command():
    a = parse_action("```\ncd /app &&\n  make\n```")
    assert a.command == "cd /app &&\n  make"


def test_done_marker_plain_and_fenced():
    assert parse_action(f"All finished. {DONE_MARKER}").done
    assert parse_action(f"```bash\necho {DONE_MARKER}\n```").done


def test_junk_is_a_format_error():
    for junk in ["", "Sure! Here is how to do it.", "```\n\n```\n```\n```", "```python\nprint(1)"]:
        a = parse_action(junk)
        assert a.error.startswith("No command found") and not a.command and not a.done, junk


def test_two_commands_are_refused():
    a = parse_action("```bash\nls\n```\n```bash\npwd\n```")
    assert "2 command blocks" in a.error and not a.command


def test_truncate_keeps_head_and_tail():
    text = "H" * 1000 + "T" * 1000
    out = truncate(text, 300)
    assert out.startswith("H" * 200) and out.endswith("T" * 100) and "1700 characters elided" in out
    assert truncate("short", 300) == "short"
