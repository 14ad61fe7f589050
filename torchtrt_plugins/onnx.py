"""ONNX export of models that use our ops, as plugin nodes that TensorRT's ONNX parser imports.

Every op exports through the same code, driven by its spec and the converter's planner
(``plan.plan``): ours, and those declared with ``torchtrt_plugins.declare`` (import the module
that declares them first; the generic plugin's shape program travels as an INTS attribute). A model exported here
parses with ``trtexec --onnx=model.onnx --dynamicPlugins=<plugin library>`` (one per library), or with ``OnnxParser``
once ``load_plugins`` has run.

One call::

    torchtrt_plugins.onnx.export(model, args, "model.onnx", dynamic_shapes=...)

or, with ``torch.onnx.export`` itself::

    torch.onnx.export(model, args, "model.onnx", custom_translation_table=torchtrt_plugins.onnx.translation_table())
    torchtrt_plugins.onnx.register_torchscript_symbolics()  # once, before torch.onnx.export(..., dynamo=False)

What the parser does with a node (onnx-tensorrt ``FallbackPluginImporter``, shipped in TensorRT 10 and
TensorRT-RTX 1.7): it dispatches on ``op_type`` alone (the domain is not read; an ``op_type`` that names a
built-in ONNX op goes to that op's importer instead), looks the creator up by ``op_type`` and the string
attributes ``plugin_version`` (default "1") and ``plugin_namespace`` (default ""), turns each attribute named
like a creator field into a ``PluginField`` (``loadFields``, see ``_ATTRIBUTE_KINDS``), creates the plugin
in the BUILD phase, passes the node inputs whose indices the INTS attribute
``tensorrt_plugin_shape_input_indices`` lists as shape inputs and the others as tensor inputs, and requires the
node to name exactly as many outputs as the plugin has.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from . import dtypes, registry
from . import plan as planning
from . import spec as spec_mod
from .spec import bind

#: ONNX domain of our plugin nodes; the parser ignores it, other ONNX tools key custom ops on it.
DOMAIN_PREFIX = "trt.plugins"
DOMAIN_VERSION = 1

#: The attribute listing which node inputs the parser passes to the plugin as shape inputs.
SHAPE_INPUT_INDICES = "tensorrt_plugin_shape_input_indices"

_INT32 = np.iinfo(np.int32)


@dataclass(frozen=True)
class FieldAttribute:
    """How one PluginFieldType travels as an ONNX attribute.

    ``kind`` is the ONNX attribute type the exporter writes ("FLOAT", "INT", "STRING" or "TENSOR" of
    ``tensor_dtype``); ``parsed_as`` is the PluginFieldType TensorRT-RTX 1.7.1's parser makes of it.
    """

    kind: str
    parsed_as: str
    tensor_dtype: str | None = None


#: PluginFieldType -> the ONNX attribute type the exporter writes. onnx-tensorrt's ``loadFields`` (onnxOpImporters.cpp,
#: formerly builtin_op_importers.cpp; the TensorRT 10 parser) maps attribute types to field types:
#:   FLOAT / FLOATS      -> kFLOAT32 (1 or n values)
#:   INT / INTS          -> kINT32, read with get<int32_t>: no attribute type becomes kINT64
#:   STRING / STRINGS    -> kCHAR, NUL-terminated, length including the NUL
#:   TENSOR              -> by element type: FLOAT kFLOAT32, DOUBLE kFLOAT64, FLOAT16 kFLOAT16, BFLOAT16 kBF16,
#:                          INT8 kINT8, INT16 kINT16, INT32 kINT32, STRING kCHAR; INT64, UINT*, BOOL and complex
#:                          are rejected ("is unsupported in plugin fields")
#: TensorRT-RTX 1.7.1's parser, probed with a creator that records what it is given (tests/rtx), differs for
#: TENSOR: DOUBLE arrives as kFLOAT32 (the weights are converted first), INT16 fails the whole node ("unsupported
#: datatype (5) when importing initializer"), and INT64, UINT8 and BOOL arrive with the type left at 0 (kFLOAT16)
#: over the raw bytes. Hence: INT16 and INT64 fields go as INT and arrive as kINT32 (the value must fit in 32
#: bits, and an INT64 field of ours takes kINT32: ``spec.PARSER_FIELD_TYPES``, ``acceptsType`` in
#: csrc/sdk/plugin_support.cpp); FLOAT64 goes as a DOUBLE tensor (kFLOAT64 in TensorRT 10, kFLOAT32 in TensorRT-RTX,
#: which a FLOAT64 field takes too). A tensor's element type is the field's (``spec.FIELD_NUMPY_DTYPES``).
_ATTRIBUTE_KINDS = {
    "FLOAT32": "FLOAT",
    "FLOAT64": "TENSOR",
    "FLOAT16": "TENSOR",
    "INT8": "TENSOR",
    "INT16": "INT",
    "INT32": "INT",
    "INT64": "INT",
    "CHAR": "STRING",
}
#: The PluginFieldType TensorRT-RTX 1.7.1's parser makes of an attribute of each type but TENSOR.
_PARSED_AS = {"FLOAT": "FLOAT32", "INT": "INT32", "STRING": "CHAR"}


class OnnxExportError(spec_mod.SpecError):
    """A call of one of our ops that has no faithful ONNX form for TensorRT's parser."""


def domain(spec: spec_mod.OpSpec) -> str:
    return f"{DOMAIN_PREFIX}.{spec.plugin_namespace}" if spec.plugin_namespace else DOMAIN_PREFIX


def field_attribute(field_type: str) -> FieldAttribute:
    """How a field of ``field_type`` travels; a tensor arrives as the spec's parser type for it
    (``spec.PARSER_FIELD_TYPES``) or as its own."""
    kind = _ATTRIBUTE_KINDS[field_type]
    if kind != "TENSOR":
        return FieldAttribute(kind, _PARSED_AS[kind])
    parsed = spec_mod.PARSER_FIELD_TYPES.get(field_type, field_type)
    return FieldAttribute(kind, parsed, spec_mod.FIELD_NUMPY_DTYPES[field_type])


def attribute_values(spec: spec_mod.OpSpec, call: planning.PluginCall) -> dict[str, Any]:
    """The node's attributes for a planned call: Python values whose type picks the ONNX attribute type
    (float FLOAT, int INT, str STRING, list FLOATS/INTS, numpy array TENSOR)."""
    if call.plugin_name in _builtin_onnx_ops():
        raise OnnxExportError(
            f"{spec.qualname}: plugin name '{call.plugin_name}' is also a standard ONNX op, which TensorRT's "
            "parser would import as that op instead of the plugin; give the plugin another name"
        )
    attributes: dict[str, Any] = {"plugin_version": call.plugin_version, "plugin_namespace": call.plugin_namespace}
    for value in call.fields:
        encoding = field_attribute(value.type)
        array = value.numpy()
        where = f"{spec.label}: {_what(spec, value.name)}"
        if encoding.kind == "TENSOR":
            attributes[value.name] = array.astype(encoding.tensor_dtype)
        elif encoding.kind == "STRING":
            attributes[value.name] = value.value if isinstance(value.value, str) else bytes(array).decode()
        elif encoding.kind == "FLOAT":
            floats = [float(v) for v in array]
            attributes[value.name] = floats[0] if len(floats) == 1 else floats
        else:
            ints = [int(v) for v in array]
            if any(not _INT32.min <= v <= _INT32.max for v in ints):
                raise OnnxExportError(
                    f"{where} must fit in 32 bits to export, got {value.value!r}: TensorRT's ONNX parser reads "
                    f"integer attributes as kINT32 and has no attribute type for plugin field '{value.name}' "
                    f"({value.type})"
                )
            attributes[value.name] = ints[0] if len(ints) == 1 else ints
    return attributes


def node_attributes(spec: spec_mod.OpSpec, call: planning.PluginCall) -> dict[str, Any]:
    """``attribute_values``, plus the indices of the shape inputs, which follow the tensor inputs."""
    attributes = attribute_values(spec, call)
    if call.shape_inputs:
        first = len(call.tensor_inputs)
        attributes[SHAPE_INPUT_INDICES] = list(range(first, first + len(call.shape_inputs)))
    return attributes


def _op_outputs(call: planning.PluginCall, outputs: Any) -> Any:
    """The outputs the torch op returns (the plugin's first ones; size tensors and the like stay unused)."""
    outputs = list(outputs) if isinstance(outputs, Sequence) else [outputs]
    visible = outputs[: call.num_op_outputs]
    return visible[0] if len(visible) == 1 else tuple(visible)


def _what(spec: spec_mod.OpSpec, field_name: str) -> str:
    """How an error names a field: by the op argument feeding it, else as a field (e.g. a declared op's
    ``shape_program``)."""
    arg = next((f.arg for f in spec.fields if f.name == field_name), None)
    return f"argument '{arg}'" if arg else f"field '{field_name}'"


@functools.cache
def _builtin_onnx_ops() -> frozenset[str]:
    import onnx

    return frozenset(schema.name for schema in onnx.defs.get_all_schemas() if schema.domain == "")


def _python_signature(spec: spec_mod.OpSpec) -> inspect.Signature:
    """The op's schema as a Python signature, so the exporters bind FX arguments by name."""
    schema = torch._C.parse_schema(f"{spec.qualname}{spec.schema}")
    params = [
        inspect.Parameter(
            a.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=a.default_value if a.has_default_value() else inspect.Parameter.empty,
        )
        for a in schema.arguments
    ]
    return inspect.Signature(params)


def _plan(spec: spec_mod.OpSpec, args: Sequence[Any], kwargs: dict, value_type: type, meta: Callable):
    """The converter's plan for an exporter's values (``value_type``: a symbolic scalar, or a tensor). A declared
    op derives its shape program from its tensor inputs' sizes and dtypes, so it plans on meta-tensor stand-ins
    (``meta``) for them and the node takes the exporter's own values."""
    is_symbolic = lambda value: isinstance(value, value_type)  # noqa: E731
    if registry.declaration_of(spec) is None:
        return planning.plan(spec, args, kwargs, is_symbolic=is_symbolic)
    bound = bind(spec, args, kwargs)
    tensors = {t.name: bound[t.name] for t in spec.inputs}
    call = planning.plan(
        spec, (), {**bound, **{n: meta(spec, n, v) for n, v in tensors.items()}}, is_symbolic=is_symbolic
    )
    call.tensor_inputs = list(tensors.values())
    return call


def _stand_in(spec: spec_mod.OpSpec, name: str, sizes: Sequence[int | None] | None, dtype: torch.dtype | None):
    """A meta tensor with an exporter value's sizes (dynamic ones at the derivation's hint) and dtype."""
    from ._derive import UNKNOWN_DIM_HINT

    if sizes is None or dtype is None:
        raise OnnxExportError(
            f"{spec.label}: argument '{name}' reaches the exporter without a known rank and dtype, which a declared "
            "op needs to derive its output shapes"
        )
    return torch.empty([UNKNOWN_DIM_HINT if d is None else d for d in sizes], dtype=dtype, device="meta")


def _onnxscript_meta(spec: spec_mod.OpSpec, name: str, value: Any) -> torch.Tensor:
    shape = None if value.shape is None else [d if isinstance(d, int) else None for d in value.shape]
    dtype = None if value.dtype is None else _TORCH_DTYPES.get(value.dtype.name)
    return _stand_in(spec, name, shape, dtype)


def _torchscript_meta(spec: spec_mod.OpSpec, name: str, value: Any) -> torch.Tensor:
    kind = value.type()
    sizes = kind.varyingSizes() if isinstance(kind, torch._C.TensorType) else None
    return _stand_in(spec, name, sizes, kind.dtype() if sizes is not None else None)


def torch_op(spec: spec_mod.OpSpec) -> torch._ops.OpOverloadPacket:
    namespace, name = spec.qualname.split("::", 1)
    return getattr(getattr(torch.ops, namespace), name)


def _entries(entries: Sequence[registry.OpEntry] | None) -> list[registry.OpEntry]:
    """Every op with a plugin unless told: our catalogue and the ops declared with ``declare`` so far."""
    return list(registry.registered_ops() if entries is None else entries)


# ------------------------------------------------------------------------- dynamo exporter (onnxscript)


#: Plugin input dtypes (``TensorSpec.plugin_dtype``) -> ONNX element type names (``TensorProto``, ``ir.DataType``).
_ONNX_DTYPES = dtypes.ONNX_NAMES
_TORCH_DTYPES = {name: dtype for dtype, name in _ONNX_DTYPES.items()}


def _onnxscript_op(spec: spec_mod.OpSpec, num_inputs: int, num_outputs: int, attributes: dict[str, Any]):
    """An onnxscript Op for the plugin node, with an OpSchema (inputs, outputs, attributes and their types) so
    that any onnxscript evaluator records it; evaluators drop keyword arguments the schema does not declare."""
    from onnxscript import ir

    attribute_types = tuple(
        (name, ir.convenience.convert_attribute(name, value).type.name) for name, value in attributes.items()
    )
    return _onnxscript_op_for(
        spec.plugin_name,
        domain(spec),
        f"TensorRT plugin {'/'.join(spec.creator_key)} ({spec.qualname})",
        num_inputs,
        num_outputs,
        attribute_types,
    )


#: Element types a plugin node's inputs and outputs may have (TensorRT's, in ONNX spelling).
_TENSOR_TYPES = (
    "float",
    "float16",
    "bfloat16",
    "double",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "bool",
    "float8e4m3fn",
    "float8e5m2",
    "int4",
)


@functools.cache
def _onnxscript_op_for(
    name: str, op_domain: str, doc: str, num_inputs: int, num_outputs: int, attribute_types: tuple[tuple[str, str], ...]
):
    from onnx.defs import OpSchema
    from onnxscript.values import Op, Opset

    tensor_types = [f"tensor({t})" for t in _TENSOR_TYPES]
    schema = OpSchema(
        name,
        op_domain,
        DOMAIN_VERSION,
        doc,
        inputs=[OpSchema.FormalParameter(f"input_{i}", f"T{i}") for i in range(num_inputs)],
        outputs=[OpSchema.FormalParameter(f"output_{i}", f"U{i}") for i in range(num_outputs)],
        type_constraints=[(f"T{i}", tensor_types, "") for i in range(num_inputs)]
        + [(f"U{i}", tensor_types, "") for i in range(num_outputs)],
        attributes=[
            OpSchema.Attribute(attr, getattr(OpSchema.AttrType, kind), "", required=True)
            for attr, kind in attribute_types
        ],
    )
    return Op(Opset(op_domain, DOMAIN_VERSION), name, schema)


def _translation(entry: registry.OpEntry) -> Callable:
    spec = entry.spec

    def translate(*args: Any, **kwargs: Any):
        from onnxscript import ir
        from onnxscript.onnx_opset import opset18 as op

        call = _plan(spec, args, kwargs, ir.Value, _onnxscript_meta)
        inputs = list(call.tensor_inputs)
        for i, dtype in enumerate(call.input_casts):
            if dtype is not None:
                inputs[i] = op.Cast(inputs[i], to=getattr(ir.DataType, _ONNX_DTYPES[dtype]))
        # Shape inputs as the plugin takes them (and the converter passes them): 1-element int64 tensors.
        ones = op.Constant(value_ints=[1]) if call.shape_inputs else None
        inputs += [op.Reshape(op.Cast(s, to=ir.DataType.INT64), ones) for s in call.shape_inputs]
        attributes = {
            k: ir.tensor(v) if isinstance(v, np.ndarray) else v for k, v in node_attributes(spec, call).items()
        }
        node = _onnxscript_op(spec, len(inputs), call.num_outputs, attributes)
        return _op_outputs(call, node(*inputs, **attributes))

    translate.__signature__ = _python_signature(spec)
    translate.__name__ = translate.__qualname__ = f"{spec.name}_to_{spec.plugin_name}"
    return translate


def translation_table(entries: Sequence[registry.OpEntry] | None = None) -> dict[Any, Callable]:
    """``custom_translation_table`` for ``torch.onnx.export(..., dynamo=True)``: every overload of every op."""
    table: dict[Any, Callable] = {}
    for entry in _entries(entries):
        packet = torch_op(entry.spec)
        translate = _translation(entry)
        for overload in packet.overloads():
            table[getattr(packet, overload)] = translate
    return table


# ------------------------------------------------------------------------------ TorchScript exporter


_TORCHSCRIPT_MIN_OPSET = 7
# The TorchScript exporter's newest opset (20 in torch 2.11-2.13); private in torch, so with a fallback.
_TORCHSCRIPT_MAX_OPSET = getattr(
    importlib.import_module("torch.onnx._constants"), "ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET", 20
)
#: Schema scalar types -> symbolic_helper constant kinds.
_SCALAR_KINDS = {"float": "f", "int": "i", "SymInt": "i", "bool": "b", "str": "s"}


def _torchscript_symbolic(entry: registry.OpEntry) -> Callable:
    spec = entry.spec
    signature = _python_signature(spec)
    schema = torch._C.parse_schema(f"{spec.qualname}{spec.schema}")
    kinds = {a.name: _SCALAR_KINDS.get(str(a.type)) for a in schema.arguments}

    def symbolic(g: Any, *args: Any):
        from torch.onnx import symbolic_helper

        bound = signature.bind(*args)
        values = {}
        for name, value in bound.arguments.items():
            kind = kinds[name]
            if kind is not None and isinstance(value, torch._C.Value) and symbolic_helper._is_constant(value):
                value = symbolic_helper._maybe_get_const(value, kind)
            values[name] = value
        call = _plan(spec, (), values, torch._C.Value, _torchscript_meta)
        inputs = list(call.tensor_inputs)
        for i, dtype in enumerate(call.input_casts):
            if dtype is not None:
                inputs[i] = g.op("Cast", inputs[i], to_i=_onnx_dtype(dtype))
        ones = g.op("Constant", value_t=torch.tensor([1], dtype=torch.int64)) if call.shape_inputs else None
        inputs += [g.op("Reshape", g.op("Cast", s, to_i=_onnx_dtype(torch.int64)), ones) for s in call.shape_inputs]
        attributes = {
            f"{k}_{_torchscript_suffix(v)}": _torchscript_value(v) for k, v in node_attributes(spec, call).items()
        }
        outputs = g.op(f"{domain(spec)}::{spec.plugin_name}", *inputs, outputs=call.num_outputs, **attributes)
        return _op_outputs(call, outputs)

    return symbolic


def _onnx_dtype(dtype: torch.dtype) -> int:
    import onnx

    return getattr(onnx.TensorProto, _ONNX_DTYPES[dtype])


def _torchscript_suffix(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return "t"
    if isinstance(value, list):  # g.op makes a list value FLOATS/INTS from the scalar suffix
        return "f" if isinstance(value[0], float) else "i"
    return {float: "f", int: "i", str: "s"}[type(value)]


def _torchscript_value(value: Any) -> Any:
    return torch.from_numpy(np.ascontiguousarray(value)) if isinstance(value, np.ndarray) else value


def register_torchscript_symbolics(entries: Sequence[registry.OpEntry] | None = None) -> None:
    """Register the symbolic functions of every op for ``torch.onnx.export(..., dynamo=False)``. Idempotent.

    Registered at every opset the exporter has: it dispatches to the newest registration at or below the target,
    so a symbolic another package registered for the same op at a higher opset would win over one registered at
    the lowest (torchvision registers ONNX RoiAlign and NonMaxSuppression for its ops at opsets 11 and 16). ONNX
    shape inference does not know the plugin nodes, so that exporter gives all their output dims symbolic names.
    """
    for entry in _entries(entries):
        symbolic = _torchscript_symbolic(entry)
        for opset in range(_TORCHSCRIPT_MIN_OPSET, _TORCHSCRIPT_MAX_OPSET + 1):
            torch.onnx.register_custom_op_symbolic(entry.spec.qualname, symbolic, opset)


# ------------------------------------------------------------------------------------- one call


def export(
    model: Any, args: tuple = (), f: Any = None, *, dynamo: bool = True, weights_as_fields: bool = False, **kwargs: Any
):
    """``torch.onnx.export`` with our ops as TensorRT plugin nodes (either exporter). Returns what it returns.
    ``weights_as_fields``: then, in the file ``f``, ``weights_to_fields``."""
    if weights_as_fields and not isinstance(f, (str, os.PathLike)):
        raise ValueError(f"export(weights_as_fields=True) rewrites the file it writes: f must be a path, got {f!r}")
    if dynamo:
        table = translation_table()
        table.update(kwargs.pop("custom_translation_table", None) or {})
        result = torch.onnx.export(model, args, f, dynamo=True, custom_translation_table=table, **kwargs)
    else:
        register_torchscript_symbolics()
        result = torch.onnx.export(model, args, f, dynamo=False, **kwargs)
    if weights_as_fields:
        import onnx

        onnx.save(weights_to_fields(onnx.load(f)), f)
    return result


# ------------------------------------------------------------------------------------- weights as fields


def weights_to_fields(model: Any, entries: Sequence[registry.OpEntry] | None = None) -> Any:
    """Moves each plugin node's declared weight input (``declare(weight_fields=...)``) that is an initializer of the
    graph into the node's attributes: a TENSOR attribute named after the argument (TensorRT's ONNX parser makes it a
    field of the tensor's element type) and INTS ``<name>_shape``; the plugin then takes one input fewer. Rewrites
    and returns ``model`` (an ``onnx.ModelProto``); an initializer no other node reads is dropped."""
    from onnx import TensorProto, helper, numpy_helper

    # Element types onnx-tensorrt's loadFields rejects in a plugin field ("is unsupported in plugin fields").
    unheld = (TensorProto.INT64, TensorProto.BOOL, TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32)
    specs = {(s.plugin_name, s.plugin_version, s.plugin_namespace): s for s in (e.spec for e in _entries(entries))}
    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    for node in graph.node:
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        version, namespace = (attributes.get(k, b"") for k in ("plugin_version", "plugin_namespace"))
        spec = specs.get((node.op_type, version.decode() or "1", namespace.decode()))
        if spec is None or not spec.weight_fields:
            continue
        names = [t.name for t in spec.inputs]
        for name in reversed(spec.weight_fields):  # from the last input: the earlier indices stay valid
            index = names.index(name)
            tensor = initializers.get(node.input[index])
            if tensor is None:
                continue
            if tensor.data_type in unheld:
                raise OnnxExportError(
                    f"{spec.label}: argument '{name}' as a weight field has element type "
                    f"{helper.tensor_dtype_to_string(tensor.data_type)}, which TensorRT's ONNX parser does not take "
                    "in a plugin field; leave it a node input"
                )
            value = numpy_helper.to_array(tensor)
            node.attribute.append(helper.make_attribute(name, numpy_helper.from_array(value.reshape(-1), name)))
            node.attribute.append(helper.make_attribute(f"{name}_shape", [int(d) for d in value.shape]))
            del node.input[index]
            _shift_shape_input_indices(node, index)
    used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return model


def _shift_shape_input_indices(node: Any, removed: int) -> None:
    """The node's ``tensorrt_plugin_shape_input_indices`` after input ``removed`` is gone."""
    for attribute in node.attribute:
        if attribute.name == SHAPE_INPUT_INDICES:
            shifted = [i - 1 if i > removed else i for i in attribute.ints]
            del attribute.ints[:]
            attribute.ints.extend(shifted)
