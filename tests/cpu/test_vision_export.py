"""``torchtrt_plugins.vision.exportable()``: torchvision's batched_nms, MultiScaleRoIAlign, BoxCoder.decode and Mask
R-CNN's mask pasting on boxes of a data-dependent count export within it (not without), give torchvision's own
results, and are put back after."""

from __future__ import annotations

import sys

import pytest
import torch
from torchvision_site import require_torchvision

require_torchvision()  # before torchtrt_plugins.vision, which stands in for its ops where they do not load
if "torchtrt_plugins.vision" in sys.modules and "torchvision" not in sys.modules:
    # This worker imported torchtrt_plugins.vision before torchvision was on the path (another file ran first).
    pytest.skip("needs torchvision on the path before torchtrt_plugins.vision is imported", allow_module_level=True)

from torchtrt_plugins import vision, vision_export  # noqa: E402

assert vision.TORCHVISION_IMPORTABLE

import torchvision  # noqa: E402
from torchvision.models.detection import roi_heads, transform  # noqa: E402
from torchvision.models.detection._utils import BoxCoder  # noqa: E402
from torchvision.ops import boxes as box_ops  # noqa: E402
from torchvision.ops import poolers  # noqa: E402


class FilteredNms(torch.nn.Module):
    """Boxes above a score, then batched NMS over them, as detectors' postprocessing does."""

    def forward(self, boxes, scores, labels):
        keep = scores > 0.3
        boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
        kept = box_ops.batched_nms(boxes, scores, labels, 0.5)
        return boxes[kept], scores[kept]


class FilteredPooling(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = torchvision.ops.MultiScaleRoIAlign(["0", "1"], 3, 2)

    def forward(self, f0, f1, boxes, scores):
        return self.pool({"0": f0, "1": f1}, [boxes[scores > 0.3]], [(64, 64)])


class FilteredPaste(torch.nn.Module):
    """Masks of the boxes above a score pasted into a 48 x 40 image, as Mask R-CNN's postprocessing does."""

    def forward(self, masks, boxes, scores):
        keep = scores > 0.3
        return transform.paste_masks_in_image(masks[keep], boxes[keep], (48, 40))


class FilteredDecode(torch.nn.Module):
    """The codes of the boxes above a score decoded (k = 2 classes), as the box head's postprocessing decodes what
    the RPN's NMS kept."""

    def forward(self, boxes, scores, codes):
        keep = scores > 0.3
        return BoxCoder((10.0, 10.0, 5.0, 5.0)).decode(codes[keep], [boxes[keep]])


def _paste_inputs(n: int = 40, seed: int = 2):
    """Masks (n, 1, 28, 28) and boxes clipped to the image as torchvision's postprocessing leaves them: some past an
    edge before clipping, some thinner than a pixel, some larger than the mask (upsampled), some smaller."""
    generator = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=generator) * 56 - 8
    size = torch.rand(n, 2, generator=generator) ** 3 * 44 + 0.2
    boxes = torch.cat([corner, corner + size], 1)
    boxes[:, 0::2] = boxes[:, 0::2].clamp(0, 40)
    boxes[:, 1::2] = boxes[:, 1::2].clamp(0, 48)
    return torch.rand(n, 1, 28, 28, generator=generator), boxes, torch.rand(n, generator=generator)


def _boxes(n: int = 30, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=generator) * 40
    size = torch.rand(n, 2, generator=generator) * 20 + 2
    scores = torch.rand(n, generator=generator)
    return torch.cat([corner, corner + size], 1), scores, torch.randint(0, 3, (n,), generator=generator)


def _pooling_inputs():
    generator = torch.Generator().manual_seed(1)
    boxes, scores, _ = _boxes()
    boxes[:5, 2:] += 30  # large boxes: they go to the coarser level
    return torch.randn(1, 4, 16, 16, generator=generator), torch.randn(1, 4, 8, 8, generator=generator), boxes, scores


@pytest.mark.parametrize(
    "module, inputs, exported_op",
    [
        (FilteredNms(), _boxes(), "torchvision.nms"),
        (FilteredPooling(), _pooling_inputs(), "torchvision.roi_align"),
        (FilteredPaste(), _paste_inputs(), "aten.bmm"),
        (FilteredDecode(), (*_boxes()[:2], torch.randn(30, 8, generator=torch.Generator().manual_seed(4))), "aten.exp"),
    ],
    ids=["batched_nms", "multiscale_roi_align", "paste_masks_in_image", "box_coder_decode"],
)
def test_exports_only_within_and_matches_torchvision(module, inputs, exported_op):
    with pytest.raises(Exception, match="data-dependent|GuardOnDataDependentSymNode|Could not guard"):
        torch.export.export(module, inputs)
    expected = module(*inputs)
    with vision.exportable():
        program = torch.export.export(module, inputs)
        assert exported_op in str(program.graph)
        got = program.module()(*inputs)
    for g, e in zip(
        got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)
    ):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_paste_masks_in_image_equals_torchvision(dtype):
    masks, boxes, _ = _paste_inputs(seed=3)
    masks, boxes = masks.to(dtype), boxes.to(dtype)
    expected = roi_heads.paste_masks_in_image(masks, boxes, (48, 40))
    got = vision_export.paste_masks_in_image(masks, boxes, (48, 40))
    assert got.dtype == dtype and got.shape == expected.shape == (40, 1, 48, 40)
    assert (expected > 0).flatten(1).any(1).sum() >= 30  # most boxes are inside the image
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    empty = vision_export.paste_masks_in_image(masks[:0], boxes[:0], (48, 40))
    assert empty.shape == (0, 1, 48, 40) and empty.dtype == dtype


def test_paste_masks_names_bad_arguments():
    with pytest.raises(ValueError, match="paste_masks: arguments 'masks' and 'boxes' must have shapes"):
        vision_export.paste_masks(torch.zeros(2, 1, 4, 4), torch.zeros(2, 4, dtype=torch.int64), 8, 8)
    with pytest.raises(ValueError, match="paste_masks: argument 'boxes' must be integer pixels"):
        vision_export.paste_masks(torch.zeros(2, 4, 4), torch.zeros(2, 4), 8, 8)


def test_originals_are_put_back():
    def current():
        return (
            box_ops.batched_nms,
            torchvision.ops.batched_nms,
            poolers._multiscale_roi_align,
            roi_heads.paste_masks_in_image,
            transform.paste_masks_in_image,
            BoxCoder.decode,
        )

    before = current()
    with pytest.raises(RuntimeError, match="inside"):
        with vision.exportable():
            assert box_ops.batched_nms is vision_export.batched_nms
            assert transform.paste_masks_in_image is vision_export.paste_masks_in_image
            assert BoxCoder.decode is vision_export.box_coder_decode
            raise RuntimeError("inside")
    assert current() == before


def test_multiscale_roi_align_names_missing_scales():
    with pytest.raises(ValueError, match="multiscale_roi_align: 'scales' and 'mapper'"):
        vision_export.multiscale_roi_align([torch.zeros(1, 1, 4, 4)], [torch.zeros(0, 4)], [2, 2], 2, None, None)
