"""The converter factory: one generic converter, built per op from its spec.

It plans each call with :mod:`torchtrt_plugins.plan` (no TensorRT) and emits it: ``PluginCall`` ->
``PluginFieldCollection`` -> ``create_plugin(..., BUILD)`` -> ``ctx.net.add_plugin_v3``, the only part that touches
TensorRT.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .. import _compat
from .. import registry as op_registry
from .. import spec as spec_mod
from .._compat import require_tensorrt

# The plan's old home (torchtrt_plugins.plan, spec.bind), re-exported for one release.
from ..plan import FieldValue, PluginCall, entry_for_target, plan, plan_node, weights_as_fields  # noqa: E402, F401, I001
from ..spec import bind  # noqa: E402, F401

_LOGGER = logging.getLogger(__name__)


def _fake_value(arg: Any) -> Any:
    if isinstance(arg, torch.fx.Node):
        return arg.meta.get("val")
    return arg


#: Where the validator records, in the meta of a node it rejects, why the node stays in PyTorch.
REJECTED = "torchtrt_plugins_rejected"


def validate_node(node: torch.fx.Node, settings: Any = None) -> bool:
    """Torch-TensorRT capability validator: False (fall back to PyTorch) for what the plugin cannot do; the reason is
    logged and recorded in ``node.meta[REJECTED]``."""
    entry = entry_for_target(node.target)
    if entry is None:
        return False
    if entry.spec.mutated:
        return accept(
            node,
            f"{entry.spec.label} updates {list(entry.spec.mutated)} in place, which a graph of values cannot say; its "
            "functionalized form (auto_functionalized_v2, what export makes of it) becomes the plugin",
        )
    return accept(node, rejection(entry, node.args, node.kwargs))


def accept(node: torch.fx.Node, reason: str | None) -> bool:
    """True where ``reason`` is None; else record it in the node's meta, log it, and return False."""
    if reason is None:
        node.meta.pop(REJECTED, None)
        return True
    node.meta[REJECTED] = reason
    _LOGGER.info("torchtrt_plugins: %s stays in PyTorch: %s", node.name, reason)
    return False


def rejection(entry: op_registry.OpEntry, args: Sequence[Any], kwargs: dict) -> str | None:
    """Why the plugin does not take this call of the op (FX nodes or constants as arguments), or None."""
    if reason := _compat.plugin_layers_unavailable():  # TensorRT-RTX: emit could not add the layer
        _compat.warn_plugin_layers_unavailable(reason)
        return reason
    try:
        call = plan(entry.spec, args, kwargs)
        fakes = [_fake_value(t) for t in call.tensor_inputs]
        if any(not isinstance(f, torch.Tensor) for f in fakes):
            raise spec_mod.SpecError(f"{entry.spec.label}: tensor inputs have no shape metadata")
        entry.spec.check_dtypes(fakes)
    except (spec_mod.SpecError, TypeError, ValueError) as err:
        return str(err)
    return None


# ---------------------------------------------------------------------------------------------- emit


@functools.cache
def _collection_class(trt: Any) -> type:
    class FieldCollection(trt.PluginFieldCollection):
        """A PluginFieldCollection that can hold references: the bound class itself takes no attributes."""

    return FieldCollection


def field_collection(call: PluginCall, trt: Any = None):
    """The ``PluginFieldCollection`` for a call. It references the PluginFields and their numpy buffers,
    which the bindings only point into, so they live as long as the collection."""
    trt = trt or require_tensorrt()
    arrays = [value.numpy() for value in call.fields]
    fields = [
        trt.PluginField(value.name, array, getattr(trt.PluginFieldType, value.type))
        for value, array in zip(call.fields, arrays, strict=True)
    ]
    collection = _collection_class(trt)(fields)
    collection.torchtrt_buffers = (fields, arrays)
    return collection


def create_plugin(call: PluginCall, phase: Any = None, trt: Any = None, registry: Any = None):
    """Create the plugin through the registry (loading our library, and the call's op's own where it has one, if
    needed: no other library is built for it). Returns None on failure."""
    from ..native import PluginLoadError, load_plugins

    trt = trt or require_tensorrt()
    registry = registry or trt.get_plugin_registry()
    own = [entry.library for entry in op_registry.registered_ops() if entry.spec.creator_key == call.creator_key]
    libraries = [getattr(library, "__self__", library) for library in own if library is not None] if own else None
    failure = None
    try:
        load_plugins(registry, libraries=libraries)
    except PluginLoadError as err:  # another op's library failed to load: this call needs its own creator only
        failure = err
    creator = registry.get_creator(*call.creator_key)
    if creator is None:
        raise RuntimeError(
            f"torchtrt_plugins: no plugin creator {'/'.join(call.creator_key)} in the registry"
            + (f"; {failure}" if failure else "")
        )
    phase = trt.TensorRTPhase.BUILD if phase is None else phase
    return creator.create_plugin(call.plugin_name, field_collection(call, trt), phase)


def _as_shape_tensor(ctx: Any, value: Any, name: str, trt: Any):
    from torch_tensorrt.dynamo.conversion.converter_utils import get_trt_tensor

    tensor = get_trt_tensor(ctx, value, name)
    if len(tensor.shape) == 0:
        layer = ctx.net.add_shuffle(tensor)
        layer.reshape_dims = (1,)
        layer.name = f"{name}_as_1d"
        tensor = layer.get_output(0)
    if tensor.dtype not in (trt.int32, trt.int64):
        layer = ctx.net.add_cast(tensor, trt.int64)
        layer.name = f"{name}_as_int64"
        tensor = layer.get_output(0)
    return tensor


def _cast_input(ctx: Any, tensor: Any, dtype: torch.dtype, name: str, trt: Any):
    dtype_name = str(dtype).removeprefix("torch.")
    target = getattr(trt, dtype_name)
    if tensor.dtype == target:
        return tensor
    layer = ctx.net.add_cast(tensor, target)
    layer.name = f"{name}_as_{dtype_name}"
    return layer.get_output(0)


def emit(ctx: Any, call: PluginCall, target: Any, name: str, *, with_mutated: bool = False):
    """Add the plugin layer for ``call``; returns the op's outputs (a tensor, or a tuple), followed, ``with_mutated``,
    by the new values of its mutated arguments (the plugin's aliased outputs)."""
    from torch_tensorrt.dynamo.conversion.converter_utils import get_trt_tensor, set_layer_name

    trt = require_tensorrt()
    plugin = create_plugin(call, trt.TensorRTPhase.BUILD, trt)
    if plugin is None:
        raise RuntimeError(
            f"torchtrt_plugins: {'/'.join(call.creator_key)} rejected fields "
            f"{[(f.name, f.value) for f in call.fields]}; see the TensorRT log"
        )
    inputs = [get_trt_tensor(ctx, t, f"{name}_input{i}") for i, t in enumerate(call.tensor_inputs)]
    for i, dtype in enumerate(call.input_casts):
        if dtype is not None:
            inputs[i] = _cast_input(ctx, inputs[i], dtype, f"{name}_input{i}", trt)
    shape_inputs = [_as_shape_tensor(ctx, s, f"{name}_shape{i}", trt) for i, s in enumerate(call.shape_inputs)]
    layer = ctx.net.add_plugin_v3(inputs, shape_inputs, plugin)
    set_layer_name(layer, target, name)
    outputs = tuple(layer.get_output(i) for i in range(call.num_op_outputs))
    if with_mutated:
        outputs += tuple(layer.get_output(call.num_outputs - call.num_mutated + k) for k in range(call.num_mutated))
    return outputs[0] if len(outputs) == 1 else outputs


def make_converter(entry: op_registry.OpEntry):
    """The Torch-TensorRT converter function for one op."""

    def converter(ctx: Any, target: Any, args: tuple, kwargs: dict, name: str):
        return emit(ctx, plan(entry.spec, args, kwargs), target, name)

    converter.__name__ = f"convert_{entry.spec.name}"
    converter.__qualname__ = converter.__name__
    return converter


def register(entry: op_registry.OpEntry, converter: Callable) -> bool:
    """Register ``converter`` with Torch-TensorRT for every overload of the op. False when it is missing."""
    from .._compat import torch_tensorrt

    if torch_tensorrt() is None:
        return False
    from torch_tensorrt.dynamo.conversion._ConverterRegistry import dynamo_tensorrt_converter

    packet = getattr(getattr(torch.ops, entry.spec.op_namespace), entry.spec.name)
    for overload in packet.overloads():
        dynamo_tensorrt_converter(
            getattr(packet, overload),
            supports_dynamic_shapes=True,
            capability_validator=validate_node,
            requires_output_allocator=entry.spec.requires_output_allocator,
        )(converter)
    return True
