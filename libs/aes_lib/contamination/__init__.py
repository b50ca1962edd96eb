"""Contamination gate library: held-out sources, tokenization and the n-gram index."""

from aes_lib.contamination.heldout import HeldoutFormatError, HeldoutTask, load_heldout
from aes_lib.contamination.index import DEFAULT_N, IndexFormatError, Match, NgramIndex
from aes_lib.contamination.tokenize import TOKENIZER_NAME, tokens

__all__ = [
    "DEFAULT_N",
    "HeldoutFormatError",
    "HeldoutTask",
    "IndexFormatError",
    "Match",
    "NgramIndex",
    "TOKENIZER_NAME",
    "load_heldout",
    "tokens",
]
