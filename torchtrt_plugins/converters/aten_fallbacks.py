"""Converters of ours for ATen nodes that Torch-TensorRT 2.13 sends to PyTorch although TensorRT has the layers.

Each is registered after Torch-TensorRT's own converter of the op and accepts a node only where that converter's
validator rejects it (the registry tries converters in order), so it never shadows a working one.

- ``aten.avg_pool2d`` with ``ceil_mode=True`` (RT-DETR's ResNet shortcut, ``nn.AvgPool2d(2, 2, 0, ceil_mode=True)``):
  Torch-TensorRT's ``avg_pool_param_validator`` rejects every ``ceil_mode=True``. Where every spatial size is static and
  ``(size + 2 * padding - kernel) % stride == 0``, ceil and floor make the same windows, so the node is the floor-mode
  pool, which Torch-TensorRT's own layer code builds (``impl.pool.avg_poolNd``). Other ceil-mode pools stay in PyTorch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["avg_pool2d_ceil_is_floor", "disabled", "register"]

_registered = False
_disabled = False


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within the block these converters take no node (what Torch-TensorRT does without us)."""
    global _disabled
    before, _disabled = _disabled, True
    try:
        yield
    finally:
        _disabled = before


def _pair(value: Any) -> list[int]:
    return list(value) * (2 if len(value) == 1 else 1) if isinstance(value, (list, tuple)) else [value, value]


def _pool_args(node_args: tuple) -> tuple[list[int], list[int], list[int], bool, bool, Any]:
    """``(kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)`` of avg_pool2d's arguments."""
    args = list(node_args) + [None] * (7 - len(node_args))
    kernel = _pair(args[1])
    stride = _pair(args[2]) if args[2] else kernel
    padding = _pair(args[3] if args[3] is not None else 0)
    ceil_mode = bool(args[4]) if args[4] is not None else False
    count_include_pad = True if args[5] is None else bool(args[5])
    return kernel, stride, padding, ceil_mode, count_include_pad, args[6]


def avg_pool2d_ceil_is_floor(node: torch.fx.Node, settings: Any = None) -> bool:
    """True for an ``aten.avg_pool2d`` node with ``ceil_mode=True`` whose windows are the floor mode's."""
    kernel, stride, padding, ceil_mode, _, divisor_override = _pool_args(node.args)
    value = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if _disabled or not ceil_mode or divisor_override is not None or value is None or value.dim() < 2:
        return False
    sizes = value.shape[-2:]
    if not all(isinstance(size, int) for size in sizes):
        return False
    return all((size + 2 * p - k) % s == 0 for size, k, s, p in zip(sizes, kernel, stride, padding))


def convert_avg_pool2d_ceil_as_floor(ctx: Any, target: Any, args: tuple, kwargs: dict, name: str):
    from torch_tensorrt.dynamo._SourceIR import SourceIR
    from torch_tensorrt.dynamo.conversion import impl

    kernel, stride, padding, _, count_include_pad, _ = _pool_args(args)
    return impl.pool.avg_poolNd(
        ctx,
        target,
        source_ir=SourceIR.ATEN,
        name=name,
        input=args[0],
        kernel_size=kernel,
        stride=stride,
        padding=padding,
        ceil_mode=False,
        count_include_pad=count_include_pad,
        divisor_override=None,
    )


def register() -> bool:
    """Register the converters above with Torch-TensorRT (after its own); False when it is not installed."""
    global _registered
    from .._compat import torch_tensorrt

    if torch_tensorrt() is None:
        return False
    if _registered:
        return True
    from torch_tensorrt.dynamo.conversion._ConverterRegistry import dynamo_tensorrt_converter

    dynamo_tensorrt_converter(
        torch.ops.aten.avg_pool2d.default, capability_validator=avg_pool2d_ceil_is_floor, supports_dynamic_shapes=True
    )(convert_avg_pool2d_ceil_as_floor)
    _registered = True
    return True
