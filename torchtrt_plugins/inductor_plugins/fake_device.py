"""Inductor generating CUDA code on a machine without a GPU: a fake sm_90 device (an H200's properties).

Inductor reads the device through ``torch._dynamo.device_interface.CudaInterface`` and Triton's active driver; both
are replaced for the duration of :func:`fake_cuda_device`, so code generation and Triton's compiler (which needs no
GPU once its target is given) run as they would for that device. Nothing is launched and nothing is benchmarked:
where Inductor would autotune between configs, the caller takes the first (``kernel``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: The compute capability code is generated for.
ARCH = 90


@dataclass(frozen=True)
class DeviceProperties:
    """What Inductor's heuristics read of ``torch.cuda.get_device_properties``: an H200's values."""

    name: str = "NVIDIA H200 (torchtrt_plugins fake device)"
    major: int = ARCH // 10
    minor: int = ARCH % 10
    multi_processor_count: int = 132
    total_memory: int = 141 * 2**30
    max_threads_per_multi_processor: int = 2048
    max_threads_per_block: int = 1024
    warp_size: int = 32
    regs_per_multiprocessor: int = 65536
    shared_memory_per_block: int = 48 * 1024
    shared_memory_per_block_optin: int = 227 * 1024
    shared_memory_per_multiprocessor: int = 228 * 1024
    L2_cache_size: int = 50 * 2**20
    clock_rate: int = 1980000
    memory_clock_rate: int = 2619000
    memory_bus_width: int = 5120
    gcnArchName: str = ""


class _TritonDriver:
    """Triton's active driver as far as code generation asks it: the target, device 0, stream 0."""

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", ARCH, 32)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def is_active(self) -> bool:
        return True


def _replace(stack: contextlib.ExitStack, owner: Any, name: str, value: Any) -> None:
    """``owner.name = value`` until ``stack`` closes (the attribute as it was in the class or module, restored)."""
    missing = object()
    before = owner.__dict__.get(name, missing) if isinstance(owner, type) else getattr(owner, name, missing)
    setattr(owner, name, value)
    stack.callback(lambda: delattr(owner, name) if before is missing else setattr(owner, name, before))


@contextlib.contextmanager
def fake_cuda_device() -> Iterator[None]:
    """Inductor and Triton see one sm_90 CUDA device while this is entered (not thread-safe: it patches modules)."""
    import torch
    from torch._dynamo.device_interface import CudaInterface
    from torch._inductor.runtime import triton_helpers
    from torch.utils import _triton
    from triton.runtime.driver import driver

    properties = DeviceProperties()

    def get_device_properties(*args: Any, **kwargs: Any) -> DeviceProperties:
        return properties

    interface = {
        "get_device_properties": get_device_properties,
        "current_device": lambda: 0,
        "device_count": lambda: 1,
        "is_available": lambda: True,
        "get_compute_capability": lambda *args, **kwargs: ARCH,
        "exchange_device": lambda device: 0,
        "maybe_exchange_device": lambda device: 0,
        "get_raw_stream": lambda *args: 0,
    }
    cuda = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "get_device_properties": get_device_properties,
        "get_device_capability": lambda *args, **kwargs: (ARCH // 10, ARCH % 10),
    }
    saved_driver = driver.__dict__.get("_active")
    with contextlib.ExitStack() as stack:
        for name, function in interface.items():
            _replace(stack, CudaInterface, name, staticmethod(function))
        _replace(stack, CudaInterface.Worker, "get_device_properties", staticmethod(get_device_properties))
        _replace(stack, CudaInterface.Worker, "current_device", staticmethod(lambda: 0))
        for name, function in cuda.items():
            _replace(stack, torch.cuda, name, function)
        # Inductor's kernel modules switch Triton to the real driver when they load; that driver needs libcuda.
        _replace(stack, triton_helpers, "set_driver_to_gpu", lambda: None)
        driver.set_active(_TritonDriver())
        stack.callback(setattr, driver, "_active", saved_driver)
        # Every answer torch caches about Triton and the device (has_triton() first: cached False where an earlier
        # call found no GPU, Inductor refused with TritonMissing in CI), computed afresh for the fake device and not
        # kept for a real one.
        for name in dir(_triton):
            cached = getattr(_triton, name)
            if callable(getattr(cached, "cache_clear", None)):
                cached.cache_clear()
                stack.callback(cached.cache_clear)
        yield
