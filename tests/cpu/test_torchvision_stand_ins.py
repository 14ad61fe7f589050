"""torchvision on a machine where its ops library does not load (pip's CUDA build beside a CPU-only torch):
``import torchtrt_plugins.vision`` first makes it importable, its detection models build and its ops run our CPU
references, and :func:`torchtrt_plugins.vision.reference_deform_conv2d` against closed-form cases."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F
from torchvision_site import require_torchvision

require_torchvision()  # before torchtrt_plugins.vision, which stands in for its ops where they do not load
if "torchtrt_plugins.vision" in sys.modules and "torchvision" not in sys.modules:
    # This worker imported torchtrt_plugins.vision before torchvision was on the path (another file ran first).
    pytest.skip("needs torchvision on the path before torchtrt_plugins.vision is imported", allow_module_level=True)

from torchtrt_plugins import vision  # noqa: E402


def _stand_ins_only():
    if vision.TORCHVISION:
        pytest.skip("torchvision's own ops library is loaded: no stand-ins")


def test_schemas_are_torchvisions():
    _stand_ins_only()
    ops = torch.ops.torchvision
    assert str(ops.deform_conv2d.default._schema) == "torchvision::" + vision.DEFORM_CONV2D_SCHEMA
    assert str(ops.qnms.default._schema) == "torchvision::" + vision.QNMS_SCHEMA


def test_torchvision_python_calls_the_ops():
    _stand_ins_only()
    import torchvision

    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.1], [2.0, 2.0, 3.0, 3.0]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    assert torchvision.ops.nms(boxes, scores, 0.5).tolist() == [0, 2]
    assert torchvision.ops.batched_nms(boxes, scores, torch.tensor([0, 1, 1]), 0.5).tolist() == [0, 1, 2]
    image, rois = torch.randn(1, 2, 8, 8), torch.tensor([[0.0, 1.0, 1.0, 5.0, 5.0]])
    program = torch.export.export(torchvision.ops.RoIAlign(3, 0.5, 2), (image, rois))
    targets = [str(node.target) for node in program.graph.nodes if node.op == "call_function"]
    assert targets == ["torchvision.roi_align.default"]  # not torchvision's pure-Python RoIAlign
    expected = vision.reference_roi_align(image, rois, 0.5, 3, 3, 2, False)
    torch.testing.assert_close(program.module()(image, rois), expected)


def test_detection_models_build_and_run():
    from torchvision.models import detection

    torch.manual_seed(0)
    model = detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=3, min_size=64, max_size=64
    ).eval()
    with torch.no_grad():
        (out,) = model([torch.rand(3, 64, 64)])
    assert set(out) == {"boxes", "scores", "labels"} and out["boxes"].shape[1] == 4


def _deform_case(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 4, 7, 8, generator=generator)
    weight, bias = torch.randn(6, 2, 3, 3, generator=generator), torch.randn(6, generator=generator)
    return x, weight, bias, torch.zeros(2, 2 * 2 * 9, 7, 8)


def _deform(x, weight, offset, mask, bias, use_mask=True):
    return vision.reference_deform_conv2d(x, weight, offset, mask, bias, 1, 1, 1, 1, 1, 1, 2, 2, use_mask)


def test_deform_conv2d_without_offsets_is_a_grouped_conv():
    x, weight, bias, offset = _deform_case()
    ones = torch.ones(2, 2 * 9, 7, 8)
    torch.testing.assert_close(_deform(x, weight, offset, ones, bias), F.conv2d(x, weight, bias, padding=1, groups=2))


def test_deform_conv2d_offsets_and_mask():
    x, weight, bias, offset = _deform_case(1)
    offset[:, 0::2] = 1.0  # every tap one row down: a conv over the image moved up a row, zeros below
    shifted = F.conv2d(F.pad(x, (1, 1, 0, 2)), weight, bias, groups=2)
    torch.testing.assert_close(_deform(x, weight, offset, torch.empty(0), bias, use_mask=False), shifted)
    half = torch.full((2, 2 * 9, 7, 8), 0.5)
    offset[:, 0::2] = 0.5  # halfway between rows: the mean of the two, halved by the mask
    between = (F.conv2d(F.pad(x, (1, 1, 1, 1)), weight, padding=0, groups=2) + shifted - bias[:, None, None]) / 2
    torch.testing.assert_close(_deform(x, weight, offset, half, bias), between / 2 + bias[:, None, None])


def test_deform_conv2d_opcheck():
    _stand_ins_only()
    x, weight, bias, offset = _deform_case(2)
    offset = offset + 0.7 * torch.randn(offset.shape, generator=torch.Generator().manual_seed(3))
    mask = torch.rand(2, 2 * 9, 7, 8, generator=torch.Generator().manual_seed(4))
    args = (x, weight, offset, mask, bias, 1, 1, 1, 1, 1, 1, 2, 2, True)
    torch.library.opcheck(
        torch.ops.torchvision.deform_conv2d.default, args, test_utils=("test_schema", "test_faketensor")
    )
