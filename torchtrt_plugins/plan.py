"""Planning a plugin call: an op invocation (FX node, converter or harness arguments) -> :class:`PluginCall`, plain
data (creator key, typed fields, tensor inputs, shape inputs). Needs no TensorRT: the converters emit it into a
network, the ONNX exporter into a node, and the harness and the graph runner drive plugins with it."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from . import registry
from .declaration import Declaration
from .spec import FIELD_NUMPY_DTYPES, WEIGHT_FIELD_TYPES, OpSpec, SpecError, bind


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
        return np.asarray(self.value, dtype=FIELD_NUMPY_DTYPES[self.type]).reshape(-1)


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


def _weight_fields(spec: OpSpec, bound: dict[str, Any], is_symbolic: Callable[[Any], bool]) -> list[FieldValue]:
    """The fields of the declared weight arguments bound to constant tensors (with data: not a graph value, a fake
    or a meta stand-in): elements and dims."""
    fields = []
    for name in spec.weight_fields:
        value = bound[name]
        constant = isinstance(value, torch.Tensor) and not is_symbolic(value) and value.device.type != "meta"
        if constant and not isinstance(value, torch._subclasses.FakeTensor):
            fields.append(FieldValue(name, WEIGHT_FIELD_TYPES[value.dtype], value))
            fields.append(FieldValue(f"{name}_shape", "INT64", list(value.shape)))
    return fields


def _default_is_symbolic(value: Any) -> bool:
    return isinstance(value, (torch.fx.Node, torch.SymInt)) or type(value).__name__ == "ITensor"


def plan(
    spec: OpSpec,
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
            raise SpecError(f"{spec.label}: argument '{fspec.arg}' must be a constant, got a symbolic value")
        else:
            fields.append(FieldValue(fspec.name, fspec.type, fspec.check(spec.qualname, value)))
    num_outputs = spec.num_plugin_outputs
    declaration = declaration or registry.declaration_of(spec)
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


def entry_for_target(target: Any) -> registry.OpEntry | None:
    """The op entry whose torch op (an overload, or the packet ``symbolic_trace`` records) is ``target``, or None."""
    name = getattr(target, "name", None)
    qualname = name() if callable(name) else getattr(target, "_qualified_op_name", None)
    if not isinstance(qualname, str) or "::" not in qualname:
        return None
    try:
        return registry.get(qualname.split(".", 1)[0])
    except KeyError:
        return None


def plan_node(node: torch.fx.Node) -> PluginCall:
    entry = entry_for_target(node.target)
    if entry is None:
        raise ValueError(f"node {node.name} ({node.target}) is not an op with a plugin")
    return plan(entry.spec, node.args, node.kwargs)
