"""multi_scale_deformable_attention(value, spatial_shapes, level_start_index, sampling_locations, attention_weights).

Deformable DETR's attention over multi-scale feature maps, with the semantics of Hugging Face's and mmcv's function:
``value`` (B, S, H, D) holds L levels flattened one after the other (level ``l`` is ``spatial_shapes[l] = (H_l, W_l)``,
row-major, starting at row ``level_start_index[l]`` of S); each query samples P points per head and level at
``sampling_locations`` (B, Q, H, L, P, 2), ``(x, y)`` in [0, 1] of the level's width and height, bilinearly with zero
padding outside the map (``grid_sample``'s ``align_corners=False``: pixel centres at ``(i + 0.5) / W_l``), and sums
them weighted by ``attention_weights`` (B, Q, H, L, P). The output is (B, Q, H * D). Locations, weights and value
share one float dtype; the math is fp32, rounded once. ``spatial_shapes`` and ``level_start_index`` are int64 (or
int32) device tensors the kernel reads; a corner outside the S rows of ``value`` counts as padding, so inconsistent
shapes give zeros, never an out-of-bounds read.

Launchers: ``csrc/kernels/multi_scale_deformable_attention_launcher.cu``; a group of lanes across D per (b, q, h)
(tactic 0: the kernel's heuristic; 1: the group's lanes compute its points once and shuffle them, a block taking the
heads of consecutive queries; 2: every lane computes each point itself, no shuffles; 3: as 1, a block taking
consecutive queries of one head, whose neighbouring samples share L1). The plugin is the generic one
(``MultiScaleDeformableAttention`` v1); it takes the inputs of NVIDIA's ``MultiscaleDeformableAttnPlugin_TRT`` in
its order and no fields (docs/onnx.md).
"""

from __future__ import annotations

import functools

import torch

from ..declare import declare
from ..spec import SpecError, Tolerance
from . import LIBRARY, define
from .rms_norm import FLOATS

OP = "torchtrt.multi_scale_deformable_attention"
INDEX_DTYPES = (torch.int64, torch.int32)


@functools.cache
def hugging_face_function():
    """Hugging Face's pure-PyTorch module forward (Deformable DETR's), or None where transformers does not import
    (absent, or beside a torchvision that does not load with this torch: a RuntimeError)."""
    try:
        from transformers.models.deformable_detr.modeling_deformable_detr import MultiScaleDeformableAttention
    except (ImportError, RuntimeError):
        return None
    return MultiScaleDeformableAttention.forward


def plain_torch(
    value: torch.Tensor,
    spatial_shapes: list[tuple[int, int]],
    sampling_locations: torch.Tensor,
    attention_weights: torch.Tensor,
) -> torch.Tensor:
    """The op's math in plain torch, from its semantics: per level, ``grid_sample`` of the (B*H, D, H_l, W_l) map at
    the level's points, then the weighted sum over levels and points."""
    batch, _, heads, channels = value.shape
    queries = sampling_locations.shape[1]
    levels = value.split([h * w for h, w in spatial_shapes], dim=1)
    sampled = []
    for level, (h, w) in enumerate(spatial_shapes):
        feature = levels[level].permute(0, 2, 3, 1).reshape(batch * heads, channels, h, w)
        grid = sampling_locations[:, :, :, level].transpose(1, 2).flatten(0, 1) * 2 - 1  # (B*H, Q, P, 2) in [-1, 1]
        sampled.append(
            torch.nn.functional.grid_sample(feature, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        )
    points = torch.stack(sampled, dim=-2).flatten(-2)  # (B*H, D, Q, L*P)
    weights = attention_weights.transpose(1, 2).reshape(batch * heads, 1, queries, -1)
    out = (points * weights).sum(-1).view(batch, heads * channels, queries)
    return out.transpose(1, 2).contiguous()


def reference(
    value: torch.Tensor,
    spatial_shapes: torch.Tensor,
    level_start_index: torch.Tensor,
    sampling_locations: torch.Tensor,
    attention_weights: torch.Tensor,
) -> torch.Tensor:
    """Hugging Face's function (plain torch where transformers is absent) on fp32 copies, rounded once to value's
    dtype (what the kernels do)."""
    shapes = [(int(h), int(w)) for h, w in spatial_shapes.tolist()]
    args = (value.float(), sampling_locations.float(), attention_weights.float())
    hugging_face = hugging_face_function()
    if hugging_face is None:
        out = plain_torch(args[0], shapes, args[1], args[2])
    else:
        out = hugging_face(None, args[0], spatial_shapes, shapes, level_start_index, args[1], args[2], 64)
    return out.to(value.dtype)


def _check_dims(name: str, tensor: torch.Tensor, layout: str, expected: tuple) -> None:
    """``tensor`` has rank len(expected) and the given sizes where one is named (None: any size)."""
    message = f"{OP}: argument '{name}' must be {layout}"
    if tensor.dim() != len(expected):
        raise SpecError(f"{message}, got shape {tuple(tensor.shape)}")
    for got, want in zip(tensor.shape, expected, strict=True):
        if want is not None:
            torch._check_with(SpecError, got == want, lambda: f"{message}, got shape {tuple(tensor.shape)}")


def fake(
    value: torch.Tensor,
    spatial_shapes: torch.Tensor,
    level_start_index: torch.Tensor,
    sampling_locations: torch.Tensor,
    attention_weights: torch.Tensor,
) -> torch.Tensor:
    """The op's shape rules, in the one place they are written (eager, validator and plugin derive from here)."""
    if value.dim() != 4:
        raise SpecError(f"{OP}: argument 'value' must be (B, S, H, D), got shape {tuple(value.shape)}")
    batch, _, heads, channels = value.shape
    _check_dims("spatial_shapes", spatial_shapes, "(L, 2): (H_l, W_l) of each level", (None, 2))
    levels = spatial_shapes.shape[0]
    _check_dims("level_start_index", level_start_index, f"(L,) with L = {levels} levels", (levels,))
    if sampling_locations.dim() != 6:
        raise SpecError(
            f"{OP}: argument 'sampling_locations' must be (B, Q, H, L, P, 2), got shape "
            f"{tuple(sampling_locations.shape)}"
        )
    queries, points = sampling_locations.shape[1], sampling_locations.shape[4]
    _check_dims(
        "sampling_locations",
        sampling_locations,
        f"(B, Q, H, L, P, 2) with B = {batch}, H = {heads}, L = {levels}",
        (batch, None, heads, levels, None, 2),
    )
    _check_dims(
        "attention_weights",
        attention_weights,
        f"(B, Q, H, L, P) = {(batch, queries, heads, levels, points)} (those of 'sampling_locations')",
        (batch, queries, heads, levels, points),
    )
    return value.new_empty((batch, queries, heads * channels))


def example_inputs(device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    """A small valid call: B=1, two levels (3x4, 2x2), H=2, D=4, Q=3, P=2 (zeros; the shapes are consistent)."""
    shapes = torch.tensor([[3, 4], [2, 2]], device=device)
    starts = torch.tensor([0, 12], device=device)
    value = torch.zeros(1, 16, 2, 4, device=device, dtype=dtype)
    locations = torch.zeros(1, 3, 2, 2, 2, 2, device=device, dtype=dtype)
    return value, shapes, starts, locations, torch.zeros(1, 3, 2, 2, 2, device=device, dtype=dtype)


_LIB = define(
    "multi_scale_deformable_attention(Tensor value, Tensor spatial_shapes, Tensor level_start_index, "
    "Tensor sampling_locations, Tensor attention_weights) -> Tensor",
    fake,
    reference,
    tactics=True,
)

MULTI_SCALE_DEFORMABLE_ATTENTION = declare(
    "torchtrt::multi_scale_deformable_attention",
    library=LIBRARY,
    plugin_name="MultiScaleDeformableAttention",
    plugin_version="1",
    launcher="ttp::launchers::multiScaleDeformableAttention",
    tactics={
        1: "ttp::launchers::multiScaleDeformableAttentionSharedPoints",
        2: "ttp::launchers::multiScaleDeformableAttentionPerLanePoints",
        3: "ttp::launchers::multiScaleDeformableAttentionHeadTiles",
        4: "ttp::launchers::multiScaleDeformableAttentionWideLanes",
    },
    dtypes={
        "value": FLOATS,
        "spatial_shapes": INDEX_DTYPES,
        "level_start_index": INDEX_DTYPES,
        "sampling_locations": FLOATS,
        "attention_weights": FLOATS,
    },
    same_dtype={"level_start_index": "spatial_shapes", "sampling_locations": "value", "attention_weights": "value"},
    example_inputs=example_inputs("meta"),
    reference=reference,
    # fp32: the kernel forms the pixel coordinates as grid_sample's formula does, without fma; grid_sample's own CUDA
    # build may contract it into one, moving a coordinate of ~100 pixels by an ulp (8e-6 of a pixel), and the kernel
    # orders its sums of L*P bilinear terms differently.
    tolerances={
        torch.float32: Tolerance(1e-4, 1e-4),
        torch.float16: Tolerance(2e-3, 2e-3),
        torch.bfloat16: Tolerance(1.6e-2, 1.6e-2),
    },
    doc=__doc__,
)
ENTRY = MULTI_SCALE_DEFORMABLE_ATTENTION.entry
SPEC = MULTI_SCALE_DEFORMABLE_ATTENTION.spec
check_args = MULTI_SCALE_DEFORMABLE_ATTENTION.check_args
