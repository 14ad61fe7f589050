"""The benchmarks' hand-written C++ torch op (``handwritten_op.cpp``): ``torch.ops.ttp_handwritten.rms_norm``, what a
user writes by hand against the full LibTorch API, over the same launcher as ``torchtrt::rms_norm``. It is the
yardstick of the declared ops' eager host time (the design's "host time <= a hand-written C++ torch op's"), measured
in the same process.

Built on first use with ``torch.utils.cpp_extension`` (a C++ compiler, torch's full headers and the CUDA runtime
headers; about a minute), for this process's torch only: it is a benchmark peer, never part of the package's runtime.
"""

from __future__ import annotations

import threading
from pathlib import Path

import torch

from .. import _build
from ..sdk import recipe

_lock = threading.Lock()
_loaded = False
_failed: str | None = None


def _launcher_address(declaration) -> int:
    """The address of tactic 0's launcher of ``declaration``, from its launcher library."""
    address = declaration.library.launchers().ttp_sdk_launcher(declaration.qualname.encode(), 0)
    if not address:
        raise RuntimeError(f"{declaration.library.name} has no launcher of {declaration.label}")
    return address


def load() -> None:
    """Build (once per process) and load the op, its launcher set to ``torchtrt::rms_norm``'s tactic 0. Raises
    RuntimeError saying why it cannot be had here."""
    global _loaded, _failed
    with _lock:
        if _loaded:
            return
        if _failed is not None:
            raise RuntimeError(_failed)
        try:
            from torch.utils import cpp_extension

            from ..ops.rms_norm import RMS_NORM

            RMS_NORM.library.build()
            directory = _build.cache_dir() / f"handwritten-{torch.__version__.replace('+', '_')}"
            directory.mkdir(parents=True, exist_ok=True)
            cpp_extension.load(
                name="ttp_handwritten_op",
                sources=[str(Path(__file__).with_name("handwritten_op.cpp"))],
                extra_include_paths=[str(recipe.include_dir())],
                extra_cflags=["-O2"],
                build_directory=str(directory),
                is_python_module=False,
                with_cuda=True,
                verbose=False,
            )
            torch.ops.ttp_handwritten.set_launcher(_launcher_address(RMS_NORM))
        except Exception as err:  # noqa: BLE001 - whatever keeps it from building is the reason
            _failed = f"the hand-written C++ op cannot be built here ({type(err).__name__}: {str(err)[:300]})"
            raise RuntimeError(_failed) from None
        _loaded = True
