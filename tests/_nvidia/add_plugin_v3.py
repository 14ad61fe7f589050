"""Test-only adapter: ``INetworkDefinition::addPluginV3`` for TensorRT-RTX's Python bindings.

TensorRT-RTX's C++ network has ``addPluginV3``, but its public headers and its Python
``INetworkDefinition`` (1.4 to 1.7) do not expose it. Its own ONNX parser reaches it through a private
function table: ``getPrivateApi_INTERNAL(0xB38F642A771BA941, 1)``, exported by ``libtensorrt_rtx.so``,
whose first entry is::

    IPluginV3Layer* add_plugin_v3(INetworkDefinition& network, ITensor* const* inputs, int32_t nbInputs,
                                  ITensor* const* shapeInputs, int32_t nbShapeInputs, IPluginV3& plugin)

(Google's LiteRT calls the same entry, ``tensorrt_rtx_plugin_compat.h``). Calling it from Python needs the
C++ pointers behind the pybind11 objects: a pybind11 ``instance`` is ``PyObject_HEAD``, then (simple
layout) the value pointer and a holder (``simple_value_holder[1 + instance_simple_holder_in_ptrs()]``, three
pointers), ``weakrefs`` (the type's ``__weakrefoffset__``), then a flag byte whose bit 1 is ``simple_layout``
(``pybind11/detail/common.h``); in the non-simple layout the same slot points to the array of value
pointers. The new layer is read back from the network (``get_layer(num_layers - 1)``), so it comes back
as an ordinary binding object, and the adapter checks that it is a plugin layer fed by the given tensors.

This is a private, version-specific entry: ``CHECKED_VERSIONS`` lists the ``tensorrt_rtx`` releases it
was checked with; elsewhere ``unavailable_reason`` says why it cannot be used and tests skip with it.
Never used by the package.
"""

from __future__ import annotations

import ctypes
import importlib.util
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

API_ID = 0xB38F642A771BA941
API_VERSION = 1
#: tensorrt_rtx releases the private table was checked with (function table layout and pybind11 layout).
CHECKED_VERSIONS = ("1.5.0.114", "1.6.1.120", "1.7.1.116")

_PTR = ctypes.c_void_p
_ADD_PLUGIN_V3 = ctypes.CFUNCTYPE(_PTR, _PTR, _PTR, ctypes.c_int32, _PTR, ctypes.c_int32, _PTR)
_POINTER = struct.calcsize("P")
_HEAD = struct.calcsize("nP")  # PyObject_HEAD: ob_refcnt, ob_type (release builds)
#: ``simple_value_holder[1 + instance_simple_holder_in_ptrs()]``: the value pointer and a shared_ptr-sized holder.
_UNION = 3 * _POINTER
_SIMPLE_LAYOUT_BIT = 1 << 1
_KEEP_ALIVE: dict[int, list[Any]] = {}


def _library_path(trt: Any) -> Path | None:
    spec = importlib.util.find_spec(f"{trt.__name__}_libs")
    if spec is not None and spec.origin:
        candidate = Path(spec.origin).parent / "libtensorrt_rtx.so.1"
        if candidate.is_file():
            return candidate
    return None


def unavailable_reason(trt: Any) -> str | None:
    """Why the adapter cannot be used with this ``tensorrt_rtx`` module, or None."""
    if getattr(trt, "__name__", "") != "tensorrt_rtx":
        return f"addPluginV3 adapter: only for tensorrt_rtx (got {getattr(trt, '__name__', trt)})"
    if trt.__version__ not in CHECKED_VERSIONS:
        return f"addPluginV3 adapter: checked with tensorrt_rtx {', '.join(CHECKED_VERSIONS)}, not {trt.__version__}"
    if hasattr(trt.INetworkDefinition, "add_plugin_v3") and not _is_ours(trt.INetworkDefinition.add_plugin_v3):
        return None  # the bindings have it: nothing to adapt
    if sys.implementation.name != "cpython" or hasattr(sys, "gettotalrefcount"):
        return "addPluginV3 adapter: needs a release CPython (it reads pybind11 objects' memory layout)"
    if _library_path(trt) is None:
        return "addPluginV3 adapter: libtensorrt_rtx.so.1 not found next to the tensorrt_rtx module"
    if _private_table(trt) is None:
        return f"addPluginV3 adapter: getPrivateApi_INTERNAL({API_ID:#x}, {API_VERSION}) returned nothing"
    return None


def _private_table(trt: Any) -> int | None:
    library = ctypes.CDLL(str(_library_path(trt)))  # already loaded by the bindings: the same handle
    get_private_api = library.getPrivateApi_INTERNAL
    get_private_api.restype = _PTR
    get_private_api.argtypes = [ctypes.c_uint64, ctypes.c_int32]
    return get_private_api(API_ID, API_VERSION)


def cpp_pointer(obj: Any) -> int:
    """The C++ object a pybind11 wrapper holds (its first bound type's value pointer)."""
    weakrefs = type(obj).__weakrefoffset__  # pybind11 sets it to offsetof(instance, weakrefs)
    if weakrefs != _HEAD + _UNION:
        raise RuntimeError(f"addPluginV3 adapter: unexpected pybind11 instance layout for {type(obj).__name__}")
    address = id(obj)
    flags = ctypes.c_uint8.from_address(address + weakrefs + _POINTER).value
    slot = _PTR.from_address(address + _HEAD).value
    pointer = slot if flags & _SIMPLE_LAYOUT_BIT else _PTR.from_address(slot).value
    if not pointer:
        raise ValueError(f"addPluginV3 adapter: {type(obj).__name__} wraps no C++ object")
    return pointer


def _pointer_array(tensors: Sequence[Any]) -> ctypes.Array:
    return (_PTR * max(len(tensors), 1))(*[cpp_pointer(t) for t in tensors])


def add_plugin_v3(network: Any, inputs: Sequence[Any], shape_inputs: Sequence[Any], plugin: Any) -> Any:
    """``network.add_plugin_v3(inputs, shape_inputs, plugin)`` through RTX's private table; the new layer."""
    import tensorrt_rtx as trt

    reason = unavailable_reason(trt)
    if reason:
        raise RuntimeError(reason)
    if plugin is None:
        raise ValueError("addPluginV3 adapter: plugin is None (create_plugin failed; see the TensorRT log)")
    table = _private_table(trt)
    entry = _ADD_PLUGIN_V3(_PTR.from_address(table).value)
    before = network.num_layers
    layer = entry(
        cpp_pointer(network),
        _pointer_array(inputs),
        len(inputs),
        _pointer_array(shape_inputs) if shape_inputs else None,
        len(shape_inputs),
        cpp_pointer(plugin),
    )
    if not layer or network.num_layers != before + 1:
        raise RuntimeError("addPluginV3 adapter: the network refused the plugin layer; see the TensorRT log")
    added = network.get_layer(before)
    fed = [added.get_input(i).name for i in range(len(inputs))]
    if added.type != trt.LayerType.PLUGIN_V3 or fed != [t.name for t in inputs]:
        raise RuntimeError(f"addPluginV3 adapter: unexpected layer {added.type} fed by {fed}")
    _KEEP_ALIVE.setdefault(id(network), []).append(plugin)  # the network points into the plugin object
    return added


def _is_ours(method: Any) -> bool:
    return getattr(method, "__module__", None) == __name__


def install(trt: Any) -> None:
    """Give ``trt.INetworkDefinition`` an ``add_plugin_v3`` method backed by the adapter (where it has none)."""
    if hasattr(trt.INetworkDefinition, "add_plugin_v3"):
        return
    reason = unavailable_reason(trt)
    if reason:
        raise RuntimeError(reason)
    trt.INetworkDefinition.add_plugin_v3 = add_plugin_v3
