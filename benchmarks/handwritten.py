"""The benchmarks' hand-written C++ torch ops (``handwritten_op.cpp``): ``torch.ops.ttp_handwritten.rms_norm``,
``add_rms_norm``, ``pad_to`` and ``rotary_embedding`` (which takes its cos/sin cache as a tensor, as vLLM's does),
what a user writes by hand against the full LibTorch API, each over the same launcher as its declared twin in
``torchtrt``. They are the yardsticks of the declared ops' eager host time (the design's "host time <= a hand-written
C++ torch op's"), measured in the same process.

Built on first use with ``torch.utils.cpp_extension`` (a C++ compiler, torch's full headers and the CUDA runtime
headers; about a minute), for this process's torch only. It is a benchmark peer of a source checkout, not part of the
package (``scripts/eager_overhead.py`` puts this folder on ``sys.path``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import torch

from torchtrt_plugins import _build
from torchtrt_plugins.sdk import recipe

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
    """Build (once per process) and load the ops, each launcher set to its declared twin's tactic 0. Raises
    RuntimeError saying why they cannot be had here."""
    global _loaded, _failed
    with _lock:
        if _loaded:
            return
        if _failed is not None:
            raise RuntimeError(_failed)
        try:
            from torch.utils import cpp_extension

            from torchtrt_plugins.ops.add_rms_norm import ADD_RMS_NORM
            from torchtrt_plugins.ops.pad_to import PAD_TO
            from torchtrt_plugins.ops.rms_norm import RMS_NORM
            from torchtrt_plugins.ops.rotary_embedding import ROTARY_EMBEDDING

            twins = {
                "rms_norm": RMS_NORM,
                "add_rms_norm": ADD_RMS_NORM,
                "pad_to": PAD_TO,
                "rotary_embedding": ROTARY_EMBEDDING,
            }
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
            for name, declaration in twins.items():
                torch.ops.ttp_handwritten.set_launcher(name, _launcher_address(declaration))
        except Exception as err:  # noqa: BLE001 - whatever keeps it from building is the reason
            _failed = f"the hand-written C++ op cannot be built here ({type(err).__name__}: {str(err)[:300]})"
            raise RuntimeError(_failed) from None
        _loaded = True
