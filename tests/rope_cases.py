"""Hugging Face's rotary embedding as transformers writes it, for the rotary_embedding tests of every tier."""

from __future__ import annotations

import torch


def hf_rotary(q: torch.Tensor, positions: torch.Tensor, dim: int, base: float) -> torch.Tensor:
    """Hugging Face's Llama rotary embedding (LlamaRotaryEmbedding + apply_rotary_pos_emb) on q (tokens, heads, dim),
    written out here as transformers writes it, in fp32."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    return q * cos + rotate_half(q) * sin
