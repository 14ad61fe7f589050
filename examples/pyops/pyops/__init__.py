"""pyops: TensorRT plugins whose kernels are written in Python, by others, declared with torchtrt_plugins.

- ``pyops::liger_rms_norm(x, weight, eps, offset) -> (y, rstd)``: Liger-Kernel's own Triton RMSNorm forward kernel
  (``liger_kernel.ops.rms_norm._rms_norm_forward_kernel``, Llama casting mode), imported from the installed
  package, launched with Liger's own block settings (``calculate_settings``);
- ``pyops::swiglu(gate, up, alpha) = gate * sigmoid(alpha * gate) * up``: a CuPy ``RawModule`` (CUDA source,
  templated on the dtype); two kernels, declared as tactics.

``LIBRARY.build()`` compiles both ahead of time to cubin (Triton's compiler, NVRTC) into the plugin library and
the launcher library: no Python, Triton or CuPy where the engine runs.
"""

from __future__ import annotations

import math

import cupy
import torch
from liger_kernel.ops.rms_norm import _rms_norm_forward_kernel
from liger_kernel.ops.utils import calculate_settings

import torchtrt_plugins as ttp

FLOATS = (torch.float32, torch.float16, torch.bfloat16)

LIBRARY = ttp.sdk.PluginLibrary("pyops", sources=[])
TOLERANCES = {
    torch.float32: ttp.Tolerance(1e-5, 1e-5),
    torch.float16: ttp.Tolerance(2e-3, 2e-3),
    torch.bfloat16: ttp.Tolerance(1.6e-2, 1.6e-2),
}

#: Liger's casting mode "llama": rstd in fp32, the weight multiplied in the input's dtype.
LLAMA = 0
#: The hidden sizes compiled for (a row of up to this many elements): Liger's BLOCK_SIZE and num_warps for each.
RMS_NORM_BLOCKS = (256, 1024, 2048, 4096, 8192, 16384)


def reference_liger_rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, offset: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Liger's Llama mode: rstd in fp32; x * rstd rounded to x's dtype, then times (offset + weight)."""
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    y = ((xf * rstd).to(x.dtype).float() * (offset + weight.float())).to(x.dtype)
    return y, rstd.squeeze(-1)


# Defined with torch.library.Library rather than torch.library.custom_op: custom_op adds a Python autograd kernel
# that every eager call passes through (about 8 us of host time per call on the H100 host), which an inference op
# with no backward does not need. swiglu below is a custom_op, to show both.
_LIB = torch.library.Library("pyops", "DEF")
_LIB.define("liger_rms_norm(Tensor x, Tensor weight, float eps=1e-06, float offset=0.0) -> (Tensor, Tensor)")
_LIB.impl("liger_rms_norm", reference_liger_rms_norm, "CPU")


@torch.library.register_fake("pyops::liger_rms_norm", lib=_LIB)
def _(x, weight, eps=1e-6, offset=0.0):
    torch._check(weight.dim() == 1 and weight.shape[0] == x.shape[-1], lambda: "pyops.liger_rms_norm: weight shape")
    return torch.empty_like(x), x.new_empty(x.shape[:-1], dtype=torch.float32)


LIGER_RMS_NORM = ttp.declare(
    "pyops::liger_rms_norm",
    library=LIBRARY,
    plugin_name="LigerRMSNorm",
    launcher=ttp.triton_kernel(
        _rms_norm_forward_kernel,
        grid=lambda x: (math.prod(x.shape[:-1]),),
        params={
            "Y_ptr": "out0",
            "Y_row_stride": lambda x: x.shape[-1],
            "X_ptr": "x",
            "X_row_stride": lambda x: x.shape[-1],
            "W_ptr": "weight",
            "W_row_stride": 1,
            "RSTD_ptr": "out1",
            "RSTD_row_stride": 1,
            "n_cols": lambda x: x.shape[-1],
        },
        constexprs={"casting_mode": LLAMA, "elementwise_affine": True},
        select=lambda x: x.shape[-1],
        variants={b: {"BLOCK_SIZE": b, "num_warps": calculate_settings(b)[1]} for b in RMS_NORM_BLOCKS},
    ),
    ranges={"eps": ttp.Range(min=0.0, max=1.0), "offset": ttp.Range(min=-1e4, max=1e4)},
    dtypes={"x": FLOATS, "weight": FLOATS},
    same_dtype={"weight": "x"},
    reference=reference_liger_rms_norm,
    tolerances=TOLERANCES,
)

SWIGLU_SOURCE = r"""
#include <cuda_bf16.h>
#include <cuda_fp16.h>

template <typename T>
__device__ __forceinline__ T swigluOne(T g, T u, float alpha)
{
    float const gate = static_cast<float>(g);
    return static_cast<T>(gate / (1.0f + __expf(-alpha * gate)) * static_cast<float>(u));
}

// One element per thread.
template <typename T>
__global__ void swiglu(T const* __restrict__ gate, T const* __restrict__ up, T* __restrict__ out, long long n,
    float alpha)
{
    long long const i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i < n)
    {
        out[i] = swigluOne(gate[i], up[i], alpha);
    }
}

// Four elements per thread, strided by the block so that a warp's loads stay coalesced.
template <typename T>
__global__ void swiglu4(T const* __restrict__ gate, T const* __restrict__ up, T* __restrict__ out, long long n,
    float alpha)
{
    long long const base = blockIdx.x * 4LL * blockDim.x + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; ++k)
    {
        long long const i = base + k * static_cast<long long>(blockDim.x);
        if (i < n)
        {
            out[i] = swigluOne(gate[i], up[i], alpha);
        }
    }
}
"""
_CXX_TYPES = {torch.float32: "float", torch.float16: "__half", torch.bfloat16: "__nv_bfloat16"}
SWIGLU_MODULE = cupy.RawModule(
    code=SWIGLU_SOURCE,
    options=("-std=c++17",),
    name_expressions=[f"{k}<{t}>" for k in ("swiglu", "swiglu4") for t in _CXX_TYPES.values()],
)
SWIGLU_BLOCK = 256


def _swiglu_kernel(function: str, per_thread: int) -> ttp.describe.CudaKernel:
    return ttp.cuda_kernel(
        SWIGLU_MODULE,
        names={dtype: f"{function}<{t}>" for dtype, t in _CXX_TYPES.items()},
        grid=lambda gate: (-(-gate.numel() // (SWIGLU_BLOCK * per_thread)),),
        block=SWIGLU_BLOCK,
        params=["gate", "up", "out0", lambda gate: gate.numel(), "alpha"],
    )


def reference_swiglu(gate: torch.Tensor, up: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    g = gate.float()
    return (g * torch.sigmoid(alpha * g) * up.float()).to(gate.dtype)


@torch.library.custom_op("pyops::swiglu", mutates_args=(), device_types="cpu")
def swiglu(gate: torch.Tensor, up: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    return reference_swiglu(gate, up, alpha)


@swiglu.register_fake
def _(gate, up, alpha=1.0):
    torch._check(gate.shape == up.shape, lambda: "pyops.swiglu: 'up' must have the shape of 'gate'")
    return torch.empty_like(gate)


SWIGLU = ttp.declare(
    "pyops::swiglu",
    library=LIBRARY,
    plugin_name="CuPySwiGLU",
    launcher=_swiglu_kernel("swiglu", 1),
    tactics={1: _swiglu_kernel("swiglu4", 4)},
    ranges={"alpha": ttp.Range(min=-100.0, max=100.0)},
    dtypes={"gate": FLOATS, "up": FLOATS},
    same_dtype={"up": "gate"},
    reference=reference_swiglu,
    tolerances=TOLERANCES,
)
