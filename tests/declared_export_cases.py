"""ONNX export cases for ops declared with ``torchtrt_plugins.declare`` outside our catalogue: the example package's
ops (examples/myops, built with the SDK) and torchvision's ops (``torchtrt_plugins.vision``). Used by the cpu tier
(export structure) and the rtx tier (NVIDIA's parser and builder, with the declared libraries loaded)."""

from __future__ import annotations

import torch
from example_package import EXAMPLE, import_myops
from export_cases import ExportCase
from torch import nn

from torchtrt_plugins.testing import sdk_build_unavailable


class ScaledAddCall(nn.Module):
    def forward(self, x, y):
        return torch.ops.myops.scaled_add(x * 2, y, 0.5) + 1


class FilterAboveCall(nn.Module):
    def forward(self, x):
        return torch.ops.myops.filter_above(x, 0.25) * 2


class RoiAlignCall(nn.Module):
    def forward(self, x, rois):
        return torch.ops.torchvision.roi_align(x, rois, 0.5, 3, 2, 2, True)


class DeformConv2dCall(nn.Module):
    def forward(self, x, weight, offset, mask, bias):
        return torch.ops.torchvision.deform_conv2d(x, weight, offset, mask, bias, 1, 1, 1, 1, 1, 1, 2, 1, True)


class MultiScaleRoiAlignCall(nn.Module):
    def forward(self, fine, coarse, rois):
        return torch.ops.torchtrt_vision.multi_scale_roi_align_2(fine, coarse, rois, 0.25, 0.125, 3, 3, 2)


class NmsCall(nn.Module):
    def forward(self, dets, scores):
        return torch.ops.torchvision.nms(dets, scores, 0.5)


def _boxes(n: int) -> torch.Tensor:
    corner = torch.rand(n, 2) * 8
    return torch.cat([corner, corner + 1 + torch.rand(n, 2) * 4], dim=1)


def libraries() -> list:
    """The declared ops' plugin libraries (``sdk.PluginLibrary``), after importing what declares them."""
    import torchtrt_plugins.vision as vision

    return [import_myops().LIBRARY, vision.LIBRARY]


def unavailable() -> str | None:
    """Why the declared ops cannot be exported here (their libraries cannot be built, or the example package is not
    beside these tests), or None."""
    if not EXAMPLE.is_dir():
        return f"the example package is not here ({EXAMPLE})"
    return sdk_build_unavailable()


OPS = frozenset(
    {
        "myops::scaled_add",
        "myops::filter_above",
        "torchvision::roi_align",
        "torchvision::nms",
        "torchvision::deform_conv2d",
        "torchtrt_vision::multi_scale_roi_align_2",
    }
)


def require() -> None:
    """In a test that needs the declared ops: skip, saying why, where they are :func:`unavailable`."""
    reason = unavailable()
    if reason:
        import pytest

        pytest.skip(reason)


def assert_covered(declared: list[ExportCase]) -> None:
    """The declared-op cases run wherever their libraries can be built; elsewhere this skips, saying why."""
    require()
    assert {c.op for c in declared} == OPS


def cases() -> list[ExportCase]:
    """The cases; none where :func:`unavailable` gives a reason (``test_declared_ops_are_covered`` reports it)."""
    if unavailable():
        return []
    libraries()
    torch.manual_seed(0)
    rois = torch.cat([torch.tensor([[0.0], [1.0], [0.0]]), _boxes(3)], dim=1)
    return [
        ExportCase(
            "myops::scaled_add",
            "dynamic",
            ScaledAddCall(),
            (torch.randn(2, 3), torch.randn(2, 3)),
            {"x": {0: "batch"}, "y": {0: "batch"}},
        ),
        ExportCase("myops::filter_above", "dynamic", FilterAboveCall(), (torch.randn(4, 5),), {"x": {0: "rows"}}),
        ExportCase(
            "torchvision::roi_align",
            "dynamic_rois",
            RoiAlignCall(),
            (torch.randn(2, 3, 8, 8), rois),
            {"x": {0: "batch"}, "rois": {0: "rois"}},
        ),
        ExportCase(
            "torchvision::deform_conv2d",
            "dynamic_batch",
            DeformConv2dCall(),
            (
                torch.randn(2, 4, 6, 5),
                torch.randn(6, 2, 3, 3),
                torch.randn(2, 18, 6, 5),
                torch.rand(2, 9, 6, 5),
                torch.randn(6),
            ),
            {"x": {0: "batch"}, "offset": {0: "batch"}, "mask": {0: "batch"}},
        ),
        ExportCase(
            "torchtrt_vision::multi_scale_roi_align_2",
            "dynamic_rois",
            MultiScaleRoiAlignCall(),
            (torch.randn(2, 3, 16, 16), torch.randn(2, 3, 8, 8), torch.cat([rois[:, :1], rois[:, 1:] * 6], 1)),
            {"fine": {0: "batch"}, "coarse": {0: "batch"}, "rois": {0: "rois"}},
        ),
        ExportCase(
            "torchvision::nms", "dynamic", NmsCall(), (_boxes(6), torch.rand(6)), {"dets": {0: "n"}, "scores": {0: "n"}}
        ),
    ]
