"""multi_scale_deformable_attention at Deformable DETR's sizes: Hugging Face's pure-PyTorch function (its
``MultiScaleDeformableAttention`` module's forward, plain torch where transformers does not import), torch.compile of
it, our CUDA op (each tactic) and the plugin's enqueue through the harness.

A size is ``(batch, queries)`` over one value: four levels of an 800x1066 image at strides 8 to 64 ((100, 134),
(50, 67), (25, 34), (13, 17): S = 17821 rows), 8 heads of 32 channels, 4 points per level; ``(2, 17821)`` is the
encoder (a query per value row), ``(8, 900)`` the decoder's cross-attention. Locations are as the model makes them: a
reference point per query (the encoder's: the centre of its own pixel; the decoder's: uniform in [0, 1]) plus offsets
of about two pixels of each level (normal, sd 2 / W_l and 2 / H_l), so that neighbouring encoder queries sample
overlapping corners; weights are a softmax over each query's 16 points.

The DRAM bytes it must move (``nbytes``, the copy it is judged against): the locations, weights and output once, and
of value the smaller of all of it and the corners the points touch (4 corners x D channels per point): the encoder's
points cover the whole map, the decoder's fewer.

    python -m torchtrt_plugins.benchmarks.bench_multi_scale_deformable_attention [--quick] [--dtypes fp32,fp16,bf16]
"""

from __future__ import annotations

import sys

import torch

import torchtrt_plugins
from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.bench_rms_norm import BF16, FP16, FP32
from torchtrt_plugins.benchmarks.common import Case, Plan, Provider, needs_cuda, needs_eager_kernel, needs_inductor
from torchtrt_plugins.ops import multi_scale_deformable_attention as msda

ENTRY = torchtrt_plugins.get("multi_scale_deformable_attention")
MAPS = ((100, 134), (50, 67), (25, 34), (13, 17))
HEADS, CHANNELS, POINTS = 8, 32, 4


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    batch, queries = shape
    maps = MAPS if device.type == "cuda" else tuple((h // 10 + 1, w // 10 + 1) for h, w in MAPS)
    sizes = [h * w for h, w in maps]
    generator = torch.Generator().manual_seed(batch * queries)
    shapes = torch.tensor(maps, device=device)
    starts = torch.tensor([sum(sizes[:i]) for i in range(len(sizes))], device=device)
    value = torch.randn(batch, sum(sizes), HEADS, CHANNELS, generator=generator).to(device, dtype)
    locations = _locations(batch, queries, maps, generator).to(device, dtype)
    logits = torch.randn(batch, queries, HEADS, len(maps) * POINTS, generator=generator)
    weights = logits.softmax(-1).view(batch, queries, HEADS, len(maps), POINTS).to(device, dtype)
    element = value.element_size()
    touched = weights.numel() * 4 * CHANNELS * element  # 4 corners of D channels per point
    nbytes = (
        min(value.numel() * element, touched)
        + (locations.numel() + weights.numel()) * element
        + batch * queries * HEADS * CHANNELS * element
    )
    return Case(
        "multi_scale_deformable_attention",
        shape,
        dtype,
        device,
        (value, shapes, starts, locations, weights),
        {},
        nbytes,
    )


def _locations(batch: int, queries: int, maps, generator: torch.Generator) -> torch.Tensor:
    sizes = [h * w for h, w in maps]
    if queries == sum(sizes):  # the encoder: query s is pixel s of its level
        centres = []
        for h, w in maps:
            y, x = torch.meshgrid((torch.arange(h) + 0.5) / h, (torch.arange(w) + 0.5) / w, indexing="ij")
            centres.append(torch.stack((x.flatten(), y.flatten()), -1))
        reference = torch.cat(centres).expand(batch, queries, 2)
    else:
        reference = torch.rand(batch, queries, 2, generator=generator)
    scale = torch.tensor([[2.0 / w, 2.0 / h] for h, w in maps])  # (L, 2): two pixels of each level
    offsets = torch.randn(batch, queries, HEADS, len(maps), POINTS, 2, generator=generator) * scale[:, None, :]
    return reference[:, :, None, None, None, :] + offsets


def _shapes_list(case: Case) -> list[tuple[int, int]]:
    return [(int(h), int(w)) for h, w in case.inputs[1].tolist()]


def _hugging_face(value, shapes, shapes_list, starts, locations, weights):
    function = msda.hugging_face_function()
    if function is None:
        return msda.plain_torch(value, shapes_list, locations, weights)
    return function(None, value, shapes, shapes_list, starts, locations, weights, 64)


def hugging_face_eager(case: Case):
    value, shapes, starts, locations, weights = case.inputs
    shapes_list = _shapes_list(case)  # the model holds it as a Python list: no sync in the timing
    return lambda: _hugging_face(value, shapes, shapes_list, starts, locations, weights)


def inductor(case: Case):
    value, shapes, starts, locations, weights = case.inputs
    shapes_list = _shapes_list(case)
    compiled = common.compile_inductor(_hugging_face)
    return lambda: compiled(value, shapes, shapes_list, starts, locations, weights)


def expected(case: Case) -> torch.Tensor:
    return msda.reference(*case.inputs)


def torchtrt_tactic(tactic: int):
    def factory(case: Case):
        if tactic:
            return lambda: torch.ops.torchtrt.multi_scale_deformable_attention_tactic(*case.inputs, tactic=tactic)
        return lambda: torch.ops.torchtrt.multi_scale_deformable_attention(*case.inputs)

    return factory


PROVIDERS = [
    Provider("hugging_face", hugging_face_eager),
    Provider("torch.compile", inductor, (needs_inductor,)),
    Provider("torchtrt", torchtrt_tactic(0), (needs_eager_kernel(ENTRY),)),
    *(
        Provider(f"torchtrt[{t.name}]", torchtrt_tactic(t.value), (needs_cuda, needs_eager_kernel(ENTRY)))
        for t in ENTRY.spec.tactics
    ),
    *common.plugin_enqueue_providers(ENTRY),
]

ENCODER, DECODER = (2, sum(h * w for h, w in MAPS)), (8, 900)

BENCHMARK = common.Benchmark(
    name="multi_scale_deformable_attention",
    make_case=make_case,
    providers=PROVIDERS,
    full=Plan((ENCODER, DECODER), (FP32, FP16, BF16)),
    quick=Plan((ENCODER, DECODER), (FP16,)),
    cpu=Plan(((1, 50), (2, 9)), (FP32, BF16)),
    cpu_quick=Plan(((1, 50),), (FP32,)),
    expected=expected,
    tolerance=common.spec_tolerance(ENTRY.spec),
)


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))
