"""torchtrt_plugins: write a CUDA op once; run it in eager PyTorch, under torch.compile and inside
TensorRT engines built by Torch-TensorRT, with a C++ IPluginV3 plugin so engines run without Python.

``import torchtrt_plugins`` registers the ``torch.ops.torchtrt.*`` ops (CPU reference kernels always;
CUDA kernels when a GPU is visible) and, when Torch-TensorRT imports, the converters.
"""

from __future__ import annotations

from . import ops  # noqa: F401  (registers the specs)
from . import _library  # noqa: F401  (defines the torch ops)
from . import native
from .native import load_plugins, plugin_library_path
from .spec import NAMESPACE, SpecError, all_ops, get

__version__ = "0.1.0"

__all__ = ["NAMESPACE", "SpecError", "all_ops", "get", "load_plugins", "plugin_library_path", "__version__"]


def _load_cuda_ops() -> None:
    import torch

    if torch.cuda.is_available():
        native.load_torch_ops()


def _register_converters() -> None:
    from . import converters

    converters.register_all()


_load_cuda_ops()
_register_converters()
