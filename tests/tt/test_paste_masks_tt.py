"""Mask R-CNN's mask pasting as ``vision.exportable()`` exports it (``vision_export.paste_masks_in_image``: two
batched matrix products) inside Torch-TensorRT's pipeline: for a dynamic number of detections it is one engine of
TensorRT's own layers, the partitioned graph gives torchvision's pasted masks, and RTX's builder builds its plan."""

from __future__ import annotations

import torch
import tt_helpers as tt

SIZE = (48, 40)


class _Paste(torch.nn.Module):
    def forward(self, masks, boxes):
        from torchvision.models.detection import transform

        return transform.paste_masks_in_image(masks.sigmoid(), boxes, SIZE)


def _case():
    from torchvision_site import require_torchvision

    require_torchvision()
    from torchtrt_plugins import vision

    generator = torch.Generator().manual_seed(0)
    corner = torch.rand(12, 2, generator=generator) * 36
    boxes = torch.cat([corner, corner + torch.rand(12, 2, generator=generator) * 30 + 0.5], 1)
    boxes[:, 0::2] = boxes[:, 0::2].clamp(0, SIZE[1])
    boxes[:, 1::2] = boxes[:, 1::2].clamp(0, SIZE[0])
    inputs = [torch.randn(12, 1, 28, 28, generator=generator), boxes]
    detections = torch.export.Dim("detections", min=1, max=100)
    with vision.exportable():
        program = torch.export.export(_Paste(), tuple(inputs), dynamic_shapes=({0: detections}, {0: detections}))
    return program, inputs


def test_pasting_is_one_engine_and_gives_torchvisions_masks():
    program, inputs = _case()
    partitioned = tt.dryrun(program, inputs)
    targets = tt.targets_by_submodule(partitioned)
    assert [name for name in targets if "_run_on_acc" in name] == ["_run_on_acc_0"]
    assert "aten.bmm.default" in targets["_run_on_acc_0"]
    torch_segments = [t for name, t in targets.items() if "_run_on_acc" not in name]
    assert not any(torch_segments), f"left to PyTorch: {torch_segments}"
    expected = _Paste()(*inputs)  # outside vision.exportable(): torchvision's loop
    torch.testing.assert_close(partitioned(*inputs), expected, atol=1e-5, rtol=1e-5)


def test_pasting_plan_builds():
    program, inputs = _case()
    assert len(tt.serialized_engine(program, inputs)) > 0
