"""deform_conv2d's arguments for the cpu and gpu tiers (tests/cpu/test_deform_conv2d.py, tests/gpu/...)."""

from __future__ import annotations

import torch


def make_args(
    batch=2,
    channels=4,
    size=(6, 7),
    out_channels=6,
    kernel=(3, 3),
    stride=(1, 1),
    pad=(1, 1),
    dilation=(1, 1),
    groups=1,
    offset_groups=1,
    use_mask=True,
    spread=2.0,
    dtype=torch.float32,
    seed=0,
):
    """deform_conv2d's arguments, with offsets of up to ``spread`` pixels (many samples fall between pixels, some
    outside the image) and a mask in [0, 1]; without ``use_mask`` the mask is torchvision's (N, 1) placeholder."""
    generator = torch.Generator().manual_seed(seed)
    height, width = size
    out_h = (height + 2 * pad[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    out_w = (width + 2 * pad[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    taps = kernel[0] * kernel[1]
    x = torch.randn(batch, channels, height, width, generator=generator)
    weight = torch.randn(out_channels, channels // groups, *kernel, generator=generator)
    offset = (torch.rand(batch, 2 * offset_groups * taps, out_h, out_w, generator=generator) * 2 - 1) * spread
    if use_mask:
        mask = torch.rand(batch, offset_groups * taps, out_h, out_w, generator=generator)
    else:
        mask = torch.zeros(batch, 1)
    bias = torch.randn(out_channels, generator=generator)
    tensors = tuple(t.to(dtype) for t in (x, weight, offset, mask, bias))
    return (*tensors, *stride, *pad, *dilation, groups, offset_groups, use_mask)
