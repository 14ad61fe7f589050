"""``torchtrt_plugins.vision.exportable()``: torchvision's batched_nms and MultiScaleRoIAlign on boxes of a
data-dependent count export within it (not without), give torchvision's own results, and are put back after."""

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


@pytest.mark.parametrize("module, inputs", [(FilteredNms(), _boxes()), (FilteredPooling(), _pooling_inputs())])
def test_exports_only_within_and_matches_torchvision(module, inputs):
    with pytest.raises(Exception, match="data-dependent|GuardOnDataDependentSymNode|Could not guard"):
        torch.export.export(module, inputs)
    expected = module(*inputs)
    with vision.exportable():
        program = torch.export.export(module, inputs)
        assert "torchvision." in str(program.graph)
        got = program.module()(*inputs)
    for g, e in zip(
        got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)
    ):
        torch.testing.assert_close(g, e)


def test_originals_are_put_back():
    before = (box_ops.batched_nms, torchvision.ops.batched_nms, poolers._multiscale_roi_align)
    with pytest.raises(RuntimeError, match="inside"):
        with vision.exportable():
            assert box_ops.batched_nms is vision_export.batched_nms
            raise RuntimeError("inside")
    assert (box_ops.batched_nms, torchvision.ops.batched_nms, poolers._multiscale_roi_align) == before


def test_multiscale_roi_align_names_missing_scales():
    with pytest.raises(ValueError, match="multiscale_roi_align: 'scales' and 'mapper'"):
        vision_export.multiscale_roi_align([torch.zeros(1, 1, 4, 4)], [torch.zeros(0, 4)], [2, 2], 2, None, None)
