"""The one tokenization that contamination checks use, on both sides of the comparison.

``tokens(text)``:

1. Unicode NFKC normalization (so full-width letters, ligatures and compatibility
   forms compare equal to their plain spelling);
2. ``str.casefold()`` (aggressive lower-casing: ``"Straße"`` -> ``"strasse"``);
3. the word tokens are the maximal runs matched by Python's Unicode-aware regex
   ``\\w+``: letters, digits and the underscore of any script. Everything else
   (punctuation, whitespace, symbols, markdown) only separates tokens and is dropped.

So ``"Write `/app/out.txt`, then RUN it!"`` -> ``write app out txt then run it``.
The n-gram text reported for a match is its tokens joined by single spaces.

``token_bytes(text)`` is the same list UTF-8 encoded, the form the index matches on.
On ASCII text it skips the Unicode steps, which change nothing there: word bytes are
``[A-Za-z0-9_]``, lower-cased.
"""

from __future__ import annotations

import re
import unicodedata

TOKENIZER_NAME = "nfkc-casefold-regex-w+"
"""Recorded in every index so that an index built another way is refused."""

_WORD = re.compile(r"\w+")
# ASCII text is NFKC-stable, its casefold is lower() and its \w is [A-Za-z0-9_]: one byte table
# (word bytes lower-cased, every other byte a space) then split() gives the same tokens, ~3x faster.
_ASCII_TABLE = bytes(ord(chr(c).lower()) if c < 128 and (chr(c).isalnum() or c == 95) else 32 for c in range(256))


def tokens(text: str) -> list[str]:
    """Word tokens of ``text`` as documented in the module docstring."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def token_bytes(text: str) -> list[bytes]:
    """``tokens(text)``, each UTF-8 encoded."""
    if text.isascii():
        return text.encode().translate(_ASCII_TABLE).split()
    return [t.encode() for t in tokens(text)]
