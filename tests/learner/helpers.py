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


def tiny_qwen2(seed: int = 0):
    """Qwen2-shaped (GQA, bias on q/k/v, tied embeddings)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      bos_token_id=BOS, eos_token_id=EOS, pad_token_id=EOS, tie_word_embeddings=True)
    return Qwen2ForCausalLM(cfg).float()


def tiny_qwen2_moe(seed: int = 0):
    """Qwen-MoE-shaped: routed experts (top-2 of 4) plus a shared expert in every layer."""
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2MoeConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                         shared_expert_intermediate_size=64, num_experts=4, num_experts_per_tok=2,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=EOS,
                         tie_word_embeddings=False)
    return Qwen2MoeForCausalLM(cfg).float()


def dppo_batch(seed: int = 0, groups: int = 2, size: int = 3, multi_turn: bool = True):
    """A batch of random solver groups (varied lengths, temperatures and sampler log-probs); with
    ``multi_turn``, the first member of each group is a 3-turn episode whose turns extend each other."""
    import random

    from aes_lib.learner import Batch, Group, Sample, TokenizedTurn
    from aes_lib.learner.advantages import centred

    rng = random.Random(seed)

    def turn(prompt):
        n = rng.randint(1, 4)
        return TokenizedTurn(tuple(prompt), tuple(rng.randrange(VOCAB) for _ in range(n)),
                             tuple(-rng.uniform(0.5, 4.0) for _ in range(n)), rng.choice([1.0, 0.7]))

    out = []
    for g in range(groups):
        samples = []
        for i in range(size):
            turns = [turn([BOS] + [rng.randrange(10) for _ in range(rng.randint(2, 6))] + [SEP])]
            for _ in range(2 if multi_turn and i == 0 else 0):
                prev = turns[-1]
                turns.append(turn(prev.prompt_ids + prev.completion_ids + (SEP, rng.randrange(10))))
            samples.append(Sample(f"g{g}-{i}", f"g{g}", "solver", float(rng.random()), tuple(turns)))
        out.append(Group(f"g{g}", "solver", tuple(samples), tuple(centred([s.reward for s in samples]))))
    return Batch("solver", tuple(out), dropped=0, evicted=0, carried_over=0)
