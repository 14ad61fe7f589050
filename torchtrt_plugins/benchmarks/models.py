"""The models the benchmarks run, written the way people write them: the decoder block of the model benchmark
(``bench_model``) and the long-tail model of the Inductor switch's benchmark (``inductor_switch``).

``LlamaRMSNorm`` follows Hugging Face's line for line, since the lowering must recognize exactly what it produces.
``LlamaDecoderBlock`` is a pre-norm transformer block with two norms around a plain softmax attention and a SwiGLU
MLP; the lowering tests build it with each RMSNorm style they cover. ``LongTail`` holds ops no converter takes, for
the Inductor plugins' tests of every tier and their benchmark.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


class LlamaRMSNorm(nn.Module):
    """Hugging Face ``LlamaRMSNorm``: upcast, normalize, cast back to the input dtype, then weight."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def randomize_norm_weight(module: nn.Module, seed: int) -> nn.Module:
    """``module`` with its weight (where it has one) drawn near 1 from ``seed``: all ones would hide a weight bug."""
    if module.weight is not None:
        with torch.no_grad():
            size = module.weight.shape[0]
            module.weight.copy_(1 + 0.5 * torch.randn(size, generator=torch.Generator().manual_seed(seed)))
    return module


class LlamaDecoderBlock(nn.Module):
    """Pre-norm decoder block: ``h = x + attn(norm(x)); out = h + mlp(norm(h))``; ``norm(hidden_size, eps)`` makes
    each RMSNorm."""

    def __init__(
        self,
        hidden_size: int = 64,
        num_heads: int = 4,
        intermediate_size: int = 128,
        norm: Callable[[int, float], nn.Module] = LlamaRMSNorm,
        eps=1e-6,
    ):
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(
                f"LlamaDecoderBlock: 'hidden_size' ({hidden_size}) must be a multiple of 'num_heads' ({num_heads})"
            )
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.input_layernorm = randomize_norm_weight(norm(hidden_size, eps), seed=1)
        self.post_attention_layernorm = randomize_norm_weight(norm(hidden_size, eps), seed=2)
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (
            nn.Linear(hidden_size, hidden_size, bias=False) for _ in range(4)
        )
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(self.q_proj(x)), self._heads(self.k_proj(x)), self._heads(self.v_proj(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        attended = torch.matmul(torch.softmax(scores.float(), dim=-1).to(q.dtype), v)
        return self.o_proj(attended.transpose(1, 2).reshape(x.shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.input_layernorm(x))
        normed = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(normed)) * self.up_proj(normed))


class LongTail(nn.Module):
    """Ops no converter takes in Torch-TensorRT 2.13 with us (special.erfcx, logcumsumexp, bucketize) between ops it
    converts."""

    def __init__(self):
        super().__init__()
        self.register_buffer("boundaries", torch.linspace(-2.0, 2.0, 9))

    def forward(self, x):
        h = torch.tanh(x * 1.5)
        values = torch.logcumsumexp(torch.special.erfcx(h), 1)
        buckets = torch.bucketize(values, self.boundaries).to(torch.float32)
        return torch.relu(values + buckets) * 0.5
