"""Old path of :mod:`torchtrt_plugins.kernels` (describe, compile, source, launch), kept for one release."""

from .kernels.compile import fingerprint, parse_archs
from .kernels.describe import CudaKernel, Kernel, KernelError, TritonKernel, Variant, cuda_kernel, triton_kernel
from .kernels.launch import launch_from_python
from .kernels.source import generate_source, kernel_sizes

__all__ = [
    "CudaKernel",
    "Kernel",
    "KernelError",
    "TritonKernel",
    "Variant",
    "cuda_kernel",
    "fingerprint",
    "generate_source",
    "kernel_sizes",
    "launch_from_python",
    "parse_archs",
    "triton_kernel",
]
