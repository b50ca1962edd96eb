"""The built-in families: short tasks whose difficulty a small policy can climb one step at a time.

Each writes its answer as data (files the tests read) and checks one unit per test, so the
reward is the fraction of units right and a partly right answer earns partial credit.
"""

from __future__ import annotations

import random
import string

from aes_lib.families.base import Family, Params, TaskSpec

VOCABULARY = (
    "apple", "banana", "cherry", "grape", "lemon", "mango", "melon", "olive", "peach", "pear", "plum", "berry",
    "river", "stone", "cloud", "forest", "candle", "window", "garden", "silver", "rocket", "pencil", "violet",
    "tiger", "otter", "falcon", "maple", "cedar", "harbor", "meadow", "copper", "marble",
)
"""Lower-case words, distinct, no shell or regex metacharacters."""

ANSWER = "/app/answer.txt"


def _tests(doc: str, data: dict[str, object], body: str) -> str:
    """A pytest file: the docstring, the expected data as literals, then the checks."""
    consts = "\n".join(f"{k} = {v!r}" for k, v in data.items())
    return f'"""{doc}"""\n\nfrom pathlib import Path\n\nimport pytest\n\n{consts}\n\n{body.strip()}\n'


_ANSWER_LINES = f'''
ANSWER = Path("{ANSWER}")


def lines():
    assert ANSWER.is_file(), f"{{ANSWER}} was not written"
    return [line.strip() for line in ANSWER.read_text().splitlines() if line.strip()]
'''


class EchoWords(Family):
    name = "echo-words"
    summary = "write the given words to a file, one per line, in order (difficulty = number of words)"
    max_difficulty = 8

    def spec(self, difficulty: int, rng: random.Random) -> TaskSpec:
        words = rng.sample(VOCABULARY, difficulty)
        listing = "\n".join(f"{i}. `{w}`" for i, w in enumerate(words, 1))
        noun = "word" if difficulty == 1 else f"{difficulty} words"
        return TaskSpec(
            instruction=f"Create the file `{ANSWER}` containing the following {noun}, one per line, "
                        f"in this order and nothing else:\n\n{listing}\n",
            description=f"Write {difficulty} given word(s) to a file, one per line.",
            solution=f"printf '%s\\n' {' '.join(words)} > {ANSWER}",
            near_miss=f"echo {' '.join(words)} > {ANSWER}",  # one line: right for one word only
            tests=_tests("Each word on its own line, in order; no other lines.", {"WORDS": words}, _ANSWER_LINES + '''

@pytest.mark.parametrize("index", range(len(WORDS)))
def test_word_in_place(index):
    got = lines()
    assert index < len(got) and got[index] == WORDS[index]


def test_nothing_else():
    assert len(lines()) == len(WORDS)
'''),
        )


class PickFirst(Family):
    name = "pick-first"
    summary = ("write the first of a list of difficulty + 1 words: the skill is the same at every "
               "length, the control for a curriculum")
    max_difficulty = 8
    curriculum = False

    def spec(self, difficulty: int, rng: random.Random) -> TaskSpec:
        words = rng.sample(VOCABULARY, difficulty + 1)
        listing = "\n".join(f"{i}. `{w}`" for i, w in enumerate(words, 1))
        return TaskSpec(
            instruction=f"Create the file `{ANSWER}` containing only the first of the following words, on one "
                        f"line and nothing else:\n\n{listing}\n",
            description=f"Write the first of {len(words)} given words to a file.",
            solution=f"printf '%s\\n' {words[0]} > {ANSWER}",
            tests=_tests("The first word alone.", {"WORDS": words}, _ANSWER_LINES + '''

def test_first_word():
    got = lines()
    assert got and got[0] == WORDS[0]


def test_nothing_else():
    assert len(lines()) == 1
'''),
        )


class ReverseText(Family):
    name = "reverse-text"
    summary = "write a random string reversed (difficulty = length - 2)"
    max_difficulty = 8

    def spec(self, difficulty: int, rng: random.Random) -> TaskSpec:
        text = "".join(rng.choice(string.ascii_lowercase) for _ in range(difficulty + 2))
        expected = text[::-1]
        return TaskSpec(
            instruction=f"Write the string `{text}` reversed (its characters in the opposite order) to the file "
                        f"`{ANSWER}`, as a single line.\n",
            description=f"Reverse a {len(text)}-character string into a file.",
            solution=f"echo {expected} > {ANSWER}",
            tests=_tests("The reversed string, checked character by character.", {"EXPECTED": expected},
                         _ANSWER_LINES + '''

@pytest.mark.parametrize("index", range(len(EXPECTED)))
def test_character(index):
    got = lines()
    assert got and index < len(got[0]) and got[0][index] == EXPECTED[index]


def test_whole_answer():
    assert lines() == [EXPECTED]
'''),
        )


class MakeFiles(Family):
    name = "make-files"
    summary = "create named files holding given numbers (difficulty = number of files)"
    max_difficulty = 6

    def spec(self, difficulty: int, rng: random.Random) -> TaskSpec:
        files = {f"{w}.txt": str(rng.randrange(1000)) for w in rng.sample(VOCABULARY, difficulty)}
        listing = "\n".join(f"- `/app/out/{name}` containing `{value}`" for name, value in files.items())
        writes = "\n".join(f"echo {value} > /app/out/{name}" for name, value in files.items())
        return TaskSpec(
            instruction=f"Create the directory `/app/out` holding exactly these files, each containing the given "
                        f"number on one line:\n\n{listing}\n",
            description=f"Create {difficulty} file(s) with given contents.",
            solution=f"mkdir -p /app/out\n{writes}",
            tests=_tests("Each file with its number; no other files in /app/out.", {"FILES": files}, '''
OUT = Path("/app/out")


@pytest.mark.parametrize("name", sorted(FILES))
def test_file_holds_its_number(name):
    path = OUT / name
    assert path.is_file(), f"{path} was not written"
    assert path.read_text().strip() == FILES[name]


def test_no_other_files():
    assert OUT.is_dir() and sorted(p.name for p in OUT.iterdir()) == sorted(FILES)
'''),
        )


LADDER_STEPS = (("alpha", "red", "blue"), ("bravo", "cat", "dog"), ("delta", "gold", "iron"),
                ("gamma", "north", "south"), ("kappa", "left", "right"), ("sigma", "salt", "sugar"),
                ("omega", "rain", "snow"), ("theta", "king", "lord"), ("lambda", "day", "night"),
                ("zeta", "hot", "cold"))
"""The ladder's steps in order: (key, the word asked for, the other word). Each step chooses between
two words of its own. A first ladder had every step choose a separator (``=`` or ``:``,
alternating): settling one step pushed its separator into the next and broke it (level 3 from
0.58 to 0.96 took level 4 from 0.21 to 0.04), so the steps were not independent decisions."""


def _printf(lines: list[str]) -> str:
    return f"printf '%s\\n' {' '.join(lines)} > {ANSWER}"


class Ladder(Family):
    name = "ladder"
    summary = ("write one settings line per step, each step's key with the word asked for, all or "
               "nothing (difficulty = steps): a level passes at about the product of its steps' rates")
    max_difficulty = len(LADDER_STEPS)
    """Lines after a level's are not checked, so where to stop is no decision shared by the levels:
    when a level had to end after its last line, pilot 5's oracle, trained at level 3 alone, learned
    to stop after 3 lines and took level 4 from 0.31 to 0 (and level 2 to 0.25)."""

    def spec(self, difficulty: int, rng: random.Random) -> TaskSpec:
        del rng  # the seed changes no text: see ``entries``
        entries = self.entries(difficulty)
        listing = "\n".join(f"{i}. `{e}`" for i, e in enumerate(entries, 1))
        return TaskSpec(
            instruction=f"Create the file `{ANSWER}` whose first {difficulty} line(s) are exactly these, character "
                        f"for character, in this order (lines after them are not checked):\n\n{listing}\n",
            description=f"Write {difficulty} settings line(s) to a file.",
            solution=_printf(entries),
            near_miss=_printf(self.entries(difficulty, wrong=frozenset({difficulty - 1}))),  # the last step's word
            tests=_tests("Every listed line exactly, first and in order: one test, so the reward is all or nothing. "
                         "Later lines are not checked.",
                         {"ENTRIES": entries}, _ANSWER_LINES + '''

def test_every_line():
    assert lines()[:len(ENTRIES)] == ENTRIES
'''),
        )

    @staticmethod
    def entries(difficulty: int, wrong: frozenset[int] = frozenset()) -> list[str]:
        """The first ``difficulty`` steps' lines; the steps in ``wrong`` with their other word. The
        words are fixed: the seed changes no text. A pilot with a digit drawn per seed found the
        2-layer bootstrap copying it at chance (level 1 at 0.06), which buried the steps'
        decisions under copying noise; the ladder measures which steps a policy settles, not
        copying, so every instance of a level asks the same lines."""
        return [f"{key}={other if i in wrong else word}"
                for i, (key, word, other) in enumerate(LADDER_STEPS[:difficulty])]

    def lesson(self, seed: int, levels: int, near_miss_share: float, draw: random.Random,
               miss: random.Random) -> tuple[str, str]:
        """Every difficulty is shown, the first ``levels`` steps always right and each later one
        wrong for ``near_miss_share`` of the examples: the start solves the first ``levels``
        difficulties and has seen every later step both ways, so level d passes at about
        (1 - share) ** (d - levels) and RL can settle one step at a time. At a share of 0.5 the
        levels far above the frontier kept a spread (level 5 at 0.12, passed in groups of 8), and
        one lucky pass there taught many steps at once: pilot 6's static pool climbed faster than
        the oracle, so nothing made the frontier matter."""
        d = draw.randint(self.min_difficulty, self.max_difficulty)
        wrong = frozenset(i for i in range(levels, d) if miss.random() < near_miss_share)
        return self.instance(Params(d, seed)).instruction, _printf(self.entries(d, wrong))


BUILTIN: tuple[Family, ...] = (EchoWords(), ReverseText(), MakeFiles(), PickFirst(), Ladder())
