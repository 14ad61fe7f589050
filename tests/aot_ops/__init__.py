"""Small ops and kernels written in Python for the Python-kernel tests (tests/cpu/test_kernels_aot.py): a Triton
kernel (Triton needs the source of a @triton.jit function in a file) and CUDA sources."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * alpha, mask=mask)


SCALE_SOURCE = r"""
extern "C" __global__ void scale(float const* x, float* out, long long n, float alpha)
{
    long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i < n) out[i] = alpha * x[i];
}
"""


@torch.library.custom_op("aot_test::scale", mutates_args=(), device_types="cpu")
def scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha


@scale.register_fake
def _(x, alpha):
    return torch.empty_like(x)


@torch.library.custom_op("aot_test::count_above", mutates_args=(), device_types="cpu")
def count_above(x: torch.Tensor, threshold: float) -> torch.Tensor:
    return x[x > threshold].clone()


@count_above.register_fake
def _(x, threshold):
    kept = torch.library.get_ctx().new_dynamic_size()
    torch._check(kept <= x.numel())
    return x.new_empty((kept,))


@torch.library.custom_op("aot_test::mask_scale", mutates_args=(), device_types="cpu")
def mask_scale(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return x * mask


@mask_scale.register_fake
def _(x, mask):
    return torch.empty_like(x)


@triton.jit
def total_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0), axis=0))


@torch.library.custom_op("aot_test::total", mutates_args=(), device_types="cpu")
def total(x: torch.Tensor) -> torch.Tensor:
    return x.sum().reshape(1)


@total.register_fake
def _(x):
    return x.new_empty((1,))
