"""Torch-TensorRT converters, one module per op, each built by the factory from the op's spec.

Installed as ``torchtrt_plugins.converters``. ``register_all()`` runs at ``import torchtrt_plugins``
and registers every converter with Torch-TensorRT when it imports (a no-op otherwise).
"""

from __future__ import annotations

import importlib

from .. import spec as spec_mod
from . import _factory
from ._factory import (
    PluginCall,
    create_plugin,
    emit,
    entry_for_target,
    field_collection,
    make_converter,
    plan,
    plan_node,
    validate_node,
)

__all__ = [
    "PluginCall",
    "create_plugin",
    "emit",
    "entry_for_target",
    "field_collection",
    "make_converter",
    "plan",
    "plan_node",
    "register_all",
    "validate_node",
]

_registered = False


def converter_module(op_name: str):
    return importlib.import_module(f"{__name__}.{op_name}")


def register_all() -> bool:
    """Register all converters with Torch-TensorRT; False when Torch-TensorRT is not installed."""
    global _registered
    if _registered:
        return True
    modules = [converter_module(entry.spec.name) for entry in spec_mod.all_ops()]
    ok = all(_factory.register(module.ENTRY, module.convert) for module in modules)
    _registered = ok
    return ok
