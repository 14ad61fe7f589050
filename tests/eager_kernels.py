"""Tests' hold on the eager CUDA kernels ``declare`` registers: an op's kernel put back as first registered, so a
test can watch its first call choose between the C++ kernel and the Python one again."""

from __future__ import annotations

from typing import Any

from torchtrt_plugins.sdk import eager_kernel, runtime


def reset_eager_kernel(declaration: Any, *, tactic: bool = False) -> None:
    """Put the op's eager CUDA kernel (with ``tactic``, its ``_tactic`` variant's) back as first registered (its C++
    kernel removed)."""
    old = runtime._TACTIC_KERNELS[declaration.qualname] if tactic else declaration.python_kernel
    eager_kernel.uninstall(declaration, qualname=old.qualname)
    if old.library in runtime._EAGER_LIBRARIES:
        runtime._EAGER_LIBRARIES.remove(old.library)
        old.library._destroy()
    new = runtime._PythonKernel(declaration, tactic=tactic)
    if tactic:
        runtime._TACTIC_KERNELS[declaration.qualname] = new
    else:
        declaration.python_kernel = new
