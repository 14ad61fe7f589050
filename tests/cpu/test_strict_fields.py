"""createPlugin is a trust boundary (fields come from plans and ONNX graphs others wrote): a duplicated field, a field
of the wrong type, a wrong length, NaN or infinity and an out-of-range value each give nullptr and a message naming the
op, the field and what was expected; the only types that stand in for a field's own are those TensorRT's ONNX parser
delivers (INT32 for INT64, FLOAT32 for FLOAT64); a shape-input marker without its shape input fails getOutputShapes
naming the field. Driven through the harness on the SDK's test ops (tests/sdk_ops: sdk_test::shapes has a SymInt, an
int, a bool and a float field)."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import math  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402
import sdk_ops  # noqa: E402

import torchtrt_plugins as ttp  # noqa: E402
from torchtrt_plugins.testing import TensorArg, run_plugin  # noqa: E402

PREFIX = "sdk_test::shapes (plugin sdk_test::Shapes) createPlugin: "
INPUTS = [TensorArg((6, 5)), TensorArg((5,))]
FIELD_TYPES = ["FLOAT16", "FLOAT32", "FLOAT64", "INT8", "INT16", "INT32", "INT64", "CHAR", "BF16"]
INT64 = "INT64 (or INT32, as TensorRT's ONNX parser delivers an INT attribute)"
FLOAT64 = "FLOAT64 (or FLOAT32, as TensorRT's ONNX parser delivers a FLOAT attribute)"


@pytest.fixture(scope="module")
def library():
    from torchtrt_plugins import _build

    try:
        return sdk_ops.LIBRARY.build().plugins
    except _build.BuildError as err:
        pytest.fail(f"the SDK must build a declared-op library wherever nvcc and the TensorRT headers are: {err}")


def constant_call():
    return sdk_ops.shapes_call(symbolic=False)


def fields_of(call):
    return [(f.name, f.type, f.value) for f in call.fields]


def replaced(call, name, *replacements):
    """The call's fields with field `name` replaced by `replacements` (tuples or raw dicts; none: dropped)."""
    out = []
    for field in fields_of(call):
        out += list(replacements) if field[0] == name else [field]
    return out


def rejections(library, call, field_sets, shape_inputs=()):
    """createPlugin's answer for each field set: None where it created a plugin, else the error lines it logged."""
    result = run_plugin(
        library, "Shapes", namespace="sdk_test", fields=fields_of(call), inputs=INPUTS, shape_inputs=shape_inputs,
        invalid_fields=field_sets, enqueue=False,
    )  # fmt: skip
    assert not result.stopped, result.stopped
    out = []
    for outcome in result.invalid_fields:
        errors = [line.message for line in outcome.log if line.severity == "ERROR"]
        out.append("\n".join(errors) if outcome.rejected else None)
    return out


# (id, the field replaced (None: one added), the fields replacing it, what the message must say)
REJECTED = [
    ("duplicated", "k", [("k", "INT64", 3), ("k", "INT64", 3)], "field 'k' is given 2 times (expected once)"),
    ("duplicated-with-another-type", "scale", [("scale", "FLOAT64", 1.0), ("scale", "FLOAT32", 2.0)],
     "field 'scale' is given 2 times (expected once)"),
    ("int16-for-int64", "k", [("k", "INT16", 3)],
     f"field 'k' has unsupported PluginFieldType INT16 (expected {INT64})"),
    ("int8-for-int64", "n", [("n", "INT8", 9)], f"field 'n' has unsupported PluginFieldType INT8 (expected {INT64})"),
    ("int64-for-int32", "flag", [("flag", "INT64", 1)],
     "field 'flag' has unsupported PluginFieldType INT64 (expected INT32)"),
    ("float64-for-int64", "k", [("k", "FLOAT64", 3.0)],
     f"field 'k' has unsupported PluginFieldType FLOAT64 (expected {INT64})"),
    ("int32-for-float64", "scale", [("scale", "INT32", 2)],
     f"field 'scale' has unsupported PluginFieldType INT32 (expected {FLOAT64})"),
    ("int64-for-float64", "scale", [("scale", "INT64", 2)],
     f"field 'scale' has unsupported PluginFieldType INT64 (expected {FLOAT64})"),
    ("float16-for-float64", "scale", [("scale", "FLOAT16", 2.0)],
     f"field 'scale' has unsupported PluginFieldType FLOAT16 (expected {FLOAT64})"),
    ("bf16-for-float64", "scale", [("scale", "BF16", 2.0)],
     f"field 'scale' has unsupported PluginFieldType BF16 (expected {FLOAT64})"),
    ("char-for-int64", "k", [{"name": "k", "type": "CHAR", "hex": "33"}],
     f"field 'k' has unsupported PluginFieldType CHAR (expected {INT64})"),
    ("two-values", "k", [("k", "INT64", [3, 3])], "field 'k' must hold exactly one value, got length 2"),
    ("no-values", "scale", [{"name": "scale", "type": "FLOAT64", "data": [], "length": 0}],
     "field 'scale' must hold exactly one value, got length 0"),
    ("no-data", "k", [{"name": "k", "type": "INT64", "data": None, "length": 1}],
     "field 'k' must hold exactly one value, got length 1 and no data"),
    ("nan", "scale", [("scale", "FLOAT64", math.nan)], "field 'scale' must be a float > 0, got nan"),
    ("inf", "scale", [("scale", "FLOAT64", math.inf)], "field 'scale' must be a float > 0, got inf"),
    ("inf-float32", "scale", [("scale", "FLOAT32", math.inf)], "field 'scale' must be a float > 0, got inf"),
    ("above-max", "k", [("k", "INT64", 17)], "field 'k' must be an integer >= 1 and <= 16, got 17"),
    ("above-max-int32", "k", [("k", "INT32", 2**31 - 1)],
     "field 'k' must be an integer >= 1 and <= 16, got 2147483647"),
    ("bool-out-of-range", "flag", [("flag", "INT32", 2)], "field 'flag' must be a bool, got 2"),
    ("integers-printed-as-integers", "n", [("n", "INT64", -1)],
     "field 'n' must be an integer >= 0 (or -2147483648: from a shape input), got -1"),
    ("int64-beyond-a-double", "n", [("n", "INT64", 2**53 + 1)],
     "field 'n' must be an integer >= 0 (or -2147483648: from a shape input) and within +-2^53 (the "
     "launchers take it as a double), got 9007199254740993"),
    ("unknown", None, [("alhpa", "FLOAT64", 1.0)], "unknown field 'alhpa' (expected one of: n, k"),
]  # fmt: skip


@pytest.mark.parametrize(("field", "replacements", "expected"), [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED])
def test_create_plugin_rejects_naming_op_field_and_expectation(library, field, replacements, expected):
    call = constant_call()
    fields = replaced(call, field, *replacements) if field else [*fields_of(call), *replacements]
    (message,) = rejections(library, call, [fields])
    assert message is not None, f"createPlugin accepted {fields}"
    assert message.startswith(PREFIX) and expected in message, message


# (field, its type, a value out of its range)
OUT_OF_RANGE = [("scale", "FLOAT64", -0.5), ("scale", "FLOAT64", 0.0), ("k", "INT64", 17), ("flag", "INT32", 2)]


@pytest.mark.parametrize(("field", "field_type", "value"), OUT_OF_RANGE, ids=lambda v: str(v))
def test_create_plugin_and_the_python_checker_say_the_same_for_a_bad_value(library, field, field_type, value):
    """One checker and formatter in C++ (csrc/sdk/fields.cpp) and FieldSpec.check, derived from the same spec."""
    (spec,) = [f for f in sdk_ops.SHAPES.spec.fields if f.name == field]
    with pytest.raises(ttp.SpecError) as python:
        spec.check("sdk_test::shapes", value)
    call = constant_call()
    (message,) = rejections(library, call, [replaced(call, field, (field, field_type, value))])
    assert str(python.value) == f"sdk_test.shapes: argument '{field}' must be {spec.expectation()}, got {value!r}"
    assert message == f"{PREFIX}field '{field}' must be {spec.expectation()}, got {value!r}"


@pytest.mark.parametrize("shape_inputs", [[], [9, 4]], ids=["none", "two"])
def test_get_output_shapes_names_the_field_a_shape_input_is_missing_for(library, shape_inputs):
    call = sdk_ops.shapes_call()
    result = run_plugin(
        library, "Shapes", namespace="sdk_test", fields=fields_of(call), inputs=INPUTS, shape_inputs=shape_inputs,
        enqueue=False,
    )  # fmt: skip
    expected = f"expected 1 shape inputs (one per field holding the shape-input marker: 'n'), got {len(shape_inputs)}"
    errors = [line.message for line in result.log if line.severity == "ERROR"]
    assert f"sdk_test::shapes (plugin sdk_test::Shapes) getOutputShapes: {expected}" in errors, errors


def test_the_onnx_parsers_types_are_accepted_and_serialized_as_the_fields_own(library):
    """An ONNX INT attribute arrives as INT32, a FLOAT attribute as FLOAT32 (onnx-tensorrt's loadFields)."""
    call = constant_call()
    fields = replaced(call, "n", ("n", "INT32", 9))
    fields = [("k", "INT32", 3) if f[0] == "k" else ("scale", "FLOAT32", 0.5) if f[0] == "scale" else f for f in fields]
    result = run_plugin(library, "Shapes", namespace="sdk_test", fields=fields, inputs=INPUTS, enqueue=False)
    result.assert_conformant()
    serialized = {f["name"]: (f["type"], f["data"]) for f in result.serialized_fields}
    assert {name: serialized[name] for name in ("n", "k", "flag", "scale")} == {
        "n": ("INT64", [9]),
        "k": ("INT64", [3]),
        "flag": ("INT32", [0]),
        "scale": ("FLOAT64", [0.5]),
    }


@pytest.mark.parametrize("field", ["n", "k", "flag", "scale"])
def test_accepted_types_are_the_declarations(library, field):
    """For every PluginFieldType, createPlugin takes a valid value of field `field` exactly when the field's spec
    lists the type (the field table in docs/ops.md documents the same list)."""
    fspec = sdk_ops.SHAPES.spec.field_by_name(field)
    value = {"n": 9, "k": 3, "flag": 1, "scale": 2}[field]
    call = constant_call()

    def field_set(ftype):
        if ftype == "CHAR":
            return replaced(call, field, {"name": field, "type": "CHAR", "hex": "31"})
        return replaced(call, field, (field, ftype, int(value) if ftype.startswith("INT") else float(value)))

    answers = rejections(library, call, [field_set(t) for t in FIELD_TYPES])
    accepted = [t for t, answer in zip(FIELD_TYPES, answers, strict=True) if answer is None]
    assert sorted(accepted) == sorted(fspec.accepted_types)
    for ftype, answer in zip(FIELD_TYPES, answers, strict=True):
        if answer is not None:
            assert re.search(rf"field '{field}' has unsupported PluginFieldType {ftype} \(expected ", answer), answer


# Weight fields: sdk_test::shapes declares weight_fields=("w",), so `w` may come as a FLOAT32/FLOAT16 field of the
# plan (its dims in `w_shape`, 1-D when absent) instead of a network input.
W = [0.5, -1.0, 2.0, 0.25, 3.0]
X_ONLY = [TensorArg((6, 5))]

WEIGHT_REJECTED = [
    ("weight-int32", [("w", "INT32", [1] * 5)],
     "field 'w' (argument 'w' as a weight) must have a PluginFieldType in {FLOAT32, FLOAT16}, got INT32"),
    ("weight-float64", [("w", "FLOAT64", W)],
     "field 'w' (argument 'w' as a weight) must have a PluginFieldType in {FLOAT32, FLOAT16}, got FLOAT64"),
    ("weight-length-vs-shape", [("w", "FLOAT32", W), ("w_shape", "INT64", [4])],
     "field 'w' (argument 'w' as a weight of dims (4)) must hold 4 elements, got 5"),
    ("weight-no-data", [{"name": "w", "type": "FLOAT32", "data": None, "length": 5}],
     "field 'w' (argument 'w' as a weight of dims (5)) must hold 5 elements, got 5 and no data"),
    ("weight-negative-length", [{"name": "w", "type": "FLOAT32", "data": W, "length": -1}],
     "field 'w' (argument 'w' as a weight of dims (0)) must hold 0 elements, got -1"),
    ("shape-volume-beyond-int32", [{"name": "w", "type": "FLOAT32", "data": [], "length": 0},
                                   ("w_shape", "INT64", [2**32, 2**32])],
     "must hold 2147483648 elements, got 0"),
    ("shape-without-weight", [("w_shape", "INT64", [5])],
     "field 'w_shape' is given without field 'w' (argument 'w' as a weight)"),
    ("shape-float", [("w", "FLOAT32", W), ("w_shape", "FLOAT32", [5.0])],
     "field 'w_shape' must be INT64 (or INT32, as TensorRT's ONNX parser delivers INTS) holding the 0 to 8 dims of "
     "argument 'w', got FLOAT32 of length 1"),
    ("shape-negative", [("w", "FLOAT32", W), ("w_shape", "INT64", [-5])],
     "field 'w_shape' gives argument 'w' dim 0 = -5 (expected >= 0)"),
]  # fmt: skip


@pytest.mark.parametrize(("added", "expected"), [c[1:] for c in WEIGHT_REJECTED], ids=[c[0] for c in WEIGHT_REJECTED])
def test_create_plugin_rejects_a_bad_weight_field_naming_op_and_argument(library, added, expected):
    call = constant_call()
    (message,) = rejections(library, call, [[*fields_of(call), *added]])
    assert message is not None, f"createPlugin accepted {added}"
    assert message.startswith(PREFIX) and expected in message, message


def weight_run(library, weight_fields, inputs=X_ONLY):
    call = constant_call()
    return run_plugin(
        library, "Shapes", namespace="sdk_test", fields=[*fields_of(call), *weight_fields], inputs=inputs,
        enqueue=False,
    )  # fmt: skip


@pytest.mark.parametrize("shape", [None, "INT64", "INT32"], ids=["derived", "int64", "int32-from-onnx"])
def test_a_weight_field_stands_for_its_input_and_round_trips(library, shape):
    weight = [("w", "FLOAT32", W)] + ([("w_shape", shape, [5])] if shape else [])
    result = weight_run(library, weight)
    result.assert_conformant()
    serialized = {f["name"]: (f["type"], f["data"]) for f in result.serialized_fields}
    assert serialized["w"] == ("FLOAT32", W)
    assert serialized["w_shape"] == ("INT64", [5])


def test_a_weight_field_of_another_length_than_the_other_inputs_say_names_the_argument(library):
    result = weight_run(library, [("w", "FLOAT32", W[:4])])
    errors = "\n".join(line.message for line in result.log if line.severity == "ERROR")
    assert "sdk_test::shapes (plugin sdk_test::Shapes) configurePlugin" in errors, errors
    assert "'w'.shape[0] == 'x'.shape[1]: the profile's largest input dims give 4 and 5" in errors, errors


def test_a_weight_field_of_another_type_than_its_peer_names_the_argument(library):
    result = weight_run(library, [("w", "FLOAT16", W)])
    errors = "\n".join(line.message for line in result.log if line.severity == "ERROR")
    assert "weight field 'w' must have the type of 'x' (FLOAT), got HALF" in errors, errors


def test_a_plugin_with_a_weight_field_takes_one_network_input_fewer(library):
    result = weight_run(library, [("w", "FLOAT32", W)], inputs=INPUTS)
    errors = "\n".join(line.message for line in result.log if line.severity == "ERROR")
    assert "expected 1 inputs (1 more given as weight fields)" in errors, errors
