"""multi_scale_roi_align (torchtrt_vision::multi_scale_roi_align_4, declared in ``torchtrt_plugins.vision``):
torchvision's MultiScaleRoIAlign vs ours.

Providers: ``torchvision`` (``torchvision.ops.MultiScaleRoIAlign`` eagerly: the level of every RoI, then per level a
``nonzero``, a gather of its RoIs, ``roi_align`` and a scatter into the result; a host sync per level), ``torchtrt``
(our launcher, ``csrc/kernels/multi_scale_roi_align.cu``: one kernel, called as the plugin's ``enqueue`` calls it, on
buffers made once) and ``plugin_enqueue`` (the TensorRT plugin's ``enqueue`` through the conformance harness).

A size is ``(images, channels, height, width, rois)``: an FPN's four maps of strides 4 to 32 (``'0'`` to ``'3'``, as
Faster R-CNN pools them) for images of height x width, and that many RoIs per image of every scale (log-uniform
sides from 16 pixels to the image), pooled to 7 x 7 with 2 x 2 samples per bin, not aligned: torchvision's box head.

    python -m torchtrt_plugins.benchmarks.bench_multi_scale_roi_align [--quick] [--timer do_bench,graph]
"""

from __future__ import annotations

import math
import sys
from collections import OrderedDict

import torch

from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.common import Case, Plan, Provider

FP32, FP16 = torch.float32, torch.float16
LEVELS = 4
SCALES = [2.0 ** -(2 + level) for level in range(LEVELS)]


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    images, channels, height, width, count = shape
    generator = torch.Generator().manual_seed(sum(shape))
    features = [
        torch.randn(images, channels, math.ceil(height * s), math.ceil(width * s), generator=generator) for s in SCALES
    ]
    side = torch.exp(torch.rand(images * count, 2, generator=generator) * math.log(min(height, width) / 16)) * 16
    corner = torch.rand(images * count, 2, generator=generator) * (torch.tensor([width, height]) - side)
    index = torch.arange(images).repeat_interleave(count)[:, None].float()
    rois = torch.cat([index, corner, corner + side], 1)
    inputs = tuple(t.to(device, dtype) for t in (*features, rois))
    kwargs = {f"scale_{level}": scale for level, scale in enumerate(SCALES)}
    kwargs |= {"pooled_height": 7, "pooled_width": 7, "sampling_ratio": 2}
    return Case("multi_scale_roi_align", shape, dtype, device, inputs, kwargs)


def declaration():
    return common.vision().MULTI_SCALE_ROI_ALIGN[LEVELS]


def expected(case: Case) -> torch.Tensor:
    cpu = [t.float().cpu() for t in case.inputs]
    return common.vision().reference_multi_scale_roi_align(*cpu, **case.kwargs).to(case.device)


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    tol = declaration().spec.tolerance(dtype)
    return tol.atol, tol.rtol


def torchvision_pooler(case: Case):
    import torchvision

    names = [str(level) for level in range(LEVELS)]
    pooler = torchvision.ops.MultiScaleRoIAlign(names, 7, 2)
    features, rois = case.inputs[:LEVELS], case.inputs[LEVELS]
    maps = OrderedDict(zip(names, features, strict=True))
    images = features[0].shape[0]
    boxes = [rois[rois[:, 0] == i, 1:] for i in range(images)]
    height, width = (round(d / SCALES[0]) for d in features[0].shape[-2:])
    sizes = [(height, width)] * images
    return lambda: pooler(maps, boxes, sizes)


def ours(case: Case):
    return common.PreparedLaunch(declaration(), *case.inputs, **case.kwargs)


PROVIDERS = [
    Provider("torchvision", torchvision_pooler, (common.needs_torchvision,), check=False),
    Provider("torchtrt", ours, (common.needs_cuda, common.needs_sdk_build)),
    *common.plugin_enqueue_providers(declaration, requires=(common.needs_sdk_build,)),
]

BENCHMARK = common.Benchmark(
    name="multi_scale_roi_align",
    make_case=make_case,
    providers=PROVIDERS,
    full=Plan(((1, 256, 800, 1216, 1000), (2, 256, 800, 1216, 1000), (4, 256, 512, 512, 512)), (FP32, FP16)),
    quick=Plan(((1, 256, 800, 1216, 1000),), (FP32,)),
    cpu=Plan(((1, 4, 128, 96, 8),), (FP32,)),
    cpu_quick=Plan(((1, 4, 128, 96, 8),), (FP32,)),
    expected=expected,
    tolerance=tolerance,
)


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))
