"""nms (torchvision::nms, declared in ``torchtrt_plugins.vision``): torchvision's CUDA kernel vs ours.

Providers:
- ``torchvision``: ``torch.ops.torchvision.nms``, its eager CUDA op (it reads its overlap matrix, or on recent
  releases its kept count, back to the host, so it cannot be captured in a CUDA graph);
- ``torchtrt``: our launcher (``csrc/kernels/nms.cu``) called as the plugin's ``enqueue`` calls it, on buffers made
  once: sort, overlap bits and the greedy walk all on the GPU, the kept count left in a size tensor on the device;
- ``plugin_enqueue``: the TensorRT plugin's ``enqueue`` through the conformance harness.

A size is ``(boxes, objects)``: ``objects`` 0 scatters the boxes uniformly over a 1000 x 1000 image (few overlaps);
``objects`` > 0 makes each box a jittered copy of one of that many objects, as a detector's proposals are (most boxes
overlap others and are suppressed). IoU threshold 0.5. Our kept indices are checked against torchvision's, index for
index (against ``reference_nms`` where torchvision's ops do not load).

    python -m torchtrt_plugins.benchmarks.bench_nms [--quick] [--timer do_bench,graph] [--repeats 3] [--csv PATH]
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.common import Case, Plan

THRESHOLD = 0.5
IMAGE = 1000.0
FP32 = torch.float32


def boxes(count: int, objects: int, generator: torch.Generator) -> torch.Tensor:
    """(count, 4) boxes (x1, y1, x2, y2) in an IMAGE x IMAGE image; see the module's docstring for ``objects``."""
    if objects == 0:
        corner = torch.rand(count, 2, generator=generator) * IMAGE
        return torch.cat([corner, corner + torch.rand(count, 2, generator=generator) * 100 + 1], 1)
    size = torch.rand(objects, 2, generator=generator) * 250 + 30
    centre = torch.rand(objects, 2, generator=generator) * IMAGE
    pick = torch.randint(0, objects, (count,), generator=generator)
    jitter = torch.randn(count, 4, generator=generator) * 0.1
    half = size[pick] / 2
    return torch.cat([centre[pick] - half, centre[pick] + half], 1) + jitter * size[pick].repeat(1, 2)


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    count, objects = shape
    generator = torch.Generator().manual_seed(count + objects)
    dets = boxes(count, objects, generator)
    scores = torch.rand(count, generator=generator)
    return Case(
        "nms", shape, dtype, device, (dets.to(device, dtype), scores.to(device, dtype)), {"iou_threshold": THRESHOLD}
    )


def _kept(case: Case) -> torch.Tensor:
    dets, scores = case.inputs
    threshold = case.kwargs["iou_threshold"]
    if common.vision().TORCHVISION:
        return torch.ops.torchvision.nms(dets, scores, threshold)
    return common.vision().reference_nms(dets.cpu(), scores.cpu(), threshold).to(dets.device)


def expected(case: Case) -> torch.Tensor:
    """The kept indices as our launcher leaves its output buffer: the kept ones first, then -1 (never written)."""
    kept = _kept(case)
    return F.pad(kept, (0, case.inputs[0].shape[0] - kept.shape[0]), value=-1)


PROVIDERS = common.torchvision_providers("nms")

BENCHMARK = common.Benchmark(
    name="nms",
    make_case=make_case,
    providers=PROVIDERS,
    full=Plan(((1000, 0), (5000, 0), (20000, 0), (5000, 50)), (FP32,)),
    quick=Plan(((1000, 0), (5000, 0), (5000, 50)), (FP32,)),
    cpu=Plan(((200, 0), (200, 10)), (FP32,)),
    cpu_quick=Plan(((200, 10),), (FP32,)),
    expected=expected,
    tolerance=lambda dtype: (0.0, 0.0),
)


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))
