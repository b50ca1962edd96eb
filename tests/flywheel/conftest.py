import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(_TESTS / "replay"), str(_TESTS / "models")]

from local_model import local_model_url  # noqa: E402,F401  (fixture)
