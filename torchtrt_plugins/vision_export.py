"""Export-friendly forms of torchvision's detection code, applied while a block runs (:func:`exportable`).

torchvision's detectors do not ``torch.export`` as shipped: their postprocessing asks Python questions about
data-dependent sizes, which export cannot answer (``GuardOnDataDependentSymNode``):

- ``torchvision.ops.batched_nms`` picks its CPU path when ``boxes.numel() > 4000``, then returns early when
  ``boxes.numel() == 0``: both on boxes whose count is what score filtering left;
- ``MultiScaleRoIAlign`` sizes its output with ``len(rois)`` and pools each FPN level's boxes, picked with a
  data-dependent ``torch.where(levels == level)``.

Within :func:`exportable`, ``batched_nms`` is always the coordinate trick (one ``torchvision::nms``: the offset that
keeps classes apart is ``(max(boxes.max(), 0) + 1) * class``, which needs no early return for zero boxes), and
``MultiScaleRoIAlign`` pools every box at every level and keeps, per box, its own level's result
(``torch.where``): the same values with no data-dependent size, at one RoIAlign per level over all boxes. Mask
R-CNN's mask pasting (``paste_masks_in_image``, a Python loop over detections) is not changed and does not export.
torchvision's files are never edited: the module attributes its code looks up are swapped, and put back on exit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["batched_nms", "exportable", "multiscale_roi_align"]


def batched_nms(boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """torchvision's ``batched_nms`` as one ``torchvision::nms`` on class-offset boxes, with no size guard."""
    from torchvision.ops import nms

    max_coordinate = torch.cat((boxes.new_zeros(1), boxes.flatten())).max()
    offsets = idxs.to(boxes) * (max_coordinate + 1)
    return nms(boxes + offsets[:, None], scores, iou_threshold)


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


@contextlib.contextmanager
def exportable() -> Iterator[None]:
    """Within the block, torchvision's detectors export (``torch.export``) with their postprocessing: see the
    module docstring for what changes. Eager calls in the block take the same forms (same results)."""
    import torchvision.ops
    from torchvision.ops import boxes as boxes_module
    from torchvision.ops import poolers

    swaps = (
        (boxes_module, "batched_nms", batched_nms),
        (torchvision.ops, "batched_nms", batched_nms),
        (poolers, "_multiscale_roi_align", multiscale_roi_align),
    )
    originals = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    try:
        for module, name, replacement in swaps:
            setattr(module, name, replacement)
        yield
    finally:
        for module, name, original in originals:
            setattr(module, name, original)
