"""The catalogue of ops. Importing this package registers every op's spec.

Every op (``rms_norm``, ``masked_rows``, ``pad_to``) is declared with the public :func:`torchtrt_plugins.declare`, as
a user's op is: their launchers (``csrc/kernels/*_launcher.cu``) and generic plugin tables (``csrc/sdk/generated``,
written by ``python tools/contracts.py``) are built by CMake into our own libraries, so they need no build
at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .. import _build, _derive, native, registry, sdk
from .. import spec as spec_mod

#: Our own plugin library (libtorchtrt_plugins_v3.so) and launcher library, both prebuilt (wheel) or built by CMake.
LIBRARY = sdk.PluginLibrary.prebuilt(
    spec_mod.NAMESPACE, plugins=native.plugin_library_path, launchers=_build.launcher_library_path, ours=True
)


def define(schema: str, fake: Callable[..., Any], reference: Callable[..., Any], *, tactics: bool = False):
    """Define ``torchtrt::<name>`` from ``schema`` with its fake kernel and, on CPU, ``reference`` behind the
    declaration's checks. With ``tactics``, also ``<name>_tactic(..., *, int tactic)``, whose CUDA kernel (the declared
    op's, :func:`torchtrt_plugins.sdk.register_eager_kernel`) runs the launcher of that tactic (benchmarks and tests
    force each one with it)."""
    name = schema.split("(", 1)[0]
    qualname = f"{spec_mod.NAMESPACE}::{name}"
    lib = torch.library.Library(spec_mod.NAMESPACE, "FRAGMENT")
    lib.define(schema)

    def declaration():
        return registry.get(qualname).declaration

    def checked_fake(*args, **kwargs):  # the declared dtypes and ranges too, so that tracing reports them
        if not _derive.is_probing():
            declaration().check_values(*args, **kwargs)
        return fake(*args, **kwargs)

    torch.library.register_fake(qualname, checked_fake, lib=lib)

    def cpu(*args, **kwargs):
        declaration().check_args(*args, **kwargs)
        return reference(*args, **kwargs)

    lib.impl(name, cpu, "CPU")
    if tactics:
        args, returns = schema[len(name) :].split(") ->", 1)
        lib.define(f"{name}_tactic{args}, *, int tactic) ->{returns}")
        torch.library.register_fake(f"{qualname}_tactic", lambda *a, tactic, **k: checked_fake(*a, **k), lib=lib)
        lib.impl(f"{name}_tactic", lambda *a, tactic, **k: cpu(*a, **k), "CPU")
        _TACTIC_OPS.append(qualname)  # its CUDA kernel: registered once the op is declared (below)
    return lib


#: The ops defined with a ``<name>_tactic`` variant.
_TACTIC_OPS: list[str] = []

from . import (  # noqa: E402, F401
    add_rms_norm,
    efficient_nms,
    masked_rows,
    multi_scale_deformable_attention,
    pad_to,
    rms_norm,
    rms_norm_quant,
    rotary_embedding,
)

for _qualname in _TACTIC_OPS:
    sdk.register_eager_kernel(registry.get(_qualname).declaration, tactic=True)
