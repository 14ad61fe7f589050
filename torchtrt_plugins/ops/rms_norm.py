"""rms_norm(x, weight, eps=1e-6): RMSNorm over the last dimension, fp32 accumulation."""

from __future__ import annotations

import torch

from ..spec import FieldSpec, OpEntry, OpSpec, SpecError, Tactic, TensorSpec, Tolerance, register

FLOATS = (torch.float32, torch.float16, torch.bfloat16)

SPEC = OpSpec(
    name="rms_norm",
    schema="(Tensor x, Tensor weight, float eps=1e-06) -> Tensor",
    plugin_name="RMSNorm",
    inputs=(
        TensorSpec("x", FLOATS, doc="(..., hidden); normalized over the last dimension"),
        TensorSpec("weight", FLOATS, same_dtype_as="x", doc="(hidden,)"),
    ),
    outputs=(TensorSpec("y", FLOATS, same_dtype_as="x", doc="same shape as x"),),
    fields=(
        FieldSpec(
            "eps",
            "FLOAT32",
            arg="eps",
            default=1e-6,
            min=0.0,
            min_inclusive=False,
            doc="added to the mean of squares before rsqrt",
        ),
    ),
    tactics=(
        Tactic(1, "warp_per_row", "one warp per row; small hidden sizes"),
        Tactic(2, "block_per_row", "one block per row (128-1024 threads by hidden size), vectorized, row in registers"),
    ),
    tolerances={
        torch.float32: Tolerance(1e-5, 1e-5),
        torch.float16: Tolerance(2e-3, 2e-3),
        torch.bfloat16: Tolerance(1.6e-2, 1.6e-2),
    },
)


def check_args(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> None:
    SPEC.check_dtypes([x, weight])
    if x.dim() < 1:
        raise SpecError(f"torchtrt.rms_norm: argument 'x' must have at least 1 dimension, got shape {tuple(x.shape)}")
    if weight.dim() != 1 or weight.shape[0] != x.shape[-1]:
        raise SpecError(
            f"torchtrt.rms_norm: argument 'weight' must have shape ({x.shape[-1]},) to match the last "
            f"dimension of 'x', got {tuple(weight.shape)}"
        )
    SPEC.field_by_name("eps").check("rms_norm", eps)


def reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Plain-torch RMSNorm, computed in fp32 and rounded once to x's dtype (what the kernels do)."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return y.to(x.dtype)


def fake(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    check_args(x, weight, eps)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


ENTRY = register(OpEntry(SPEC, reference=reference, fake=fake, check_args=check_args))
