"""myops: two torch ops with TensorRT plugins, declared with torchtrt_plugins and built with its SDK.

- ``myops::scaled_add(x, y, alpha=1.0) = x + alpha * y`` (two kernels, declared as tactics);
- ``myops::filter_above(x, threshold)``: the elements of x above threshold, in order: a data-dependent size.

Nothing here is TensorRT- or torchtrt-specific C++: the kernels in ``csrc/myops.cu`` are torch-free launchers.
"""

from __future__ import annotations

from pathlib import Path

import torch

import torchtrt_plugins as ttp

FLOATS = (torch.float32, torch.float16, torch.bfloat16)

LIBRARY = ttp.sdk.PluginLibrary("myops", sources=[Path(__file__).parent / "csrc" / "myops.cu"])


def reference_scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """x + alpha * y in fp32, rounded once to x's dtype (what the kernels do)."""
    return (x.float() + alpha * y.float()).to(x.dtype)


def reference_filter_above(x: torch.Tensor, threshold: float) -> torch.Tensor:
    flat = x.reshape(-1)
    return flat[flat > threshold]


@torch.library.custom_op("myops::scaled_add", mutates_args=(), device_types="cpu")
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    return reference_scaled_add(x, y, alpha)


@scaled_add.register_fake
def _(x, y, alpha=1.0):
    torch._check(x.shape == y.shape, lambda: f"myops.scaled_add: 'y' must have the shape of 'x' {tuple(x.shape)}")
    return torch.empty_like(x)


@torch.library.custom_op("myops::filter_above", mutates_args=(), device_types="cpu")
def filter_above(x: torch.Tensor, threshold: float) -> torch.Tensor:
    return reference_filter_above(x, threshold).clone()


@filter_above.register_fake
def _(x, threshold):
    kept = torch.library.get_ctx().new_dynamic_size()
    torch._check(kept <= x.numel())
    return x.new_empty((kept,))


SCALED_ADD = ttp.declare(
    "myops::scaled_add",
    library=LIBRARY,
    plugin_name="ScaledAdd",
    launcher="myops::scaledAdd",
    tactics={1: "myops::scaledAddScalar", 2: "myops::scaledAddVector"},
    ranges={"alpha": ttp.Range(min=-1e4, max=1e4)},
    dtypes={"x": FLOATS, "y": FLOATS},
    same_dtype={"y": "x"},
    reference=reference_scaled_add,
    tolerances={
        torch.float32: ttp.Tolerance(1e-6, 1e-6),
        torch.float16: ttp.Tolerance(1e-3, 1e-3),
        torch.bfloat16: ttp.Tolerance(8e-3, 8e-3),
    },
)

FILTER_ABOVE = ttp.declare(
    "myops::filter_above",
    library=LIBRARY,
    plugin_name="FilterAbove",
    launcher="myops::filterAbove",
    ranges={"threshold": ttp.Range(min=-1e30, max=1e30)},
    dtypes={"x": (torch.float32,)},
    data_dependent=True,
    sizes_first=True,
    reference=reference_filter_above,
)
