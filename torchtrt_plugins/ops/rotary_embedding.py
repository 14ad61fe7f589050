"""rotary_embedding(x, positions, rotary_dim, max_position, base=10000.0, is_neox=True): RoPE from a shared cache.

``x`` is ``(..., heads, head_dim)`` (vLLM's token-major layout: queries or keys of the tokens ``positions`` gives, one
position per token, ``positions.shape == x.shape[:-2]``); the first ``rotary_dim`` elements of each head rotate by the
angles ``p * base**(-2i / rotary_dim)``, the rest pass through. ``is_neox`` pairs element ``i`` with
``i + rotary_dim/2`` (GPT-NeoX, Llama: Hugging Face's ``rotate_half``), else ``2i`` with ``2i + 1`` (GPT-J). Positions
must lie in ``[0, max_position)`` (the kernel clamps others into it).

The cos/sin cache ``(max_position, rotary_dim)`` in fp32 is computed once per ``(max_position, rotary_dim, base)``
(:func:`cos_sin_cache`: fp32 angles as Hugging Face's, cos and sin rounded once), a shared resource of the declaration
(``declare(resources=...)``): every plugin instance of an engine with those fields reads one table, acquired through
TensorRT's plugin registry and freed with the last instance; the eager op keeps one per device. The rotation is in
fp32, rounded once. Launchers: ``csrc/kernels/rotary_embedding_launcher.cu``; the plugin is the generic one
(``CachedRotaryEmbedding`` v1: ``RotaryEmbedding`` is a standard ONNX op, which TensorRT's parser would
import instead).
"""

from __future__ import annotations

import torch

from ..declare import Range, Resource, declare
from ..spec import SpecError, Tolerance
from . import LIBRARY, define
from .rms_norm import FLOATS


def cos_sin_cache(max_position: int, rotary_dim: int, base: float, device=None) -> torch.Tensor:
    """The cache, ``(max_position, rotary_dim)`` fp32, cos then sin of each position's angles, exactly as the kernel
    builds it: each inverse frequency rounded once to fp32 from double (Hugging Face computes it in fp32: within an
    ulp), each angle the fp32 product of position and frequency (as Hugging Face's fp32 outer product), cos and sin
    rounded once from double."""
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.float64, device=device) / rotary_dim
    inv_freq = (1.0 / (float(base) ** exponents)).float()
    angles = torch.arange(max_position, dtype=torch.float32, device=device)[:, None] * inv_freq[None, :]
    return torch.cat((angles.double().cos(), angles.double().sin()), dim=-1).float()


def reference(
    x: torch.Tensor,
    positions: torch.Tensor,
    rotary_dim: int,
    max_position: int,
    base: float = 10000.0,
    is_neox: bool = True,
) -> torch.Tensor:
    """Plain torch RoPE in fp32, rounded once to x's dtype (what the kernel does)."""
    cache = cos_sin_cache(max_position, rotary_dim, base, x.device)[positions.long()]  # (..., rotary_dim)
    cos, sin = cache.chunk(2, dim=-1)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)  # over heads
    xf = x.float()
    rot, rest = xf[..., :rotary_dim], xf[..., rotary_dim:]
    if is_neox:
        x1, x2 = rot.chunk(2, dim=-1)
        rotated = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
        rotated = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    return torch.cat((rotated, rest), dim=-1).to(x.dtype)


def fake(
    x: torch.Tensor,
    positions: torch.Tensor,
    rotary_dim: int,
    max_position: int,
    base: float = 10000.0,
    is_neox: bool = True,
) -> torch.Tensor:
    """The op's shape rules, in the one place they are written (eager, validator and plugin derive from here)."""
    if x.dim() < 2:
        raise SpecError(
            f"torchtrt.rotary_embedding: argument 'x' must be (..., heads, head_dim), got shape {tuple(x.shape)}"
        )
    head_dim = x.shape[-1]
    if isinstance(head_dim, int) and (rotary_dim % 2 or rotary_dim > head_dim):  # where the sizes are concrete
        raise SpecError(
            f"torchtrt.rotary_embedding: argument 'rotary_dim' must be even and at most head_dim ({head_dim}), got "
            f"{rotary_dim}"
        )
    message = (
        f"torchtrt.rotary_embedding: argument 'positions' must have the leading dims of 'x' {tuple(x.shape[:-2])} "
        f"(one position per token), got {tuple(positions.shape)}"
    )
    if positions.dim() != x.dim() - 2:
        raise SpecError(message)
    for p, d in zip(positions.shape, x.shape[:-2], strict=True):
        torch._check_with(SpecError, p == d, lambda: message)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


_LIB = define(
    "rotary_embedding(Tensor x, Tensor positions, int rotary_dim, int max_position, float base=10000.0, "
    "bool is_neox=True) -> Tensor",
    fake,
    reference,
)

ROTARY_EMBEDDING = declare(
    "torchtrt::rotary_embedding",
    library=LIBRARY,
    plugin_name="CachedRotaryEmbedding",
    plugin_version="1",
    launcher="ttp::launchers::rotaryEmbedding",
    ranges={
        "rotary_dim": Range(min=2, max=4096, doc="even, at most head_dim: the rotated elements of each head"),
        "max_position": Range(min=1, max=2**22, doc="rows of the cos/sin cache; positions lie below it"),
        "base": Range(min=0.0, min_inclusive=False, doc="the frequencies' base (theta)"),
    },
    dtypes={"x": FLOATS, "positions": (torch.int64, torch.int32)},
    resources={
        "cos_sin": Resource(
            key_fields=("max_position", "rotary_dim", "base"),
            size="ttp::launchers::rotaryCacheBytes",
            init="ttp::launchers::rotaryCache",
            doc="(max_position, rotary_dim) fp32: cos then sin of each position's angles",
        )
    },
    reference=reference,
    tolerances={
        torch.float32: Tolerance(1e-5, 1e-5),
        torch.float16: Tolerance(2e-3, 2e-3),
        torch.bfloat16: Tolerance(1.6e-2, 1.6e-2),
    },
    doc=__doc__,
)
ENTRY = ROTARY_EMBEDDING.entry
SPEC = ROTARY_EMBEDDING.spec
check_args = ROTARY_EMBEDDING.check_args
