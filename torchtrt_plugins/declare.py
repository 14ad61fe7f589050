"""Bring your own op: a TensorRT plugin for any torch.library op, declared from the user's own package.

::

    import torchtrt_plugins as ttp

    LIBRARY = ttp.sdk.PluginLibrary("myops", sources=[...])       # the user's launchers (.cu)
    ttp.declare(
        "myops::scaled_add",
        library=LIBRARY,
        launcher="myops::scaledAdd",                              # tactic 0 (default); more via tactics={1: ...}
        ranges={"alpha": ttp.Range(min=-1e4, max=1e4)},
        dtypes={"x": FLOATS, "y": FLOATS},
        same_dtype={"y": "x"},
    )

The op's torch schema gives the tensor inputs and the scalar arguments. Scalars become plugin fields (``float`` ->
FLOAT64, ``int`` and ``SymInt`` -> INT64, ``bool`` -> INT32 0/1) whose valid ranges, declared once here, drive the
eager checks, the converter's validator and the C++ ``createPlugin``; a ``SymInt`` that is symbolic in the graph is
passed as a shape input instead (``torch.library.custom_op`` makes an ``int`` annotation a ``SymInt`` and rejects a
``torch.SymInt`` one). ``tolerances`` ({dtype: Tolerance}) say how close ``testing.check_op`` requires outputs of a
dtype to be; others take ``spec.DEFAULT_TOLERANCES``. Output dtypes and shapes come from the op's registered fake
kernel, run symbolically for each call (``_derive``). The converter is registered with Torch-TensorRT when it
imports, the library is built and loaded into TensorRT on first need (``load_plugins``, the converter's first plugin),
and with ``library`` the eager CUDA kernel of the op is the same launcher the plugin calls; ``declare`` itself builds
and loads nothing.

A data-dependent op's eager kernel allocates its outputs at their upper bounds and reads the sizes back after the
launch; with ``sizes_first=True`` its launcher instead takes two phases (``LaunchArgs::phase`` in ``ttp_sdk.h``:
sizes, then outputs at their exact shapes), so eager needs no upper-bound memory. The plugin always calls it once.
"""

from __future__ import annotations

from typing import Any

from . import converters, registry
from .declaration import (
    CXX_SYMBOL,
    DEFAULT_DTYPES,
    SCALAR_FIELD_TYPES,
    SHAPE_INPUT_SENTINEL,
    SUPPORTED_DTYPES,
    Declaration,
    Range,
    Resource,
)
from .errors import DeclarationError
from .kernels.source import check_kernels
from .sdk.runtime import register_eager_kernel, unregister_eager_kernel

__all__ = [
    "CXX_SYMBOL",
    "DEFAULT_DTYPES",
    "SCALAR_FIELD_TYPES",
    "SHAPE_INPUT_SENTINEL",
    "SUPPORTED_DTYPES",
    "Declaration",
    "DeclarationError",
    "Range",
    "Resource",
    "declare",
]


def declare(op: Any, **options: Any) -> Declaration:
    """Declare a TensorRT plugin for the torch op ``op`` ("ns::name" or the op); see :class:`Declaration`.

    Checks the declaration (:class:`DeclarationError` names what is wrong) and registers the op: its entry, its
    converter with Torch-TensorRT when that imports, its library for ``load_plugins``, and with a ``library`` the
    eager CUDA kernel through the op's launcher. It builds and loads nothing: the op's libraries are built and loaded
    on first need (the first eager CUDA call; the converter's first plugin; ``load_plugins()`` or ``load_program()``,
    which a process deserializing saved engines calls) or explicitly (``library.build()``). Returns the declaration.
    """
    eager_cuda = options.pop("eager_cuda", True)
    declaration = Declaration(op, **options)
    check_kernels(declaration)
    entry = declaration.registered_entry = registry.register(registry.entry_of(declaration))
    if declaration.library is not None:
        try:
            declaration.library.add(declaration)
            if eager_cuda:
                declaration.python_kernel = register_eager_kernel(declaration)
            declaration.withdraw = lambda: _withdraw(declaration)  # the library's, when the op cannot be built
        except Exception:  # a declaration that fails here must not stay registered to break the others
            _withdraw(declaration)
            raise
    if not getattr(declaration.library, "ours", False):  # ours: `import torchtrt_plugins` registers its converters
        converters.register_entry(entry)
    _check_on_cpu(declaration)
    return declaration


def _withdraw(declaration: Declaration) -> None:
    """Leave the process as if ``declaration`` had never been made: its registry entry, its place on its library, its
    eager CUDA kernel and its CPU checks go (a declaration that cannot be built must not break the others, nor later
    loads)."""
    if declaration.registered_entry is not None:
        registry.unregister(declaration.registered_entry)
        declaration.registered_entry = None
    if declaration in getattr(declaration.library, "declarations", ()):
        declaration.library.declarations.remove(declaration)
    kernel = getattr(declaration, "python_kernel", None)
    if kernel is not None:
        unregister_eager_kernel(kernel)
        declaration.python_kernel = None
    unchecked_cpu = getattr(declaration, "unchecked_cpu", None)
    if unchecked_cpu is not None:
        _opdef(declaration).register_kernel("cpu", unchecked_cpu)
        declaration.unchecked_cpu = None


def _opdef(declaration: Declaration) -> Any:
    import torch

    return torch._library.custom_ops._maybe_get_opdef(declaration.qualname)


def _check_on_cpu(declaration: Declaration) -> None:
    """Put the declaration's eager checks (dtypes, ranges, the fake kernel's shape checks) before the CPU kernel of an
    op made with ``torch.library.custom_op``, as the eager CUDA kernel has them. An op defined with
    ``torch.library.Library`` gives no way to reach its CPU kernel from here, so its CPU path stays unchecked."""
    opdef = _opdef(declaration)
    cpu = getattr(opdef, "_backend_fns", {}).get("cpu")
    if cpu is None:
        return

    def checked(*args: Any, **kwargs: Any) -> Any:
        declaration.check_args(*args, **kwargs)
        return cpu(*args, **kwargs)

    opdef.register_kernel("cpu", checked)
    declaration.unchecked_cpu = cpu
