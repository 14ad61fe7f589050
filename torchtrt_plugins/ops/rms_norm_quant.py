"""rms_norm_fp8 / rms_norm_int8(x, weight, scale, eps=1e-6, weight_offset=0.0): RMSNorm quantized on the way out.

``y = saturate(round(rms_norm(x, weight, eps, weight_offset) / scale))`` with the norm in fp32 (as ``rms_norm``) and
quantized from that fp32 value, never rounded to x's dtype first; the division is correctly rounded fp32, as
TensorRT's IQuantizeLayer and ONNX ``QuantizeLinear`` divide. What a serving stack runs before an FP8 or INT8 matmul
(vLLM's ``rms_norm_static_fp8_quant``, TensorRT-LLM's ``RmsnormQuantization`` plugin), in one pass: x and weight read
once, one byte written per element.

- ``rms_norm_fp8``: torch.float8_e4m3fn (TensorRT kFP8), round to nearest even, saturated to +-448; NaN stays NaN.
- ``rms_norm_int8``: torch.int8 (kINT8), round half to even, saturated to [-128, 127]; NaN becomes 0.

``scale`` is a float32 tensor of one element (shape ``()`` or ``(1,)``), a plugin *input*, not a field: an engine
takes it from wherever the graph has it (the same initializer as the consumer's DequantizeLinear, or a tensor computed
at run time), and the consumer dequantizes with that same scale. TensorRT hands a plugin no scale of its own under
explicit quantization (``PluginTensorDesc::scale`` is the implicit-INT8 calibration scale, -1 otherwise), and does not
fuse a Q/DQ pair into a plugin, so the plugin declares kFP8/kINT8 as its output type and reads the scale itself.

Checks of the scale's value (> 0 and finite): the CPU kernel checks it (the value is on the host). The CUDA kernel and
the plugin do not: reading a device scalar on the host would synchronize every call and break CUDA graph capture, as
it would for TensorRT's own quantize layer, which does not check either. There the IEEE result stands (a scale of 0
saturates, a NaN scale gives NaN for fp8 and 0 for int8).

Declared through the public path (:func:`torchtrt_plugins.declare`), one declaration per op; the kernels are
``rms_norm``'s (``csrc/kernels/rms_norm.cu``, with the quantizers of ``csrc/kernels/quantize.cuh`` as the output
stage) and the same tactics (0: heuristic; 1: one warp per row; 2: one block per row; 3: large launches). Plugins:
``RMSNormFP8`` and ``RMSNormINT8`` v1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ..declare import Range, declare
from ..spec import SpecError, Tolerance
from . import LIBRARY, define
from .rms_norm import FLOATS, check_norm_args

#: The largest finite value of each output dtype (what the quantizer saturates to).
FP8_MAX = 448.0
INT8_MIN, INT8_MAX = -128, 127

#: Against the reference (quantized from its fp32 norm): the fp32 norms may differ in the last bits (reduction order),
#: which can move a value across a rounding boundary: one step of the output type, no more.
TOLERANCES = {
    torch.float8_e4m3fn: Tolerance(2.0**-9, 0.125),  # one e4m3 step: 2^-3 relative, 2^-9 among the subnormals
    torch.int8: Tolerance(1, 0),
}


def check_scale(op: str, scale: torch.Tensor) -> None:
    """The scale's value: > 0 and finite. Only where it is on the host (see the module's docstring)."""
    if scale.device.type != "cpu" or isinstance(scale, torch._subclasses.FakeTensor):
        return
    value = float(scale.reshape(()).item())
    if not (math.isfinite(value) and value > 0):
        raise SpecError(f"torchtrt.{op}: argument 'scale' must be a finite float > 0, got {value!r}")


def _reference(out_dtype: torch.dtype):
    def reference(
        x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, eps: float = 1e-6, weight_offset: float = 0.0
    ) -> torch.Tensor:
        """Plain torch: the fp32 norm, divided by the scale in fp32, rounded and saturated to the output dtype."""
        check_scale(_NAMES[out_dtype], scale)
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (weight.float() + weight_offset)
        q = y / scale.float().to(y.device).reshape(())
        if out_dtype == torch.int8:
            return torch.nan_to_num(torch.round(q), nan=0.0).clamp(INT8_MIN, INT8_MAX).to(torch.int8)
        return q.clamp(-FP8_MAX, FP8_MAX).to(out_dtype)

    return reference


def _fake(name: str, out_dtype: torch.dtype):
    def fake(
        x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, eps: float = 1e-6, weight_offset: float = 0.0
    ) -> torch.Tensor:
        """The op's shape rules, in the one place they are written (eager, validator and plugin derive from here)."""
        check_norm_args(name, x, weight)
        torch._check_with(
            SpecError,
            scale.dim() <= 1 and scale.numel() == 1,
            lambda: (
                f"torchtrt.{name}: argument 'scale' must hold one value (shape () or (1,): a per-tensor scale), got "
                f"shape {tuple(scale.shape)}"
            ),
        )
        return torch.empty(x.shape, dtype=out_dtype, device=x.device)

    return fake


_NAMES = {torch.float8_e4m3fn: "rms_norm_fp8", torch.int8: "rms_norm_int8"}
_SCHEMA = "(Tensor x, Tensor weight, Tensor scale, float eps=1e-06, float weight_offset=0.0) -> Tensor"
_RANGES = {
    "eps": Range(min=0.0, min_inclusive=False, doc="added to the mean of squares before rsqrt"),
    "weight_offset": Range(doc="added to the weight in fp32 (Gemma: 1)"),
}
_LAUNCHERS = {
    "launcher": "ttp::launchers::rmsNormQuant",
    "tactics": {
        1: "ttp::launchers::rmsNormQuantWarpPerRow",
        2: "ttp::launchers::rmsNormQuantBlockPerRow",
        3: "ttp::launchers::rmsNormQuantLarge",
    },
}
_DTYPES = {"x": FLOATS, "weight": FLOATS, "scale": (torch.float32,)}

reference_fp8 = _reference(torch.float8_e4m3fn)
reference_int8 = _reference(torch.int8)
_LIB_FP8 = define("rms_norm_fp8" + _SCHEMA, _fake("rms_norm_fp8", torch.float8_e4m3fn), reference_fp8, tactics=True)
_LIB_INT8 = define("rms_norm_int8" + _SCHEMA, _fake("rms_norm_int8", torch.int8), reference_int8, tactics=True)


def _declare(name: str, plugin_name: str, reference: Callable[..., Any]):
    return declare(
        f"torchtrt::{name}",
        library=LIBRARY,
        plugin_name=plugin_name,
        plugin_version="1",
        **_LAUNCHERS,
        ranges=_RANGES,
        dtypes=_DTYPES,
        same_dtype={"weight": "x"},
        reference=reference,
        tolerances=TOLERANCES,
        doc=__doc__,
    )


RMS_NORM_FP8 = _declare("rms_norm_fp8", "RMSNormFP8", reference_fp8)
RMS_NORM_INT8 = _declare("rms_norm_int8", "RMSNormINT8", reference_int8)
