"""RMSNorms and a decoder block written the way people write them, for the lowering tests.

The variants follow their originals line for line (Hugging Face ``LlamaRMSNorm`` and ``T5LayerNorm``, ...), since
the lowering must recognize exactly what those produce. The decoder block and ``LlamaRMSNorm`` ship with the model
benchmark (``torchtrt_plugins.benchmarks.models``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from torchtrt_plugins.benchmarks.models import LlamaDecoderBlock, LlamaRMSNorm, randomize_norm_weight


class WeightBeforeCastRMSNorm(nn.Module):
    """The weight multiplied in fp32, before the cast back (Gemma-like)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output = x.float()
        output = output * torch.rsqrt(output.pow(2).mean(-1, keepdim=True) + self.eps)
        return (output * self.weight.float()).type_as(x)


class GemmaRMSNorm(nn.Module):
    """Hugging Face ``GemmaRMSNorm``: everything in fp32, the weight as an offset from one, ``x * (1 + w)``."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(hidden_size))

    def _norm(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class DivSqrtRMSNorm(nn.Module):
    """``x / sqrt(mean(x * x) + eps) * weight``, no casts."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps) * self.weight


class T5LayerNorm(nn.Module):
    """Hugging Face ``T5LayerNorm``: only the variance is upcast; cast to a half weight's dtype."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class FunctionalRMSNorm(nn.Module):
    """``torch.nn.functional.rms_norm`` (``aten.rms_norm`` once exported); ``weight=False``: none (``None``)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6, weight: bool = True):
        super().__init__()
        self.normalized_shape = (hidden_size,)
        self.weight = nn.Parameter(torch.ones(hidden_size)) if weight else None
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)


#: RMSNorm styles by name: ``(hidden_size, eps) -> module``.
RMS_NORMS: dict[str, Callable[[int, float], nn.Module]] = {
    "llama": LlamaRMSNorm,
    "weight_before_cast": WeightBeforeCastRMSNorm,
    "div_sqrt": DivSqrtRMSNorm,
    "t5": T5LayerNorm,
    "functional": FunctionalRMSNorm,
    "nn": lambda hidden_size, eps: nn.RMSNorm(hidden_size, eps=eps),
    "gemma": GemmaRMSNorm,
    "functional_no_weight": lambda hidden_size, eps: FunctionalRMSNorm(hidden_size, eps, weight=False),
    "nn_no_weight": lambda hidden_size, eps: nn.RMSNorm(hidden_size, eps=eps, elementwise_affine=False),
}


def make_rms_norm(style: str, hidden_size: int, eps: float = 1e-6, seed: int = 0) -> nn.Module:
    """An RMSNorm of ``style`` (a key of ``RMS_NORMS``) with a random, not all-ones, weight (where it has one)."""
    if style not in RMS_NORMS:
        raise ValueError(f"make_rms_norm: 'style' must be one of {sorted(RMS_NORMS)}, got {style!r}")
    return randomize_norm_weight(RMS_NORMS[style](hidden_size, eps), seed)


def decoder_block(style: str, **kwargs) -> LlamaDecoderBlock:
    """The benchmark's decoder block with RMSNorms of ``style`` (a key of ``RMS_NORMS``)."""
    return LlamaDecoderBlock(norm=RMS_NORMS[style], **kwargs)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class DecoderBlock(nn.Module):
    """A decoder block with fused projections: pre-norm attention (causal SDPA, rotary embeddings) and SwiGLU MLP,
    each with a residual."""

    def __init__(self, hidden: int, heads: int, intermediate: int, max_seq: int = 4096):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.input_norm = LlamaRMSNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)
        self.post_attention_norm = LlamaRMSNorm(hidden)
        self.gate_up = nn.Linear(hidden, 2 * intermediate, bias=False)
        self.down = nn.Linear(intermediate, hidden, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(max_seq).float(), inv_freq)
        self.register_buffer("cos", torch.cat((angles, angles), -1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat((angles, angles), -1).sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        q, k, v = (
            t.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
            for t in self.qkv(self.input_norm(x)).chunk(3, dim=-1)
        )
        cos, sin = self.cos[:seq].to(x.dtype), self.sin[:seq].to(x.dtype)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        attention = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(attention.transpose(1, 2).reshape(batch, seq, hidden))
        gate, up = self.gate_up(self.post_attention_norm(x)).chunk(2, dim=-1)
        return x + self.down(nn.functional.silu(gate) * up)
