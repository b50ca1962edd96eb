"""Build the task's repository: 14 commits with fixed dates; commit 9 quietly breaks slugify."""

import os
import subprocess
from pathlib import Path

REPO = Path("/app/repo")
IDENTITY = {"GIT_AUTHOR_NAME": "Sam Lee", "GIT_AUTHOR_EMAIL": "sam@example.com",
            "GIT_COMMITTER_NAME": "Sam Lee", "GIT_COMMITTER_EMAIL": "sam@example.com"}

HEADER = '"""Small text helpers."""\n\nimport re\nimport unicodedata\n\n'
SLUG_V1 = '''
def slugify(text):
    """Lower-case ASCII slug: runs of other characters become one dash, no dash at either end."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
'''
SLUG_V2 = '''
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text):
    """Lower-case ASCII slug: runs of other characters become one dash, no dash at either end."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return _NON_ALNUM.sub("-", text.lower()).strip("-")
'''
SLUG_BAD = SLUG_V2.replace('r"[^a-z0-9]+"', 'r"[^a-z0-9]"')
TRUNC_V1 = '''

def truncate(text, width):
    """Cut ``text`` to at most ``width`` characters."""
    return text[:width]
'''
TRUNC_V2 = '''

def truncate(text, width, ellipsis="..."):
    """Cut ``text`` to at most ``width`` characters, ending in ``ellipsis`` when cut."""
    if len(text) <= width:
        return text
    return text[: max(width - len(ellipsis), 0)] + ellipsis
'''
WORDS = '''

def word_count(text):
    """Number of whitespace-separated words."""
    return len(text.split())
'''
TITLE = '''

def titlecase(text):
    """Capitalise every word, keeping small words lower case unless first."""
    small = {"a", "an", "and", "of", "the", "to"}
    words = text.lower().split()
    return " ".join(w if i and w in small else w.capitalize() for i, w in enumerate(words))
'''
CAMEL = '''

def camel_to_snake(name):
    """``HTTPServerError`` -> ``http_server_error``."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\\1_\\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\\1_\\2", name).lower()
'''
TESTS = '''from textutils import slugify, truncate


def test_slugify_basic():
    assert slugify("Hello, World!") == "hello-world"


def test_slugify_accents():
    assert slugify("Crème brûlée") == "creme-brulee"


def test_truncate():
    assert truncate("abcdef", 3) == "abc"
'''


def module(*parts):
    return HEADER + "".join(parts).lstrip("\n")


HISTORY = [
    ("add slugify", {"textutils.py": module(SLUG_V1.replace('    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()\n', ""))}),
    ("add truncate", {"textutils.py": module(SLUG_V1.replace('    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()\n', ""), TRUNC_V1)}),
    ("add README", {"README.md": "# textutils\n\nSmall text helpers: slugify, truncate.\n"}),
    ("slugify: fold accents to ASCII", {"textutils.py": module(SLUG_V1, TRUNC_V1)}),
    ("add word_count", {"textutils.py": module(SLUG_V1, TRUNC_V1, WORDS)}),
    ("refactor: precompile the slug pattern", {"textutils.py": module(SLUG_V2, TRUNC_V1, WORDS)}),
    ("add tests", {"tests/test_textutils.py": TESTS}),
    ("docs: mention word_count", {"README.md": "# textutils\n\nSmall text helpers: slugify, truncate, word_count.\n"}),
    ("perf: simplify slug pattern", {"textutils.py": module(SLUG_BAD, TRUNC_V1, WORDS)}),
    ("add titlecase", {"textutils.py": module(SLUG_BAD, TRUNC_V1, WORDS, TITLE)}),
    ("add CHANGELOG", {"CHANGELOG.md": "## 0.2\n- titlecase\n- faster slugify\n"}),
    ("truncate: optional ellipsis", {"textutils.py": module(SLUG_BAD, TRUNC_V2, WORDS, TITLE),
                                     "tests/test_textutils.py": TESTS.replace('truncate("abcdef", 3) == "abc"', 'truncate("abcdef", 5) == "ab..."')}),
    ("add camel_to_snake", {"textutils.py": module(SLUG_BAD, TRUNC_V2, WORDS, TITLE, CAMEL)}),
    ("release 0.3", {"VERSION": "0.3.0\n"}),
]


def main():
    subprocess.run(["git", "init", "-q", "-b", "main", str(REPO)], check=True)
    for day, (message, files) in enumerate(HISTORY, start=1):
        for name, content in files.items():
            (REPO / name).parent.mkdir(parents=True, exist_ok=True)
            (REPO / name).write_text(content)
        stamp = f"2024-05-{day:02d}T09:00:00+00:00"
        env = {**os.environ, **IDENTITY, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        subprocess.run(["git", "add", "-A"], cwd=REPO, check=True)
        subprocess.run(["git", "commit", "-q", "-m", message], cwd=REPO, check=True, env=env)


main()
