"""A model computing what torchvision's MultiScaleRoIAlign computes (torchvision/ops/poolers.py, read from its source:
LevelMapper, _convert_to_roi_format, _multiscale_roi_align), on ``torch.ops.torchvision.roi_align``: ours where
torchvision's ops do not load (tests/cpu/test_multi_scale_roi_align.py exports it and lowers its graph)."""

from __future__ import annotations

import torch
from torch import nn


def box_area(boxes: torch.Tensor) -> torch.Tensor:
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


class LevelMapper:
    def __init__(self, k_min: int, k_max: int, canonical_scale: int = 224, canonical_level: int = 4, eps=1e-6):
        self.k_min, self.k_max, self.s0, self.lvl0, self.eps = k_min, k_max, canonical_scale, canonical_level, eps

    def __call__(self, boxlists: list[torch.Tensor]) -> torch.Tensor:
        s = torch.sqrt(torch.cat([box_area(boxlist) for boxlist in boxlists]))
        target_lvls = torch.floor(self.lvl0 + torch.log2(s / self.s0) + torch.tensor(self.eps, dtype=s.dtype))
        target_lvls = torch.clamp(target_lvls, min=self.k_min, max=self.k_max)
        return (target_lvls.to(torch.int64) - self.k_min).to(torch.int64)


def convert_to_roi_format(boxes: list[torch.Tensor]) -> torch.Tensor:
    concat_boxes = torch.cat(boxes, dim=0)
    device, dtype = concat_boxes.device, concat_boxes.dtype
    ids = torch.cat(
        [torch.full_like(b[:, :1], i, dtype=dtype, layout=torch.strided, device=device) for i, b in enumerate(boxes)],
        dim=0,
    )
    return torch.cat([ids, concat_boxes], dim=1)


def roi_align(input, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False):
    return torch.ops.torchvision.roi_align(
        input, boxes, spatial_scale, output_size[0], output_size[1], sampling_ratio, aligned
    )


class MultiScaleRoIAlign(nn.Module):
    """MultiScaleRoIAlign with its scales given (torchvision infers them from the image size on the first call):
    features (the levels' maps, finest first), boxes (one (n_i, 4) tensor per image)."""

    def __init__(self, scales, output_size=(7, 7), sampling_ratio=2, canonical_scale=224, canonical_level=4):
        super().__init__()
        self.scales, self.output_size, self.sampling_ratio = list(scales), tuple(output_size), sampling_ratio
        k_min = int(-torch.log2(torch.tensor(scales[0], dtype=torch.float32)).item())
        k_max = int(-torch.log2(torch.tensor(scales[-1], dtype=torch.float32)).item())
        self.mapper = LevelMapper(k_min, k_max, canonical_scale, canonical_level)

    def forward(self, features: list[torch.Tensor], boxes: list[torch.Tensor]) -> torch.Tensor:
        rois = convert_to_roi_format(boxes)
        if len(features) == 1:
            return roi_align(features[0], rois, self.output_size, self.scales[0], self.sampling_ratio)
        levels = self.mapper(boxes)
        num_rois = len(rois)
        num_channels = features[0].shape[1]
        dtype, device = features[0].dtype, features[0].device
        result = torch.zeros((num_rois, num_channels) + self.output_size, dtype=dtype, device=device)
        for level, (per_level_feature, scale) in enumerate(zip(features, self.scales)):
            idx_in_level = torch.where(levels == level)[0]
            rois_per_level = rois[idx_in_level]
            result_idx_in_level = roi_align(
                per_level_feature, rois_per_level, self.output_size, scale, self.sampling_ratio
            )
            result[idx_in_level] = result_idx_in_level.to(result.dtype)
        return result


class Pooler(nn.Module):
    """MultiScaleRoIAlign over a fixed number of levels and images, as a detector's box head calls it."""

    def __init__(self, levels: int, images: int, **options):
        super().__init__()
        self.levels, self.images = levels, images
        self.pool = MultiScaleRoIAlign([2.0 ** -(2 + level) for level in range(levels)], **options)

    def forward(self, *tensors):
        return self.pool(list(tensors[: self.levels]), list(tensors[self.levels :]))


def inputs(
    levels: int = 4,
    images: int = 2,
    channels: int = 8,
    size: int = 256,
    boxes: int = 12,
    seed: int = 0,
    dtype=torch.float32,
):
    """Feature maps of strides 4, 8, ... of a size x size image, and boxes of every scale (so every level gets some)."""
    generator = torch.Generator().manual_seed(seed)
    features = [
        torch.randn(images, channels, size >> (2 + k), size >> (2 + k), generator=generator) for k in range(levels)
    ]
    lists = []
    for _ in range(images):
        side = torch.exp(torch.rand(boxes, 2, generator=generator) * torch.log(torch.tensor(size * 0.9))) + 1
        corner = torch.rand(boxes, 2, generator=generator) * (size - side)
        lists.append(torch.cat([corner, corner + side], 1))
    return tuple(t.to(dtype) for t in (*features, *lists))


class TorchvisionPooler(nn.Module):
    """torchvision's own ``MultiScaleRoIAlign`` over a fixed number of levels and images of ``size`` x ``size`` (its
    scales inferred from the feature sizes, as a detector's are): within ``vision.exportable()`` it exports every box
    pooled at every level and a ``torch.where`` chain (``vision_export.multiscale_roi_align``)."""

    def __init__(self, levels: int, images: int, size: int = 256, **options):
        from torchvision.ops import MultiScaleRoIAlign as Torchvision

        super().__init__()
        self.levels, self.images, self.size = levels, images, size
        self.pool = Torchvision(
            [str(level) for level in range(levels)], **{"output_size": 7, "sampling_ratio": 2, **options}
        )

    def forward(self, *tensors):
        features = {str(level): t for level, t in enumerate(tensors[: self.levels])}
        return self.pool(features, list(tensors[self.levels :]), [(self.size, self.size)] * self.images)
