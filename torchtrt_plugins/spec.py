"""Op specs: the single source of truth for every op, made by ``torchtrt_plugins.declare`` from the op's schema and
its declaration.

A spec says what the torch op looks like (schema), what the TensorRT plugin is called and which
fields it takes (name, PluginFieldType, the op argument that feeds it, default, valid range),
which dtypes/formats each tensor accepts, which arguments may become shape inputs, and the test
tolerances. The torch registration, the fake-kernel checks, the converter and the tests are all
driven from here; a test checks the C++ plugin against it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from . import dtypes
from .errors import SpecError

#: Namespace of our torch ops (``torch.ops.torchtrt.*``) and of our TensorRT plugins.
NAMESPACE = "torchtrt"

#: Tensor dtype -> the PluginFieldType of a weight field holding its elements (``declare(weight_fields=...)``).
WEIGHT_FIELD_TYPES = dtypes.WEIGHT_FIELD_TYPES

#: PluginFieldType member name -> numpy dtype name used when serializing a field value.
FIELD_NUMPY_DTYPES = {
    "FLOAT16": "float16",
    "FLOAT32": "float32",
    "FLOAT64": "float64",
    "INT8": "int8",
    "INT16": "int16",
    "INT32": "int32",
    "INT64": "int64",
    "CHAR": "int8",
}


#: The PluginFieldType TensorRT's ONNX parser delivers a field of each type as, where it differs: onnx-tensorrt's
#: ``loadFields`` makes an INT attribute kINT32 and a FLOAT attribute kFLOAT32, and no attribute becomes kINT64
#: (TensorRT-RTX also hands over a DOUBLE tensor as kFLOAT32; see ``torchtrt_plugins/onnx.py``). createPlugin takes
#: these in place of the field's own type, and no other (``acceptsType`` in csrc/sdk/plugin_support.cpp).
PARSER_FIELD_TYPES = {"INT64": "INT32", "FLOAT64": "FLOAT32"}


@dataclass(frozen=True)
class FieldSpec:
    """One plugin field.

    ``arg`` is the op argument that feeds the field. ``shape_input`` marks an integer argument that,
    when it is symbolic in the graph (a SymInt), is passed to the plugin as a shape input instead
    of a field; the field then carries ``shape_input_sentinel``.
    """

    name: str
    type: str
    arg: str | None = None
    default: Any = None
    min: float | None = None
    max: float | None = None
    min_inclusive: bool = True
    required: bool = True
    shape_input: bool = False
    shape_input_sentinel: int = -1
    #: A bool argument, carried as 0/1 in an integer field.
    boolean: bool = False
    doc: str = ""

    def __post_init__(self) -> None:
        if self.type not in FIELD_NUMPY_DTYPES:
            raise ValueError(f"field {self.name!r}: unsupported PluginFieldType {self.type!r}")

    @property
    def is_float(self) -> bool:
        return self.type.startswith("FLOAT")

    @property
    def accepted_types(self) -> tuple[str, ...]:
        """The PluginFieldTypes createPlugin takes for this field: its own, then the one the ONNX parser delivers."""
        parsed = PARSER_FIELD_TYPES.get(self.type)
        return (self.type, parsed) if parsed else (self.type,)

    def expectation(self) -> str:
        if self.boolean:
            return "a bool"
        kind = "a float" if self.is_float else "an integer"
        parts = []
        if self.min is not None:
            parts.append(f"{'>=' if self.min_inclusive else '>'} {self._number(self.min)}")
        if self.max is not None:
            parts.append(f"<= {self._number(self.max)}")
        return kind + (" " + " and ".join(parts) if parts else "")

    def _number(self, value: float) -> str:
        """A bound as the C++ checker prints it (``expectation`` in csrc/sdk/fields.cpp): an integer field's as an
        integer (16777216, not 1.67772e+07), others as their repr without a trailing ".0" (0, 1e-06, 0.5)."""
        if not self.is_float and math.isfinite(value) and float(value).is_integer():
            return str(int(value))
        return repr(float(value)).removesuffix(".0")

    def check(self, op: str, value: Any) -> Any:
        """Return the value coerced to the field's Python type, or raise SpecError.

        A SymInt for a ``shape_input`` field (fake kernels, tracing) is returned as it is, with its
        bounds recorded through ``torch._check`` instead of read.
        """
        label = op.replace("::", ".") if "::" in op else f"{NAMESPACE}.{op}"
        where = f"{label}: argument '{self.arg or self.name}'"
        if self.shape_input and isinstance(value, torch.SymInt):
            if self.min is not None:
                low_ok = value >= self.min if self.min_inclusive else value > self.min
                torch._check_with(SpecError, low_ok, lambda: f"{where} must be {self.expectation()}, got {value}")
            if self.max is not None:
                torch._check_with(
                    SpecError, value <= self.max, lambda: f"{where} must be {self.expectation()}, got {value}"
                )
            return value
        if self.boolean:
            if not isinstance(value, (bool, int)) or value not in (0, 1):
                raise SpecError(f"{where} must be {self.expectation()}, got {value!r}")
            return int(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SpecError(f"{where} must be {self.expectation()}, got {value!r}")
        if not self.is_float and not float(value).is_integer():
            raise SpecError(f"{where} must be {self.expectation()}, got {value!r}")
        coerced = float(value) if self.is_float else int(value)
        if self.is_float and not math.isfinite(coerced):
            raise SpecError(f"{where} must be {self.expectation()}, got {value!r}")
        low_ok = self.min is None or (coerced >= self.min if self.min_inclusive else coerced > self.min)
        high_ok = self.max is None or coerced <= self.max
        if not (low_ok and high_ok):
            raise SpecError(f"{where} must be {self.expectation()}, got {value!r}")
        return coerced


@dataclass(frozen=True)
class TensorSpec:
    """A tensor input or output: allowed dtypes and formats (TensorRT ``TensorFormat`` names)."""

    name: str
    dtypes: tuple[torch.dtype, ...]
    formats: tuple[str, ...] = ("LINEAR",)
    same_dtype_as: str | None = None
    #: The dtype the plugin takes this input as, where TensorRT plugins cannot take the torch dtype
    #: (kBOOL): the converter casts the tensor to it in front of the plugin.
    plugin_dtype: torch.dtype | None = None
    doc: str = ""


@dataclass(frozen=True)
class Tolerance:
    """How close ``testing.check_op`` requires an op's outputs of one dtype to be to the reference's and to each other's
    (eager vs reference, CUDA vs CPU, compiled, plugin enqueue): ``torch.testing.assert_close``'s atol and rtol."""

    atol: float
    rtol: float


#: The tolerance of a dtype a declaration's ``tolerances`` leaves out: about two units in the last place for fp16 and
#: bf16 (a kernel that accumulates in fp32 and rounds once differs from a reference by one, sometimes two), 1e-5
#: for fp32 and fp64, exact for integers and bool.
DEFAULT_TOLERANCES = {
    torch.float64: Tolerance(1e-5, 1e-5),
    torch.float32: Tolerance(1e-5, 1e-5),
    torch.float16: Tolerance(2e-3, 2e-3),
    torch.bfloat16: Tolerance(1.6e-2, 1.6e-2),
}


@dataclass(frozen=True)
class Tactic:
    value: int
    name: str
    doc: str = ""


@dataclass(frozen=True)
class OpSpec:
    name: str
    schema: str
    plugin_name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    fields: tuple[FieldSpec, ...] = ()
    plugin_version: str = "1"
    plugin_namespace: str = NAMESPACE
    tactics: tuple[Tactic, ...] = ()
    tolerances: dict = field(default_factory=dict)
    #: Outputs whose shape depends on data: Torch-TensorRT must run the engine with an output allocator.
    requires_output_allocator: bool = False
    #: Extra plugin outputs that the torch op does not return (e.g. size tensors).
    hidden_outputs: int = 0
    #: The tensor inputs the op updates in place (``Tensor(a!)`` in its schema), in schema order. Each adds one
    #: plugin output after the size tensors, aliased to that input (``IPluginV3OneBuildV2::getAliasedInput``).
    mutated: tuple[str, ...] = ()
    #: The plugin's enqueue reads back to the host (waits for its stream). Undeclared, the conformance harness
    #: requires enqueue to be captured in a CUDA graph and replay to the same outputs; declared, it requires the
    #: opposite (a stale declaration is a violation too).
    enqueue_syncs_host: bool = False
    #: The tensor inputs the plugin may take as fields instead of network inputs (``declare(weight_fields=...)``):
    #: a field named after the argument holds its elements, ``<name>_shape`` (INT64) its dims.
    weight_fields: tuple[str, ...] = ()
    doc: str = ""
    #: The torch namespace of the op (``torch.ops.<op_namespace>.<name>``); ours by default.
    op_namespace: str = NAMESPACE

    @property
    def label(self) -> str:
        """How messages name the op: ``torchtrt.rms_norm``, ``myops.scaled_add``."""
        return f"{self.op_namespace}.{self.name}"

    @property
    def qualname(self) -> str:
        return f"{self.op_namespace}::{self.name}"

    @property
    def creator_key(self) -> tuple[str, str, str]:
        return (self.plugin_name, self.plugin_version, self.plugin_namespace)

    @property
    def num_plugin_outputs(self) -> int:
        return len(self.outputs) + self.hidden_outputs + len(self.mutated)

    @property
    def aliased_inputs(self) -> tuple[int, ...]:
        """Per aliased plugin output (the last ``len(mutated)`` outputs), the index of the input it aliases."""
        names = [t.name for t in self.inputs]
        return tuple(names.index(name) for name in self.mutated)

    def input(self, name: str) -> TensorSpec:
        for spec in self.inputs:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def field_by_name(self, name: str) -> FieldSpec:
        for spec in self.fields:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        """The declared tolerance of ``dtype``, else its default (``DEFAULT_TOLERANCES``; exact for other dtypes)."""
        return self.tolerances.get(dtype, DEFAULT_TOLERANCES.get(dtype, Tolerance(0.0, 0.0)))

    def check_dtypes(self, tensors: Sequence[torch.Tensor]) -> None:
        """Raise SpecError unless each tensor input has an allowed dtype (and matches its peers)."""
        by_name = {}
        for spec, tensor in zip(self.inputs, tensors):
            by_name[spec.name] = tensor
            if tensor.dtype not in spec.dtypes:
                allowed = ", ".join(str(d).replace("torch.", "") for d in spec.dtypes)
                raise SpecError(
                    f"{self.label}: argument '{spec.name}' must have dtype in "
                    f"{{{allowed}}}, got {str(tensor.dtype).replace('torch.', '')}"
                )
            if spec.same_dtype_as is not None:
                other = by_name[spec.same_dtype_as]
                if tensor.dtype != other.dtype:
                    raise SpecError(
                        f"{self.label}: argument '{spec.name}' must have the same dtype as "
                        f"'{spec.same_dtype_as}' ({other.dtype}), got {tensor.dtype}"
                    )


def field_table(specs: Sequence[OpSpec]) -> str:
    """The Markdown table of the plugins' fields (docs/ops.md, "Plugin fields"): each field's PluginFieldType and the
    type TensorRT's ONNX parser delivers it as (createPlugin takes both, and no other), the op argument feeding it,
    its valid values (with the shape-input marker) and its default."""
    rows = [
        "| plugin | field | PluginFieldType (also taken: from ONNX) | argument | valid values | default |",
        "|---|---|---|---|---|---|",
    ]
    for spec in specs:
        plugin = f"`{spec.plugin_namespace}::{spec.plugin_name}` v{spec.plugin_version}"
        if not spec.fields:
            rows.append(f"| {plugin} | (none) | | | | |")
        for f in spec.fields:
            types = f"{f.type} ({f.accepted_types[1]})" if len(f.accepted_types) > 1 else f.type
            values = "0 or 1 (a bool)" if f.boolean else f.expectation()
            if f.shape_input:
                values += f"; {f.shape_input_sentinel}: from a shape input"
            default = "required" if f.required else repr(f.default)
            rows.append(f"| {plugin} | `{f.name}` | {types} | `{f.arg or '-'}` | {values} | {default} |")
        for name in spec.weight_fields:
            types = ", ".join(WEIGHT_FIELD_TYPES[d] for d in spec.input(name).dtypes)
            rows.append(
                f"| {plugin} | `{name}` | {types} (its input's; advertised as UNKNOWN) | `{name}` | its elements, as "
                f"many as `{name}_shape` holds | absent: a network input |"
            )
            rows.append(f"| {plugin} | `{name}_shape` | INT64 (INT32) | `{name}` | its dims, each >= 0 | 1-D |")
    return "\n".join(rows) + "\n"


#: A C++ function name, namespace-qualified or not (a launcher, workspace or resource function of the library).
CXX_SYMBOL = re.compile(r"^(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*$")


def _schema(spec: OpSpec) -> torch.FunctionSchema:
    return torch._C.parse_schema(f"{spec.qualname}{spec.schema}")


def bind(spec: OpSpec, args: Sequence[Any], kwargs: dict) -> dict[str, Any]:
    """Map positional and keyword args onto the schema's argument names, filling defaults."""
    schema = _schema(spec)
    bound: dict[str, Any] = {}
    names = [a.name for a in schema.arguments]
    if len(args) > len(names):
        raise SpecError(f"{spec.label}: expected at most {len(names)} arguments, got {len(args)}")
    for name, value in zip(names, args, strict=False):  # args may stop early: defaults fill the rest
        bound[name] = value
    for name, value in kwargs.items():
        if name not in names:
            raise SpecError(f"{spec.label}: unexpected argument '{name}'")
        bound[name] = value
    for argument in schema.arguments:
        if argument.name not in bound:
            if argument.has_default_value():
                bound[argument.name] = argument.default_value
            else:
                raise SpecError(f"{spec.label}: missing argument '{argument.name}'")
    return bound
