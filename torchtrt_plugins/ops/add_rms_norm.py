"""add_rms_norm(x, residual, weight, eps=1e-6): the decoder's residual add fused with the next RMSNorm, in place.

``residual += x`` (rounded to the dtype, as ``h = h + x`` rounds), then returns ``rms_norm(residual, weight, eps)``
computed in fp32 from that sum and rounded once: exactly the unfused ``h = h + x; y = rms_norm(h, weight, eps)``, one
read of x, residual and weight and one write of residual and y instead of two passes (vLLM's
``fused_add_rms_norm``, FlashInfer's ``fused_add_rmsnorm``, Liger-Kernel's ``LigerFusedAddRMSNorm``).

A mutating op (``Tensor(a!) residual``), declared through the public path (:func:`torchtrt_plugins.declare`): the
launcher is ``csrc/kernels/add_rms_norm_launcher.cu``; the plugin is the generic one (``AddRMSNorm`` v1), with a
second output aliased to the residual input (``IPluginV3OneBuildV2::getAliasedInput``). Exported graphs hold the op
functionalized (``auto_functionalized_v2``); the converter turns that into the plugin (``converters._functionalized``).
"""

from __future__ import annotations

import torch

from ..declare import Range, declare
from ..spec import SpecError
from . import LIBRARY, define
from .rms_norm import FLOATS, TOLERANCES, check_norm_args
from .rms_norm import reference as rms_norm_reference


def reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Plain torch: ``residual += x`` in place, then RMSNorm of the sum (fp32, rounded once)."""
    residual.add_(x)
    return rms_norm_reference(residual, weight, eps)


def fake(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The op's shape rules, in the one place they are written (eager, validator and plugin derive from here)."""
    check_norm_args("add_rms_norm", x, weight)
    torch._check_with(
        SpecError,
        residual.dim() == x.dim() and all(r == d for r, d in zip(residual.shape, x.shape, strict=True)),
        lambda: (
            f"torchtrt.add_rms_norm: argument 'residual' must have the shape of 'x' {tuple(x.shape)} (it is updated "
            f"in place with x added), got {tuple(residual.shape)}"
        ),
    )
    return torch.empty_like(x, memory_format=torch.contiguous_format)


_LIB = define(
    "add_rms_norm(Tensor x, Tensor(a!) residual, Tensor weight, float eps=1e-06) -> Tensor",
    fake,
    reference,
)

ADD_RMS_NORM = declare(
    "torchtrt::add_rms_norm",
    library=LIBRARY,
    plugin_name="AddRMSNorm",
    plugin_version="1",
    launcher="ttp::launchers::addRmsNorm",
    ranges={"eps": Range(min=0.0, min_inclusive=False, doc="added to the mean of squares before rsqrt")},
    dtypes={"x": FLOATS, "residual": FLOATS, "weight": FLOATS},
    same_dtype={"residual": "x", "weight": "x"},
    mutates=("residual",),
    reference=reference,
    tolerances=TOLERANCES,
    doc=__doc__,
)
ENTRY = ADD_RMS_NORM.entry
SPEC = ADD_RMS_NORM.spec
check_args = ADD_RMS_NORM.check_args
