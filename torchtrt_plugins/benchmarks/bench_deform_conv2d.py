"""deform_conv2d (torchvision::deform_conv2d, declared in ``torchtrt_plugins.vision``): torchvision's CUDA op vs ours,
beside a plain conv2d of the same shape.

Providers: ``torchvision`` (``torch.ops.torchvision.deform_conv2d``: deformable im2col into a column buffer, then a
GEMM), ``conv2d`` (``F.conv2d`` with the same input, weight and bias: cuDNN, what the op would cost without its
sampling; not checked, it computes another function), ``torchtrt`` (our launcher, ``csrc/kernels/deform_conv2d.cu``,
called as the plugin's ``enqueue`` calls it, on buffers made once) and ``plugin_enqueue`` (the TensorRT plugin's
``enqueue`` through the conformance harness), each as the heuristic picks (tactic 0) and with every tactic forced:
``[tactic 1]`` samples the NCHW planes, ``[tactic 2]`` a channels-last copy of the input (a tap-major copy of the
weight beside it) in a two-stage kernel.

A size is ``(batch, channels, height, width)``: a 3 x 3 DCNv2 layer (with a mask), as many output channels as input
channels, stride 1, padding 1, one offset group, offsets uniform in [-2, 2] pixels. Ours accumulates in fp32 and, in
fp32, multiplies as three TF32 products (about fp32's accuracy); torchvision computes half inputs in half arithmetic,
so the values are checked against the fp32 reference on the same (rounded) inputs, within the declaration's
tolerance.

    python -m torchtrt_plugins.benchmarks.bench_deform_conv2d [--quick] [--timer do_bench,graph] [--repeats 3]
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.common import Case, Plan, Provider

FP32, FP16 = torch.float32, torch.float16
KERNEL = 3


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    batch, channels, height, width = shape
    generator = torch.Generator().manual_seed(sum(shape))
    taps = KERNEL * KERNEL
    image = torch.randn(batch, channels, height, width, generator=generator)
    weight = torch.randn(channels, channels, KERNEL, KERNEL, generator=generator) / (channels * taps) ** 0.5
    offset = torch.rand(batch, 2 * taps, height, width, generator=generator) * 4 - 2
    mask = torch.rand(batch, taps, height, width, generator=generator)
    bias = torch.randn(channels, generator=generator)
    inputs = tuple(t.to(device, dtype) for t in (image, weight, offset, mask, bias))
    kwargs = {
        "stride_h": 1,
        "stride_w": 1,
        "pad_h": 1,
        "pad_w": 1,
        "dilation_h": 1,
        "dilation_w": 1,
        "groups": 1,
        "offset_groups": 1,
        "use_mask": True,
    }
    return Case("deform_conv2d", shape, dtype, device, inputs, kwargs)


def expected(case: Case) -> torch.Tensor:
    inputs = [t.float() for t in case.inputs]
    if common.vision().TORCHVISION:
        return torch.ops.torchvision.deform_conv2d(*inputs, **case.kwargs)
    cpu = [t.cpu() for t in inputs]
    return common.vision().reference_deform_conv2d(*cpu, **case.kwargs).to(case.device)


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    tol = common.vision().DEFORM_CONV2D.spec.tolerance(dtype)
    return tol.atol, tol.rtol


def plain_conv2d(case: Case):
    image, weight, _, _, bias = case.inputs
    return lambda: F.conv2d(image, weight, bias, padding=1)


#: The declaration's tactics past 0 (torchtrt_plugins.vision, imported only when the benchmark runs; a cpu test
#: checks these against it).
TACTICS = (1, 2)
torchvision, *ours = common.torchvision_providers("deform_conv2d", tactics=TACTICS)
PROVIDERS = [torchvision, Provider("conv2d", plain_conv2d, (common.needs_cuda,), check=False), *ours]

BENCHMARK = common.Benchmark(
    name="deform_conv2d",
    make_case=make_case,
    providers=PROVIDERS,
    full=Plan(((1, 64, 64, 64), (8, 256, 32, 32), (4, 128, 100, 100)), (FP32, FP16)),
    quick=Plan(((1, 64, 64, 64), (8, 256, 32, 32)), (FP32,)),
    cpu=Plan(((1, 8, 12, 12), (2, 4, 9, 11)), (FP32,)),
    cpu_quick=Plan(((1, 8, 12, 12),), (FP32,)),
    expected=expected,
    tolerance=tolerance,
)


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))
