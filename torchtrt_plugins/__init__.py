"""torchtrt_plugins: write a CUDA op once; run it in eager PyTorch, under torch.compile and inside
TensorRT engines built by Torch-TensorRT, with a C++ IPluginV3 plugin so engines run without Python.

``import torchtrt_plugins`` registers the ``torch.ops.torchtrt.*`` ops (CPU reference kernels; CUDA kernels through
their launchers, loaded on first use) and, when Torch-TensorRT imports, the converters.
"""

from __future__ import annotations

from . import (
    native,
    ops,  # noqa: F401  (declares our ops)
    sdk,
)
from .declare import Declaration, DeclarationError, Range, Resource, declare
from .kernels.describe import KernelError, cuda_kernel, triton_kernel
from .lowering import lower, lower_with_report
from .native import load_plugins, load_program, plugin_library_path
from .registry import all_ops, get, registered_ops
from .spec import NAMESPACE, SpecError, Tolerance

__version__ = "0.1.0"

__all__ = [
    "NAMESPACE",
    "Declaration",
    "DeclarationError",
    "KernelError",
    "Range",
    "Resource",
    "SpecError",
    "Tolerance",
    "all_ops",
    "cuda_kernel",
    "declare",
    "get",
    "registered_ops",
    "sdk",
    "triton_kernel",
    "load_plugins",
    "load_program",
    "lower",
    "lower_with_report",
    "plugin_library_path",
    "__version__",
]


def _register_with_torch_tensorrt() -> None:
    """Converters, and our creators in TensorRT's registry so saved engines deserialize in a fresh process."""
    from . import converters

    if not converters.register_all():
        return
    from . import lowering

    lowering.register_with_torch_tensorrt()
    from . import inductor_plugins

    if inductor_plugins.is_enabled():
        inductor_plugins.register_with_torch_tensorrt()
    native.load_plugins_into_tensorrt()


_register_with_torch_tensorrt()
