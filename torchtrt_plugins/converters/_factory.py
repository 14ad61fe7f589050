"""The converter factory: one generic converter, built per op from its spec.

Two halves:
- ``plan``: FX node (or converter args) -> ``PluginCall``, plain data (creator key, typed fields,
  tensor inputs, shape inputs). Needs no TensorRT, so it is unit-tested on every machine and fed
  to the conformance harness and the plugin-in-the-loop runner.
- ``emit``: ``PluginCall`` -> ``PluginFieldCollection`` -> ``create_plugin(..., BUILD)`` ->
  ``ctx.net.add_plugin_v3``. Small, and the only part that touches TensorRT.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from .. import _compat
from .. import spec as spec_mod
from .._compat import require_tensorrt

if TYPE_CHECKING:
    from ..declare import Declaration

_LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class FieldValue:
    name: str
    type: str  # PluginFieldType member name, e.g. "FLOAT32"
    value: Any

    def numpy(self):
        import numpy as np

        if isinstance(self.value, torch.Tensor):  # a weight field: its elements, bf16 as its bits
            flat = self.value.detach().cpu().contiguous().reshape(-1)
            return (flat.view(torch.int16) if flat.dtype == torch.bfloat16 else flat).numpy()
        return np.asarray(self.value, dtype=spec_mod.FIELD_NUMPY_DTYPES[self.type]).reshape(-1)


@dataclass
class PluginCall:
    """What a converter adds to the network, as plain data."""

    op: str
    plugin_name: str
    plugin_version: str
    plugin_namespace: str
    fields: list[FieldValue]
    tensor_inputs: list[Any]
    shape_inputs: list[Any] = field(default_factory=list)
    #: Per tensor input, the dtype the plugin takes it as when that differs from the torch dtype (else None).
    input_casts: list[torch.dtype | None] = field(default_factory=list)
    num_outputs: int = 1
    num_op_outputs: int = 1
    requires_output_allocator: bool = False
    #: The last plugin outputs: the new values of the op's mutated arguments, each aliased to its input.
    num_mutated: int = 0

    @property
    def creator_key(self) -> tuple[str, str, str]:
        return (self.plugin_name, self.plugin_version, self.plugin_namespace)

    def field_value(self, name: str) -> Any:
        for value in self.fields:
            if value.name == name:
                return value.value
        raise KeyError(name)


def _schema(spec: spec_mod.OpSpec) -> torch.FunctionSchema:
    return torch._C.parse_schema(f"{spec.qualname}{spec.schema}")


def bind(spec: spec_mod.OpSpec, args: Sequence[Any], kwargs: dict) -> dict[str, Any]:
    """Map positional and keyword args onto the schema's argument names, filling defaults."""
    schema = _schema(spec)
    bound: dict[str, Any] = {}
    names = [a.name for a in schema.arguments]
    if len(args) > len(names):
        raise spec_mod.SpecError(f"{spec.label}: expected at most {len(names)} arguments, got {len(args)}")
    for name, value in zip(names, args, strict=False):  # args may stop early: defaults fill the rest
        bound[name] = value
    for name, value in kwargs.items():
        if name not in names:
            raise spec_mod.SpecError(f"{spec.label}: unexpected argument '{name}'")
        bound[name] = value
    for argument in schema.arguments:
        if argument.name not in bound:
            if argument.has_default_value():
                bound[argument.name] = argument.default_value
            else:
                raise spec_mod.SpecError(f"{spec.label}: missing argument '{argument.name}'")
    return bound


_WEIGHTS_AS_FIELDS: contextvars.ContextVar[bool] = contextvars.ContextVar("weights_as_fields", default=False)


@contextlib.contextmanager
def weights_as_fields(enabled: bool = True):
    """Within it, the converters give each declared weight argument (``declare(weight_fields=...)``) that is a constant
    of the graph (a ``get_attr`` weight, a tensor at conversion time) to the plugin as a field baked into the plan
    instead of a network input."""
    token = _WEIGHTS_AS_FIELDS.set(enabled)
    try:
        yield
    finally:
        _WEIGHTS_AS_FIELDS.reset(token)


def _weight_fields(
    spec: spec_mod.OpSpec, bound: dict[str, Any], is_symbolic: Callable[[Any], bool]
) -> list[FieldValue]:
    """The fields of the declared weight arguments bound to constant tensors (with data: not a graph value, a fake
    or a meta stand-in): elements and dims."""
    fields = []
    for name in spec.weight_fields:
        value = bound[name]
        constant = isinstance(value, torch.Tensor) and not is_symbolic(value) and value.device.type != "meta"
        if constant and not isinstance(value, torch._subclasses.FakeTensor):
            fields.append(FieldValue(name, spec_mod.WEIGHT_FIELD_TYPES[value.dtype], value))
            fields.append(FieldValue(f"{name}_shape", "INT64", list(value.shape)))
    return fields


def _default_is_symbolic(value: Any) -> bool:
    return isinstance(value, (torch.fx.Node, torch.SymInt)) or type(value).__name__ == "ITensor"


def plan(
    spec: spec_mod.OpSpec,
    args: Sequence[Any],
    kwargs: dict | None = None,
    is_symbolic: Callable[[Any], bool] = _default_is_symbolic,
    weights_as_fields: bool | None = None,
    declaration: Declaration | None = None,
) -> PluginCall:
    """Plan the plugin call for one op invocation. Raises SpecError for values the plugin cannot take.
    ``weights_as_fields`` (None: the ``weights_as_fields()`` context's choice) gives constant weight arguments as
    fields. ``declaration``: the one ``spec`` was made from, where it is not the registered one (default:
    ``spec.declaration_of(spec)``; None for a spec made by hand)."""
    bound = bind(spec, args, kwargs or {})
    as_fields = _WEIGHTS_AS_FIELDS.get() if weights_as_fields is None else weights_as_fields
    weights = _weight_fields(spec, bound, is_symbolic) if as_fields else []
    constants = {w.name for w in weights}
    fields: list[FieldValue] = []
    shape_inputs: list[Any] = []
    for fspec in spec.fields:
        value = bound.get(fspec.arg, fspec.default) if fspec.arg else fspec.default
        if fspec.shape_input and is_symbolic(value):
            shape_inputs.append(value)
            fields.append(FieldValue(fspec.name, fspec.type, fspec.shape_input_sentinel))
        elif is_symbolic(value):
            raise spec_mod.SpecError(f"{spec.label}: argument '{fspec.arg}' must be a constant, got a symbolic value")
        else:
            fields.append(FieldValue(fspec.name, fspec.type, fspec.check(spec.qualname, value)))
    num_outputs = spec.num_plugin_outputs
    declaration = declaration or spec_mod.declaration_of(spec)
    if declaration is not None:
        # The plugin holds the op's shape rules; deriving them here checks the call against the fake kernel and
        # counts the size tensors the plugin adds.
        derived = declaration.derive_for_values(is_symbolic=is_symbolic, **bound)
        num_outputs = len(spec.outputs) + derived.num_size_tensors + len(spec.mutated)
    return PluginCall(
        op=spec.name,
        plugin_name=spec.plugin_name,
        plugin_version=spec.plugin_version,
        plugin_namespace=spec.plugin_namespace,
        fields=fields + weights,
        tensor_inputs=[bound[t.name] for t in spec.inputs if t.name not in constants],
        shape_inputs=shape_inputs,
        input_casts=[t.plugin_dtype for t in spec.inputs if t.name not in constants],
        num_outputs=num_outputs,
        num_op_outputs=len(spec.outputs),
        requires_output_allocator=spec.requires_output_allocator,
        num_mutated=len(spec.mutated),
    )


def entry_for_target(target: Any) -> spec_mod.OpEntry | None:
    """The op entry whose torch op (an overload, or the packet ``symbolic_trace`` records) is ``target``, or None."""
    name = getattr(target, "name", None)
    qualname = name() if callable(name) else getattr(target, "_qualified_op_name", None)
    if not isinstance(qualname, str) or "::" not in qualname:
        return None
    try:
        return spec_mod.get(qualname.split(".", 1)[0])
    except KeyError:
        return None


def plan_node(node: torch.fx.Node) -> PluginCall:
    entry = entry_for_target(node.target)
    if entry is None:
        raise ValueError(f"node {node.name} ({node.target}) is not an op with a plugin")
    return plan(entry.spec, node.args, node.kwargs)


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


def rejection(entry: spec_mod.OpEntry, args: Sequence[Any], kwargs: dict) -> str | None:
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
    """Create the plugin through the registry (loading our library if needed). Returns None on failure."""
    from ..native import PluginLoadError, load_plugins

    trt = trt or require_tensorrt()
    registry = registry or trt.get_plugin_registry()
    failure = None
    try:
        load_plugins(registry)
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


def make_converter(entry: spec_mod.OpEntry):
    """The Torch-TensorRT converter function for one op."""

    def converter(ctx: Any, target: Any, args: tuple, kwargs: dict, name: str):
        return emit(ctx, plan(entry.spec, args, kwargs), target, name)

    converter.__name__ = f"convert_{entry.spec.name}"
    converter.__qualname__ = converter.__name__
    return converter


def register(entry: spec_mod.OpEntry, converter: Callable) -> bool:
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
