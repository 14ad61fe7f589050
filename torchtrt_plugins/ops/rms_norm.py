"""rms_norm(x, weight, eps=1e-6, weight_offset=0.0): RMSNorm over the last dimension, fp32 accumulation.

``y = x * rsqrt(mean(x**2) + eps) * (weight + weight_offset)``, all in fp32 and rounded once: ``weight_offset=1``
is Gemma's ``(1 + w)``, whose sum would round a second time if it were formed in a half dtype first.

Declared through the public path (:func:`torchtrt_plugins.declare`): the launchers are
``csrc/kernels/rms_norm_launcher.cu`` (tactic 0: the kernel's heuristic; 1: one warp per row, for small hidden sizes;
2: one block per row, vectorized, row in registers; 3: large launches: rows of 4096, 8192, 12288 or 16384 elements past
the L2 in two passes, rows of 16 vectors to 1024 elements as inductor lays them out, tactic 1 or 2 elsewhere); the
plugin is the generic one (``RMSNorm`` v3).
"""

from __future__ import annotations

import torch

from ..declare import Range, declare
from ..spec import SpecError, Tolerance
from . import LIBRARY, define

FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, weight_offset: float = 0.0) -> torch.Tensor:
    """Plain-torch RMSNorm, computed in fp32 and rounded once to x's dtype (what the kernels do)."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (weight.float() + weight_offset)
    return y.to(x.dtype)


#: Against the fp32 reference, for the norms that accumulate in fp32 and round once (rms_norm, add_rms_norm).
TOLERANCES = {
    torch.float32: Tolerance(1e-5, 1e-5),
    torch.float16: Tolerance(2e-3, 2e-3),
    torch.bfloat16: Tolerance(1.6e-2, 1.6e-2),
}


def check_norm_args(op: str, x: torch.Tensor, weight: torch.Tensor) -> None:
    """A norm over x's last dimension: x has one, and ``weight`` one value for each of its elements."""
    if x.dim() < 1:
        raise SpecError(f"torchtrt.{op}: argument 'x' must have at least 1 dimension, got shape {tuple(x.shape)}")
    torch._check_with(
        SpecError,
        weight.dim() == 1 and weight.shape[0] == x.shape[-1],
        lambda: (
            f"torchtrt.{op}: argument 'weight' must have shape ({x.shape[-1]},) to match the last dimension of "
            f"'x', got {tuple(weight.shape)}"
        ),
    )


def fake(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, weight_offset: float = 0.0) -> torch.Tensor:
    """The op's shape rules, in the one place they are written (eager, validator and plugin derive from here)."""
    check_norm_args("rms_norm", x, weight)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


_LIB = define(
    "rms_norm(Tensor x, Tensor weight, float eps=1e-06, float weight_offset=0.0) -> Tensor",
    fake,
    reference,
    tactics=True,
)

RMS_NORM = declare(
    "torchtrt::rms_norm",
    library=LIBRARY,
    plugin_name="RMSNorm",
    plugin_version="3",
    launcher="ttp::launchers::rmsNorm",
    tactics={
        1: "ttp::launchers::rmsNormWarpPerRow",
        2: "ttp::launchers::rmsNormBlockPerRow",
        3: "ttp::launchers::rmsNormLarge",
    },
    ranges={
        "eps": Range(min=0.0, min_inclusive=False, doc="added to the mean of squares before rsqrt"),
        "weight_offset": Range(doc="added to the weight in fp32 (Gemma: 1)"),
    },
    dtypes={"x": FLOATS, "weight": FLOATS},
    same_dtype={"weight": "x"},
    weight_fields=("weight",),
    reference=reference,
    tolerances=TOLERANCES,
    doc=__doc__,
)
ENTRY = RMS_NORM.entry
SPEC = RMS_NORM.spec
check_args = RMS_NORM.check_args
