"""The rtx tier: our plugin library inside NVIDIA's own plugin registry (TensorRT-RTX, CPU is enough).

Fixtures give the ``tensorrt_rtx`` module (through ``torchtrt_plugins._compat``), a logger that
records what TensorRT logs (installed before the library is loaded, so our plugins' messages reach
it), the built library, and the registry with the library loaded. ``pytest_generate_tests`` derives
the cases from the op specs: one valid plugin call per op built from spec defaults, and the invalid
field values every field must reject.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from torchtrt_plugins import _build, _compat, converters, native
from torchtrt_plugins import plan as planning
from torchtrt_plugins import registry as op_registry
from torchtrt_plugins import spec as spec_mod
from torchtrt_plugins.ops import multi_scale_deformable_attention

PluginCall = converters.PluginCall
FieldValue = planning.FieldValue

#: Schema arguments that neither a schema default nor a field spec can supply, per op:
#: {op name: {argument name: example value}}. Tensors and field-fed arguments are filled in generically.
EXAMPLE_ARGS: dict[str, dict[str, Any]] = {
    # Tensors whose shapes the op's fake kernel accepts with the (4, 8) default of the first input.
    "rms_norm": {"weight": torch.ones(8)},
    "add_rms_norm": {"weight": torch.ones(8)},
    "rms_norm_fp8": {"weight": torch.ones(8), "scale": torch.ones(())},
    "rms_norm_int8": {"weight": torch.ones(8), "scale": torch.ones(())},
    "masked_rows": {"mask": torch.ones(4, dtype=torch.bool)},
    "pad_to": {"x": torch.zeros(1, 2, 4, 8)},  # (B, C, H, W)
    "rotary_embedding": {"positions": torch.zeros((), dtype=torch.int64)},  # x: (heads, head_dim), one token
    "efficient_nms": {"boxes": torch.zeros(1, 8, 4), "scores": torch.zeros(1, 8, 3)},
    "multi_scale_deformable_attention": dict(
        zip(
            ("value", "spatial_shapes", "level_start_index", "sampling_locations", "attention_weights"),
            multi_scale_deformable_attention.example_inputs(),
            strict=True,
        )
    ),
}


# ------------------------------------------------------------------------------------ cases from specs


class SymbolicInt:
    """Stands for a SymInt argument: ``plan`` turns a shape-input field fed by it into a shape input."""

    def __repr__(self) -> str:
        return "SymbolicInt()"


def valid_field_value(fspec: spec_mod.FieldSpec) -> Any:
    """The field's default, else a value inside its range."""
    if fspec.default is not None:
        value = fspec.default
    elif fspec.min is not None:
        value = fspec.min if fspec.min_inclusive else fspec.min + 1
    elif fspec.max is not None:
        value = fspec.max
    else:
        value = 1
    return float(value) if fspec.is_float else int(value)


def _example_tensor(spec: spec_mod.OpSpec, name: str) -> torch.Tensor:
    dtypes = next((t.dtypes for t in spec.inputs if t.name == name), (torch.float32,))
    return torch.zeros(4, 8, dtype=dtypes[0])


def example_call(spec: spec_mod.OpSpec, symbolic_shape_inputs: bool = False) -> PluginCall:
    """A valid plugin call for the op, planned by the converter from spec defaults and EXAMPLE_ARGS."""
    schema = torch._C.parse_schema(f"{spec.qualname}{spec.schema}")
    overrides = EXAMPLE_ARGS.get(spec.name, {})
    by_arg = {f.arg: f for f in spec.fields if f.arg}
    kwargs: dict[str, Any] = {}
    for argument in schema.arguments:
        name = argument.name
        fspec = by_arg.get(name)
        if name in overrides:
            kwargs[name] = overrides[name]
        elif symbolic_shape_inputs and fspec is not None and fspec.shape_input:
            kwargs[name] = SymbolicInt()
        elif str(argument.type).startswith("Tensor") and not argument.has_default_value():
            kwargs[name] = _example_tensor(spec, name)
        elif argument.has_default_value():
            continue
        elif fspec is not None:
            kwargs[name] = valid_field_value(fspec)
        else:
            raise LookupError(
                f"{spec.name}: no example for argument '{name}'; add one to EXAMPLE_ARGS in tests/rtx/conftest.py"
            )
    return converters.plan(spec, (), kwargs, is_symbolic=lambda value: isinstance(value, SymbolicInt))


@dataclass(frozen=True)
class ValidCase:
    entry: op_registry.OpEntry
    variant: str  # "constants", or "shape_inputs" (shape-input arguments symbolic: fields carry the sentinel)

    @property
    def id(self) -> str:
        return f"{self.entry.spec.name}-{self.variant}"

    def call(self) -> PluginCall:
        return example_call(self.entry.spec, symbolic_shape_inputs=self.variant == "shape_inputs")


@dataclass(frozen=True)
class InvalidField:
    """A valid call with one field broken: dropped (``value`` None), replaced by ``value``, or given twice."""

    entry: op_registry.OpEntry
    field: str
    kind: str
    value: FieldValue | None

    @property
    def id(self) -> str:
        return f"{self.entry.spec.name}-{self.field}-{self.kind}"

    def call(self) -> PluginCall:
        call = example_call(self.entry.spec)
        fields = [f for f in call.fields if f.name != self.field]
        if self.kind == "duplicated":
            fields += [f for f in call.fields if f.name == self.field]
        if self.value is not None:
            fields.append(self.value)
        return dataclasses.replace(call, fields=fields)


def _out_of_range(fspec: spec_mod.FieldSpec) -> list[tuple[str, float]]:
    cases = []
    if fspec.min is not None:
        below = fspec.min if not fspec.min_inclusive else fspec.min - 1
        if fspec.shape_input and below == fspec.shape_input_sentinel:
            below -= 1
        cases.append(("below_min", below))
    if fspec.max is not None:
        cases.append(("above_max", fspec.max + 1))
    return cases


def invalid_fields(entry: op_registry.OpEntry) -> list[InvalidField]:
    cases = []
    for fspec in entry.spec.fields:
        good = valid_field_value(fspec)

        def case(kind: str, value: FieldValue | None, fspec=fspec) -> InvalidField:
            return InvalidField(entry, fspec.name, kind, value)

        if fspec.required:
            cases.append(case("missing", None))
        # CHAR is text, never a number; an integer field must also refuse a float and a float field an integer; the
        # only stand-ins are the types TensorRT's ONNX parser delivers (INT32 for INT64, FLOAT32 for FLOAT64).
        cases.append(case("type_char", FieldValue(fspec.name, "CHAR", 1)))
        if not fspec.is_float:
            cases.append(case("type_float32", FieldValue(fspec.name, "FLOAT32", float(good))))
            cases.append(case("type_int16", FieldValue(fspec.name, "INT16", int(good))))
        else:
            cases.append(case("type_int32", FieldValue(fspec.name, "INT32", 1)))  # in range: refused for its type
        cases.append(case("duplicated", FieldValue(fspec.name, fspec.type, good)))
        for kind, value in _out_of_range(fspec):
            cases.append(case(kind, FieldValue(fspec.name, fspec.type, value)))
        if fspec.is_float:
            cases.append(case("nan", FieldValue(fspec.name, fspec.type, math.nan)))
        cases.append(case("two_values", FieldValue(fspec.name, fspec.type, [good, good])))
    return cases


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    entries = op_registry.all_ops()
    if "entry" in metafunc.fixturenames:
        metafunc.parametrize("entry", entries, ids=[e.spec.name for e in entries])
    if "valid_case" in metafunc.fixturenames:
        cases = [
            ValidCase(e, variant)
            for e in entries
            for variant in ("constants", "shape_inputs")
            if variant == "constants" or any(f.shape_input for f in e.spec.fields)
        ]
        metafunc.parametrize("valid_case", cases, ids=[c.id for c in cases])
    if "invalid_field" in metafunc.fixturenames:
        cases = [c for e in entries for c in invalid_fields(e)]
        metafunc.parametrize("invalid_field", cases, ids=[c.id for c in cases])


# ------------------------------------------------------------------------------------ TensorRT-RTX


@dataclass(frozen=True)
class LogRecord:
    severity: str  # ILogger.Severity member name: INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE
    message: str


class TrtLog:
    """Records every message logged through TensorRT's logger, our plugins' included."""

    def __init__(self, trt: Any) -> None:
        records: list[LogRecord] = []

        class RecordingLogger(trt.ILogger):
            def __init__(self) -> None:
                trt.ILogger.__init__(self)

            def log(self, severity: Any, msg: str) -> None:
                records.append(LogRecord(severity.name, msg))

        self.records = records
        self.logger = RecordingLogger()
        # The first logger given to a Runtime/Builder becomes the process's logger, which the
        # registry hands to plugin libraries through setLoggerFinder.
        self.runtime = trt.Runtime(self.logger)

    @contextlib.contextmanager
    def capture(self) -> Iterator[list[LogRecord]]:
        start = len(self.records)
        captured: list[LogRecord] = []
        try:
            yield captured
        finally:
            captured.extend(self.records[start:])

    @staticmethod
    def errors(records: list[LogRecord]) -> list[LogRecord]:
        return [r for r in records if r.severity in ("ERROR", "INTERNAL_ERROR")]


@pytest.fixture(scope="session")
def trt() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHTRT_PLUGINS_TENSORRT", "tensorrt_rtx")
        module = _compat.require_tensorrt()
    assert module.__name__ == "tensorrt_rtx", module
    return module


@pytest.fixture(scope="session")
def trt_log(trt: Any) -> TrtLog:
    return TrtLog(trt)


@pytest.fixture(scope="session")
def plugin_library() -> Path:
    """The plugin library (TORCHTRT_PLUGINS_LIBRARY, else the wheel's prebuilt one, else built from the sources)."""
    if not os.environ.get("TORCHTRT_PLUGINS_LIBRARY"):
        reason = _build.plugin_library_unavailable()
        if reason:
            pytest.skip(f"rtx tier: {reason}")
    return native.plugin_library_path()


@pytest.fixture(scope="session")
def registry(trt: Any, trt_log: TrtLog, plugin_library: Path) -> Any:
    """TensorRT-RTX's global registry with our library loaded (by ``load_plugins``, after the logger). Ours alone:
    every test module's declared libraries are declared in every worker (collection imports them all), and loading
    them all built each one in each worker; a test of a declared library loads it itself."""
    registry = trt.get_plugin_registry()
    assert native.load_plugins(registry, libraries=()) == plugin_library
    return registry


@pytest.fixture
def our_creators(registry: Any) -> Any:
    """Returns the sorted [name, version, namespace] of the creators in our namespace, now."""

    def keys() -> list[list[str]]:
        return sorted(
            [c.name, c.plugin_version, c.plugin_namespace]
            for c in registry.all_creators
            if c.plugin_namespace == spec_mod.NAMESPACE
        )

    return keys
