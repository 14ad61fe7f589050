"""pad_to: eager composite vs F.pad vs torch.compile vs our op's eager CUDA kernel (the declared launcher, as every op
of ours) vs the plugin's enqueue through the harness vs TensorRT engines.

A size is ``(B, C, H, W, height, width)``: x (B, C, H, W) -> y (B, C, height, width), padded bottom/right with
VALUE where the output is larger and cropped where it is smaller (shown as ``BxCxHxWxheightxwidth``).

Bytes moved = read the part of x that is kept + write y
            = B*C*min(H, height)*min(W, width)*elt + B*C*height*width*elt   (elt: bytes per element)
(the cropped-away part of x is never read; the padding is written, not read). % of copy compares with a
device-to-device copy of that many bytes.

    python -m torchtrt_plugins.benchmarks.bench_pad_to [--quick] [--dtypes fp32,bf16,int8] [--csv PATH]
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

import torchtrt_plugins
from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.common import (
    Case,
    Plan,
    Provider,
    needs_cuda,
    needs_eager_kernel,
    needs_inductor,
    needs_tensorrt,
)

ENTRY = torchtrt_plugins.get("pad_to")
VALUE = 0.0
BF16, FP16, FP32, INT8 = torch.bfloat16, torch.float16, torch.float32, torch.int8


def moved_bytes(shape: tuple[int, ...], element_size: int) -> int:
    """Read the kept B*C*min(H, height)*min(W, width) region of x + write the B*C*height*width output."""
    batch, channels, h_in, w_in, height, width = shape
    kept = batch * channels * min(h_in, height) * min(w_in, width)
    return (kept + batch * channels * height * width) * element_size


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    batch, channels, h_in, w_in, height, width = shape
    if dtype.is_floating_point:
        x = torch.randn(batch, channels, h_in, w_in, dtype=dtype, device=device)
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max + 1, (batch, channels, h_in, w_in), dtype=dtype, device=device)
    kwargs = {"height": height, "width": width, "value": VALUE}
    return Case("pad_to", shape, dtype, device, (x,), kwargs, moved_bytes(shape, x.element_size()))


def expected(case: Case) -> torch.Tensor:
    return ENTRY.reference(*case.inputs, **case.kwargs)


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    tol = ENTRY.spec.tolerance(dtype)
    return tol.atol, tol.rtol


def _args(case: Case) -> tuple[torch.Tensor, int, int, float]:
    (x,) = case.inputs
    return x, case.kwargs["height"], case.kwargs["width"], case.kwargs["value"]


def eager_composite(case: Case):
    x, height, width, value = _args(case)
    return lambda: ENTRY.reference(x, height, width, value)


def functional(case: Case):
    """F.pad (constant_pad_nd) with right/bottom pads; a negative pad crops, so one call does both."""
    x, height, width, value = _args(case)
    pads = (0, width - x.shape[3], 0, height - x.shape[2])
    return lambda: F.pad(x, pads, value=value)


def inductor(case: Case):
    x, height, width, value = _args(case)
    compiled = common.compile_inductor(ENTRY.reference)
    return lambda: compiled(x, height, width, value)


def torchtrt_op(case: Case):
    x, height, width, value = _args(case)
    return lambda: torch.ops.torchtrt.pad_to(x, height, width, value)


class _PadModule(torch.nn.Module):
    """pad_to with the case's constants baked in (Torch-TensorRT compiles a module of tensor inputs)."""

    def __init__(self, fn, height: int, width: int, value: float):
        super().__init__()
        self.fn, self.height, self.width, self.value = fn, height, width, value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x, self.height, self.width, self.value)


def _plugin_fn(x: torch.Tensor, height: int, width: int, value: float) -> torch.Tensor:
    return torch.ops.torchtrt.pad_to(x, height, width, value)


def tensorrt_engine(fn, lowering: bool):
    def factory(case: Case):
        x, height, width, value = _args(case)
        engine = common.compile_tensorrt(_PadModule(fn, height, width, value), [x], lowering)
        return lambda: engine(x)

    return factory


PROVIDERS = [
    Provider("eager_composite", eager_composite),
    Provider("F.pad", functional),
    Provider("torch.compile", inductor, (needs_inductor,)),
    Provider("torchtrt", torchtrt_op, (needs_eager_kernel(ENTRY),)),
    *common.plugin_enqueue_providers(ENTRY),
    Provider("tensorrt[plugin]", tensorrt_engine(_plugin_fn, lowering=True), (needs_cuda, needs_tensorrt)),
    Provider("tensorrt[composite]", tensorrt_engine(ENTRY.reference, lowering=False), (needs_cuda, needs_tensorrt)),
]

# (B, C, H, W, height, width). Small: 0.3 to 2 MB moved; pad, crop.
SMALL = (
    (1, 3, 224, 224, 256, 256),
    (1, 64, 56, 56, 64, 64),
    (1, 3, 256, 256, 224, 224),  # crop
)
# >= 64 MB moved in fp32 (100 MB to 1 GB; 25 to 260 MB in int8): pad, crop, pad one side and crop the other.
LARGE = (
    (8, 64, 224, 224, 256, 256),
    (8, 64, 256, 256, 224, 224),  # crop
    (32, 3, 1000, 1000, 1024, 1024),
    (64, 128, 63, 63, 64, 64),
    (4, 3, 1000, 1100, 1024, 1024),  # pad H, crop W
    (16, 32, 512, 512, 480, 544),  # crop H, pad W
)

BENCHMARK = common.Benchmark(
    name="pad_to",
    make_case=make_case,
    providers=PROVIDERS,
    # A copy: only the element size matters, so one dtype of each size (fp16 on request: --dtypes fp16).
    full=Plan(SMALL + LARGE, (FP32, BF16, INT8)),
    quick=Plan(((8, 64, 224, 224, 256, 256), (32, 3, 1000, 1000, 1024, 1024), (8, 64, 256, 256, 224, 224)), (FP32,)),
    cpu=Plan(((1, 3, 30, 40, 32, 48), (2, 8, 64, 64, 56, 72), (4, 16, 63, 63, 64, 64)), (FP32, INT8)),
    cpu_quick=Plan(((1, 3, 30, 40, 32, 48), (2, 8, 64, 64, 56, 72)), (FP32,)),
    expected=expected,
    tolerance=tolerance,
)


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))
