"""What one eager call of a declared op costs beyond its kernels, measured on the GPU: host synchronizations and
peak allocated device memory (for the data-dependent ops' "one sync, exact-size outputs" contract)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

_SYNC_REPORT = "called a synchronizing CUDA operation"


def host_syncs(capfd: Any, call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()``'s result and how many synchronizing CUDA operations it made (after a warm-up call: the caching
    allocator, lazy module loading)."""
    call()
    torch.cuda.synchronize()
    capfd.readouterr()
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = call()
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    # c10 reports each synchronizing call once, on stderr or as a Python warning depending on the build.
    reports = capfd.readouterr().err.count(_SYNC_REPORT)
    reports += sum(_SYNC_REPORT in str(w.message) for w in caught)
    return result, reports


def peak_bytes(call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()``'s result and the most device memory it held allocated at once beyond what was allocated before
    (after a warm-up call)."""
    call()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    result = call()
    torch.cuda.synchronize()
    return result, torch.cuda.max_memory_allocated() - before
