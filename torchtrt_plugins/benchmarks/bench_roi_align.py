"""roi_align (torchvision::roi_align, declared in ``torchtrt_plugins.vision``): torchvision's CUDA kernel vs ours.

Providers: ``torchvision`` (``torch.ops.torchvision.roi_align``, its eager CUDA op), ``torchtrt`` (our launcher,
``csrc/kernels/roi_align.cu``, called as the plugin's ``enqueue`` calls it, on buffers made once) and
``plugin_enqueue`` (the TensorRT plugin's ``enqueue`` through the conformance harness).

A size is ``(batch, channels, height, width, rois)``: a feature map of stride 4 (``spatial_scale`` 0.25) and that
many RoIs inside the image, 5% to 65% of its shorter side, pooled to 7 x 7 with 2 x 2 samples per bin, ``aligned``,
as Mask R-CNN's box head does. Ours accumulates in fp32; torchvision computes half inputs in half arithmetic, so the
values are checked against torchvision's fp32 kernel on the same (rounded) inputs, within the declaration's
tolerance.

    python -m torchtrt_plugins.benchmarks.bench_roi_align [--quick] [--timer do_bench,graph] [--repeats 3]
"""

from __future__ import annotations

import sys

import torch

from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.common import Case, Plan

FP32, FP16 = torch.float32, torch.float16
SCALE = 0.25


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    batch, channels, height, width, count = shape
    generator = torch.Generator().manual_seed(sum(shape))
    image = torch.randn(batch, channels, height, width, generator=generator)
    extent = torch.tensor([width, height]) / SCALE  # the image, in RoI coordinates
    size = (torch.rand(count, 2, generator=generator) * 0.6 + 0.05) * extent.min()
    corner = torch.rand(count, 2, generator=generator) * (extent - size)
    index = torch.randint(0, batch, (count, 1), generator=generator).float()
    rois = torch.cat([index, corner, corner + size], 1)
    kwargs = {"spatial_scale": SCALE, "pooled_height": 7, "pooled_width": 7, "sampling_ratio": 2, "aligned": True}
    return Case("roi_align", shape, dtype, device, (image.to(device, dtype), rois.to(device, dtype)), kwargs)


def expected(case: Case) -> torch.Tensor:
    image, rois = (t.float() for t in case.inputs)
    if common.vision().TORCHVISION:
        return torch.ops.torchvision.roi_align(image, rois, **case.kwargs)
    return common.vision().reference_roi_align(image.cpu(), rois.cpu(), **case.kwargs).to(image.device)


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    tol = common.vision().ROI_ALIGN.spec.tolerance(dtype)
    return tol.atol, tol.rtol


#: The declaration's tactics past 0 (torchtrt_plugins.vision, imported only when the benchmark runs).
TACTICS = (1, 2)
PROVIDERS = common.torchvision_providers("roi_align", tactics=TACTICS)

BENCHMARK = common.Benchmark(
    name="roi_align",
    make_case=make_case,
    providers=PROVIDERS,
    full=Plan(
        (
            (1, 256, 64, 64, 512),
            (4, 256, 100, 152, 1000),
            (2, 256, 200, 304, 2000),
            (2, 256, 200, 304, 100),
            (2, 256, 200, 304, 400),
        ),
        (FP32, FP16),
    ),
    quick=Plan(((1, 256, 64, 64, 512), (4, 256, 100, 152, 1000)), (FP32,)),
    cpu=Plan(((1, 8, 16, 16, 8), (2, 4, 20, 24, 16)), (FP32,)),
    cpu_quick=Plan(((1, 8, 16, 16, 8),), (FP32,)),
    expected=expected,
    tolerance=tolerance,
)


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))
