"""Hugging Face transformers' modules onto our ops, Liger-Kernel style: ``apply_*`` functions that route a model's
modules to our kernels in place, with no edit to the model's code.

``apply_multi_scale_deformable_attention(model)`` routes every ``MultiScaleDeformableAttention`` module of a model
(Deformable DETR, RT-DETR, Grounding DINO, OmDet-Turbo, LW-DETR, RF-DETR and the other transformers models that share
that class and its forward signature) to ``torchtrt::multi_scale_deformable_attention``: eagerly on our CUDA kernel,
and as one op in exported and compiled graphs (so one plugin in a TensorRT engine). transformers marks the class for
its kernel hub (``use_kernel_forward_from_hub("MultiScaleDeformableAttention")``), which needs the ``kernels`` package
and a hub repository; this function needs neither.
"""

from __future__ import annotations

import types

import torch

from .ops import multi_scale_deformable_attention  # noqa: F401  (defines the op)

#: The transformers module class whose forward :func:`apply_multi_scale_deformable_attention` replaces.
DEFORMABLE_ATTENTION_CLASS = "MultiScaleDeformableAttention"


def multi_scale_deformable_attention_forward(
    self: torch.nn.Module,
    value: torch.Tensor,
    value_spatial_shapes: torch.Tensor,
    value_spatial_shapes_list: list[tuple[int, int]] | None,
    level_start_index: torch.Tensor | None,
    sampling_locations: torch.Tensor,
    attention_weights: torch.Tensor,
    im2col_step: int = 64,
) -> torch.Tensor:
    """transformers' ``MultiScaleDeformableAttention.forward`` through our op (``im2col_step`` and the shapes' list
    only serve its own implementations)."""
    if level_start_index is None:
        sizes = value_spatial_shapes.prod(1)
        level_start_index = torch.cat((sizes.new_zeros(1), sizes.cumsum(0)[:-1]))
    return torch.ops.torchtrt.multi_scale_deformable_attention(
        value,
        value_spatial_shapes,
        level_start_index,
        sampling_locations.to(value.dtype),
        attention_weights.to(value.dtype),
    )


def apply_multi_scale_deformable_attention(model: torch.nn.Module) -> int:
    """Route every ``MultiScaleDeformableAttention`` module of ``model`` to our op, in place; returns how many."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            f"apply_multi_scale_deformable_attention: argument 'model' must be a torch.nn.Module, got "
            f"{type(model).__name__}"
        )
    modules = [m for m in model.modules() if type(m).__name__ == DEFORMABLE_ATTENTION_CLASS]
    for module in modules:
        module.forward = types.MethodType(multi_scale_deformable_attention_forward, module)
    return len(modules)


__all__ = [
    "DEFORMABLE_ATTENTION_CLASS",
    "apply_multi_scale_deformable_attention",
    "multi_scale_deformable_attention_forward",
]
