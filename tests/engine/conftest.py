"""Tiny models shared by the engine tests (hidden 32, 2–3 layers: each forward is ~1 ms)."""

from __future__ import annotations

import pytest
import torch
from torch import nn


def tiny_qwen2(attn: str = "sdpa", layers: int = 3, seed: int = 0) -> nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attn_implementation=attn,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(cfg).eval()


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(2 * d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc2(self.act(self.fc1(self.norm(x))))
        scores = torch.softmax(h @ h.transpose(-1, -2), dim=-1)  # functional matmul + softmax
        return x + torch.bmm(scores, h)


class TinyNet(nn.Module):
    """A plain torch model: a ModuleList of 3 blocks and a head."""

    def __init__(self, d: int = 16, n: int = 3) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))
        self.head = nn.Linear(d, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        return self.head(x)


@pytest.fixture(params=["sdpa", "eager"])
def qwen(request: pytest.FixtureRequest) -> nn.Module:
    return tiny_qwen2(request.param)


@pytest.fixture
def ids() -> torch.Tensor:
    return torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))


@pytest.fixture
def tiny_net() -> nn.Module:
    torch.manual_seed(0)
    return TinyNet()


@pytest.fixture
def make_qwen():
    """Factory fixture: ``make_qwen(attn="sdpa", layers=3)``."""
    return tiny_qwen2


def set_checkpointing(model: nn.Module, on: bool) -> None:
    """Switch transformers' gradient checkpointing (non-reentrant) on or off, quietly."""
    import warnings

    model.zero_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if on:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_disable()
