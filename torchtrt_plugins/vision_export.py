"""Export-friendly forms of torchvision's detection code, applied while a block runs (:func:`exportable`).

torchvision's detectors do not ``torch.export`` as shipped: their postprocessing asks Python questions about
data-dependent sizes, which export cannot answer (``GuardOnDataDependentSymNode``):

- ``torchvision.ops.batched_nms`` picks its CPU path when ``boxes.numel() > 4000``, then returns early when
  ``boxes.numel() == 0``: both on boxes whose count is what score filtering left;
- ``MultiScaleRoIAlign`` sizes its output with ``len(rois)`` and pools each FPN level's boxes, picked with a
  data-dependent ``torch.where(levels == level)``;
- ``BoxCoder.decode`` reshapes its codes only ``if box_sum > 0``, on the number of boxes NMS kept (torch 2.11's export
  cannot decide it: the H200's torch 2.11 and torchvision 0.26 stopped there).

Within :func:`exportable`, ``batched_nms`` is always the coordinate trick (one ``torchvision::nms``: the offset that
keeps classes apart is ``(max(boxes.max(), 0) + 1) * class``, which needs no early return for zero boxes),
``MultiScaleRoIAlign`` pools every box at every level and keeps, per box, its own level's result (``torch.where``):
the same values with no data-dependent size, at one RoIAlign per level over all boxes, and ``BoxCoder.decode``
reshapes whatever the count (:func:`box_coder_decode`).

Mask R-CNN's mask pasting (``paste_masks_in_image``) loops in Python over the detections, resizing each mask to its
box's size (``F.interpolate``, a size read from the box's values) and writing it into the image's slice the box
covers. Within :func:`exportable` it is :func:`paste_masks`: bilinear resizing is separable, so each detection's
pasted mask is ``Wy @ mask @ Wx^T``, with ``Wy`` (image height x mask size) and ``Wx`` (image width x mask size)
holding, per image row and column, the two interpolation weights ``F.interpolate`` gives that pixel (``align_corners
=False``, its source index clamped at both ends), and zero rows outside the box. Two batched matrix products over
every detection at once, with no data-dependent size, in the order of ``F.interpolate``'s own sums (each row of the
mask first, then the columns).

torchvision's files are never edited: the module attributes its code looks up are swapped, and put back on exit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = [
    "batched_nms",
    "box_coder_decode",
    "exportable",
    "multiscale_roi_align",
    "paste_masks",
    "paste_masks_in_image",
]


def batched_nms(boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """torchvision's ``batched_nms`` as one ``torchvision::nms`` on class-offset boxes, with no size guard."""
    from torchvision.ops import nms

    max_coordinate = torch.cat((boxes.new_zeros(1), boxes.flatten())).max()
    offsets = idxs.to(boxes) * (max_coordinate + 1)
    return nms(boxes + offsets[:, None], scores, iou_threshold)


def box_coder_decode(self, rel_codes: torch.Tensor, boxes: list[torch.Tensor]) -> torch.Tensor:
    """``BoxCoder.decode`` without its ``if box_sum > 0`` (a guard on the data-dependent number of boxes when the
    boxes are what a score filter or NMS kept): the codes (boxes, 4 x k) decode to (boxes, k, 4), as torchvision's
    own for any non-zero count; for zero boxes, (0, k, 4) where torchvision leaves (0, 4 x k)."""
    if not isinstance(boxes, (list, tuple)) or not isinstance(rel_codes, torch.Tensor):
        raise TypeError("BoxCoder.decode: expects rel_codes as a Tensor and boxes as a list or tuple of Tensors")
    concat_boxes = torch.cat(list(boxes), dim=0)
    count = concat_boxes.shape[0]
    codes = rel_codes.reshape(count, rel_codes.shape[-1])
    return self.decode_single(codes, concat_boxes).reshape(count, rel_codes.shape[-1] // 4, 4)


def multiscale_roi_align(x_filtered, boxes, output_size, sampling_ratio, scales, mapper) -> torch.Tensor:
    """``MultiScaleRoIAlign``'s pooling (its ``_multiscale_roi_align``), each box taken from its own level by
    selection instead of data-dependent indexing."""
    from torchvision.ops import poolers, roi_align

    if scales is None or mapper is None:
        raise ValueError("multiscale_roi_align: 'scales' and 'mapper' must be set (MultiScaleRoIAlign sets them)")
    rois = poolers._convert_to_roi_format(boxes)
    pooled = [
        roi_align(features, rois, output_size=output_size, spatial_scale=scale, sampling_ratio=sampling_ratio)
        for features, scale in zip(x_filtered, scales)
    ]
    if len(pooled) == 1:
        return pooled[0]
    levels = mapper(boxes)[:, None, None, None]
    result = pooled[-1]
    for level in range(len(pooled) - 2, -1, -1):
        result = torch.where(levels == level, pooled[level], result)
    return result


def _interpolation_weights(first: torch.Tensor, last: torch.Tensor, pixels: int, source: int) -> torch.Tensor:
    """Per box (``first``, ``last``: its first and last pixel along one axis, int64 (D,)), the weights (D, pixels,
    source) that resize a mask's ``source`` samples along that axis to the box's ``last - first + 1`` pixels as
    ``F.interpolate(mode="bilinear", align_corners=False)`` does, placed at the image's pixels; zero outside the box."""
    positions = torch.arange(pixels, device=first.device)
    offsets = positions[None, :] - first[:, None]  # the pixel's index in the resized mask
    length = (last - first + 1).clamp(min=1).to(torch.float32)
    scale = source / length  # as F.interpolate's own: input size / output size, in fp32
    real = (scale[:, None] * (offsets.to(torch.float32) + 0.5) - 0.5).clamp(min=0.0)
    low = real.floor().clamp(max=source - 1)
    fraction = (real - low).clamp(0.0, 1.0)
    low = low.to(torch.int64)
    high = (low + 1).clamp(max=source - 1)
    taps = torch.arange(source, device=first.device)
    zero = torch.zeros((), dtype=torch.float32, device=first.device)
    weights = torch.where(taps == low[..., None], (1.0 - fraction)[..., None], zero) + torch.where(
        taps == high[..., None], fraction[..., None], zero
    )
    inside = (positions[None, :] >= first[:, None]) & (positions[None, :] <= last[:, None])
    return torch.where(inside[..., None], weights, zero)


def paste_masks(masks: torch.Tensor, boxes: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Masks (D, S, S) pasted into a ``height`` x ``width`` image at integer boxes (D, 4: x0, y0, x1, y1, last pixels
    included), as torchvision's ``paste_mask_in_image`` pastes each: (D, height, width), in the masks' dtype (fp32
    arithmetic). Where a box leaves the image only its part inside is written; torchvision's own loop does the same
    (and fails on a box wholly past the right or bottom edge, where this gives zeros)."""
    if masks.dim() != 3 or boxes.dim() != 2 or boxes.shape[-1] != 4:
        raise ValueError(
            "paste_masks: arguments 'masks' and 'boxes' must have shapes (D, S, S) and (D, 4), "
            f"got {tuple(masks.shape)} and {tuple(boxes.shape)}"
        )
    if boxes.is_floating_point():
        raise ValueError(
            f"paste_masks: argument 'boxes' must be integer pixels (torchvision's int64), got {boxes.dtype}"
        )
    rows = _interpolation_weights(boxes[:, 1], boxes[:, 3], height, masks.shape[1])
    columns = _interpolation_weights(boxes[:, 0], boxes[:, 2], width, masks.shape[2])
    resized_rows = torch.bmm(masks.to(torch.float32), columns.transpose(1, 2))  # (D, S, width)
    return torch.bmm(rows, resized_rows).to(masks.dtype)


def paste_masks_in_image(masks: torch.Tensor, boxes: torch.Tensor, img_shape, padding: int = 1) -> torch.Tensor:
    """torchvision's ``paste_masks_in_image`` (masks (D, 1, M, M), boxes (D, 4) in image pixels) through
    :func:`paste_masks`: its padding and box expansion as its own, then every detection at once: (D, 1, H, W)."""
    from torchvision.models.detection import roi_heads

    masks, scale = roi_heads.expand_masks(masks, padding=padding)
    boxes = roi_heads.expand_boxes(boxes, scale).to(dtype=torch.int64)
    height, width = img_shape
    return paste_masks(masks[:, 0], boxes, height, width)[:, None]


@contextlib.contextmanager
def exportable() -> Iterator[None]:
    """Within the block, torchvision's detectors export (``torch.export``) with their postprocessing: see the
    module docstring for what changes. Eager calls in the block take the same forms (same results)."""
    import torchvision.ops
    from torchvision.models.detection import _utils as detection_utils
    from torchvision.models.detection import roi_heads, transform
    from torchvision.ops import boxes as boxes_module
    from torchvision.ops import poolers

    swaps = (
        (boxes_module, "batched_nms", batched_nms),
        (torchvision.ops, "batched_nms", batched_nms),
        (poolers, "_multiscale_roi_align", multiscale_roi_align),
        (roi_heads, "paste_masks_in_image", paste_masks_in_image),
        (transform, "paste_masks_in_image", paste_masks_in_image),
        (detection_utils.BoxCoder, "decode", box_coder_decode),
    )
    originals = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    try:
        for module, name, replacement in swaps:
            setattr(module, name, replacement)
        yield
    finally:
        for module, name, original in originals:
            setattr(module, name, original)
