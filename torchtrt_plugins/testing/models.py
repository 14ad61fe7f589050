"""Small models written the way people write them, for lowering tests and benchmarks.

The RMSNorm variants follow their originals line for line (Hugging Face ``LlamaRMSNorm`` and
``T5LayerNorm``, ...), since the lowering must recognize exactly what those produce.
``LlamaDecoderBlock`` is a pre-norm transformer block with two norms around a plain softmax
attention and a SwiGLU MLP.
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
    module = RMS_NORMS[style](hidden_size, eps)
    if module.weight is not None:
        with torch.no_grad():
            module.weight.copy_(1 + 0.5 * torch.randn(hidden_size, generator=torch.Generator().manual_seed(seed)))
    return module


class LlamaDecoderBlock(nn.Module):
    """Pre-norm decoder block: ``h = x + attn(norm(x)); out = h + mlp(norm(h))``."""

    def __init__(
        self, hidden_size: int = 64, num_heads: int = 4, intermediate_size: int = 128, norm: str = "llama", eps=1e-6
    ):
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(
                f"LlamaDecoderBlock: 'hidden_size' ({hidden_size}) must be a multiple of 'num_heads' ({num_heads})"
            )
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.input_layernorm = make_rms_norm(norm, hidden_size, eps, seed=1)
        self.post_attention_layernorm = make_rms_norm(norm, hidden_size, eps, seed=2)
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
