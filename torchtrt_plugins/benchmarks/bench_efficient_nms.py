"""efficient_nms (static-output NMS, NVIDIA's EfficientNMS contract): torchvision's ``batched_nms`` + padding to K
vs our op.

Providers:
- ``torchvision.batched_nms+pad``: what a PyTorch detector does for the same outputs: the candidates above the score
  threshold (``nonzero``: a host sync), ``torchvision.ops.batched_nms`` over all of them with image and class as its
  ``idxs`` (one call for the batch, the coordinate-offset trick), then the first K per image scattered into zeroed
  (B, K) outputs. It suppresses among every candidate, ours among the first 4096 per image (NVIDIA's limit): its
  output is not checked;
- ``torchtrt``: ``torch.ops.torchtrt.efficient_nms``, our eager CUDA kernel (no host sync);
- ``plugin_enqueue``: the TensorRT plugin's ``enqueue`` through the conformance harness.

A size is ``(B, N, C, objects)``: N boxes per image as ``bench_nms`` makes them (``objects`` 0: uniform over the
image; > 0: jittered copies of that many objects), each with one class scored in [0, 1) and the other C - 1 below
0.05, as a detector's sigmoid scores are; score threshold 0.25, IoU threshold 0.5, K = 100.

    python -m torchtrt_plugins.benchmarks.bench_efficient_nms [--quick] [--timer do_bench,graph] [--csv PATH]
"""

from __future__ import annotations

import importlib.util
import sys

import torch

import torchtrt_plugins
from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.bench_nms import boxes as nms_boxes
from torchtrt_plugins.benchmarks.common import Case, Plan, Provider
from torchtrt_plugins.benchmarks.environment import RunContext, needs_cuda, needs_eager_kernel

ENTRY = torchtrt_plugins.get("efficient_nms")
SCORE_THRESHOLD, IOU_THRESHOLD, K = 0.25, 0.5, 100
FP16, FP32 = torch.float16, torch.float32


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    batch, count, classes, objects = shape
    generator = torch.Generator().manual_seed(count + classes + objects)
    boxes = torch.stack([nms_boxes(count, objects, generator) for _ in range(batch)])
    scores = torch.rand(batch, count, classes, generator=generator) * 0.05
    best = torch.randint(0, classes, (batch, count, 1), generator=generator)
    scores.scatter_(2, best, torch.rand(batch, count, 1, generator=generator))
    kwargs = {"score_threshold": SCORE_THRESHOLD, "iou_threshold": IOU_THRESHOLD, "max_output_boxes": K}
    return Case("efficient_nms", shape, dtype, device, (boxes.to(device, dtype), scores.to(device, dtype)), kwargs)


def needs_torchvision_ops(ctx: RunContext) -> str | None:
    if importlib.util.find_spec("torchvision") is None:
        return "torchvision not installed"
    return None if ctx.device.type == "cuda" else "the peer runs on the GPU only"


def batched_nms_padded(case: Case):
    from torchvision.ops import batched_nms

    boxes, scores = case.inputs
    batch, count, classes = scores.shape

    def run():
        image, box, cls = (scores >= SCORE_THRESHOLD).nonzero(as_tuple=True)
        kept = batched_nms(boxes[image, box], scores[image, box, cls], image * classes + cls, IOU_THRESHOLD)
        kept = kept[torch.sort(image[kept], stable=True).indices]  # by image, by score within one
        kept_image = image[kept]
        first = torch.searchsorted(kept_image, torch.arange(batch, device=kept.device))
        rank = torch.arange(kept.numel(), device=kept.device) - first[kept_image]
        keep = rank < K
        kept, kept_image, rank = kept[keep], kept_image[keep], rank[keep]
        out_boxes = boxes.new_zeros((batch, K, 4))
        out_scores = scores.new_zeros((batch, K))
        out_classes = torch.zeros((batch, K), dtype=torch.int32, device=boxes.device)
        out_boxes[kept_image, rank] = boxes[image[kept], box[kept]]
        out_scores[kept_image, rank] = scores[image[kept], box[kept], cls[kept]]
        out_classes[kept_image, rank] = cls[kept].int()
        num = torch.bincount(kept_image, minlength=batch).int()[:, None]
        return num, out_boxes, out_scores, out_classes

    return run


def torchtrt_op(case: Case):
    boxes, scores = case.inputs
    return lambda: torch.ops.torchtrt.efficient_nms(boxes, scores, **case.kwargs)


def expected(case: Case):
    boxes, scores = case.inputs
    out = ENTRY.reference(boxes.cpu(), scores.cpu(), **case.kwargs)
    return tuple(o.to(boxes.device) for o in out)


PROVIDERS = [
    Provider("torchvision.batched_nms+pad", batched_nms_padded, (needs_cuda, needs_torchvision_ops), check=False),
    Provider("torchtrt", torchtrt_op, (needs_eager_kernel(ENTRY),)),
    *common.plugin_enqueue_providers(ENTRY),
]

BENCHMARK = common.Benchmark(
    name="efficient_nms",
    make_case=make_case,
    providers=PROVIDERS,
    full=Plan(
        (
            (1, 1000, 80, 0),
            (1, 5000, 80, 0),
            (1, 5000, 80, 50),
            (1, 20000, 80, 0),
            (8, 1000, 80, 0),
            (8, 5000, 80, 50),
            (1, 20000, 1, 50),
            (8, 20000, 1, 0),
        ),
        (FP32, FP16),
    ),
    quick=Plan(((1, 1000, 80, 0), (1, 5000, 80, 50), (8, 5000, 80, 0), (1, 20000, 1, 50)), (FP32,)),
    cpu=Plan(((1, 200, 3, 0), (2, 200, 3, 10)), (FP32,)),
    cpu_quick=Plan(((1, 200, 3, 10),), (FP32,)),
    expected=expected,
    tolerance=lambda dtype: (0.0, 0.0),
)


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))
