"""Shared pieces of the learner tests: a tiny random-init Llama and a recording context."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from aes_lib.blobstore import BlobStore
from aes_lib.config import Settings

VOCAB = 16
"""Digits 0-9 are tokens 0-9; 10 = BOS, 11 = SEP, 12 = EOS; 13-15 unused."""
BOS, SEP, EOS = 10, 11, 12


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=32,
                      bos_token_id=BOS, eos_token_id=EOS, pad_token_id=EOS, tie_word_embeddings=False)
    return LlamaForCausalLM(cfg).float()


@dataclass
class RecordingContext:
    """The service ``Context`` over a real blob store; published messages are kept in order
    instead of going to NATS (the bus runner is tested with the bus)."""

    settings: Settings
    blobs: BlobStore
    published: list = field(default_factory=list)

    async def publish(self, subject, msg) -> None:
        self.published.append((subject, msg))

    async def kv(self, bucket):
        raise NotImplementedError("the learner uses no KV bucket")
