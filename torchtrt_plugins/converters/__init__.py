"""Torch-TensorRT converters: one generic converter (``_factory``), built per op from its declaration's spec.

Installed as ``torchtrt_plugins.converters``. ``register_all()`` runs at ``import torchtrt_plugins``
and registers every converter with Torch-TensorRT when it imports (a no-op otherwise).
"""

from __future__ import annotations

from .. import registry
from ..plan import PluginCall, entry_for_target, plan, plan_node, weights_as_fields
from . import _factory, _functionalized, aten_fallbacks
from ._factory import create_plugin, emit, field_collection, make_converter, validate_node

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
    "register_entry",
    "validate_node",
    "weights_as_fields",
]

_registered = False


def register_entry(entry: registry.OpEntry) -> bool:
    """Register the converter of one op (ours or declared) with Torch-TensorRT; False when it is not installed. A
    mutating op also needs the converter of its functionalized form (``_functionalized``)."""
    if entry.spec.mutated:
        _functionalized.register()
    return _factory.register(entry, make_converter(entry))


def register_all() -> bool:
    """Register the converters of every op with a plugin (ours and declared ones), and our converters of ATen nodes
    Torch-TensorRT rejects (``aten_fallbacks``), with Torch-TensorRT; False when it is not installed. Ops declared
    later register themselves (``declare``)."""
    global _registered
    if _registered:
        return True
    aten_fallbacks.register()  # False without Torch-TensorRT, as every converter is: not the declared ops' verdict
    ok = all([register_entry(entry) for entry in registry.registered_ops()])
    _registered = ok
    return ok
