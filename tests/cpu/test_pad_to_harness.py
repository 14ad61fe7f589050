"""The PadTo plugin (the generic declared-op plugin) in the conformance harness without a GPU: creator vs spec,
output shapes from fields and from shape inputs (min/opt/max/concrete), format table, serialization (the shape-input
marker included), invalid fields."""

import dataclasses
import math

import pytest
import torch

from torchtrt_plugins import SpecError, converters
from torchtrt_plugins.declare import SHAPE_INPUT_SENTINEL
from torchtrt_plugins.ops import pad_to
from torchtrt_plugins.plan import FieldValue
from torchtrt_plugins.testing import harness as H

SPEC = pad_to.SPEC
PROFILE = [((1, 3, 1, 1), (2, 3, 13, 21), (4, 3, 64, 64))]
NAMES = {torch.float32: "FLOAT", torch.float16: "HALF", torch.bfloat16: "BF16", torch.int8: "INT8"}


def _symbolic(value):
    return isinstance(value, H.ShapeArg)


def plan(height=16, width=17, value=2.5, shape=(2, 3, 13, 21), dtype=torch.float16):
    x = H.TensorArg(shape, dtype)
    return converters.plan(SPEC, (x, height, width, value), {}, is_symbolic=_symbolic), x


def run(build, height=16, width=17, value=2.5, shape=(2, 3, 13, 21), dtype=torch.float16, **kwargs):
    call, x = plan(height, width, value, shape, dtype)
    return H.run_call(call, x, library=build.library, enqueue=False, **kwargs)


def _scalar_fields(fields):
    """The op's own fields (height, width, value), in schema order."""
    return fields[: len(SPEC.fields)]


def test_creator_matches_the_op_spec(build):
    result = run(build)
    result.assert_conformant()
    creator = result.creator(*SPEC.creator_key)
    assert [(f["name"], f["type"], f["length"]) for f in _scalar_fields(creator["fields"])] == [
        ("height", "INT64", 1),
        ("width", "INT64", 1),
        ("value", "FLOAT64", 1),
    ]
    assert result.tactics == [] and result.workspace_size == 0
    assert result.timing_cache_id == "torchtrt::pad_to_v2_16_17_2.5"


def test_only_the_v2_creator_is_registered(build):
    creators = {(c["name"], c["version"], c["namespace"]) for c in run(build).creators}
    assert ("PadTo", "2", "torchtrt") in creators and ("PadTo", "1", "torchtrt") not in creators


def test_constant_sizes_give_constant_output_dims(build):
    result = run(build, profile=PROFILE)
    result.assert_conformant()
    assert result.output_shapes["symbolic"] == [["in0.d0", "3", "16", "17"]]
    assert result.output_shapes["min"] == [[1, 3, 16, 17]]
    assert result.output_shapes["max"] == [[4, 3, 16, 17]]
    assert result.output_shapes["concrete"] == [[2, 3, 16, 17]]


def test_shape_inputs_give_the_output_dims(build):
    height = H.ShapeArg((9,), min=(1,), opt=(9,), max=(64,))
    width = H.ShapeArg((40,), min=(2,), opt=(30,), max=(48,))
    result = run(build, height, width, profile=PROFILE)
    result.assert_conformant()
    assert result.output_shapes["symbolic"] == [["in0.d0", "3", "shape0[0]", "shape1[0]"]]
    assert result.output_shapes["min"] == [[1, 3, 1, 2]]
    assert result.output_shapes["opt"] == [[2, 3, 9, 30]]
    assert result.output_shapes["max"] == [[4, 3, 64, 48]]
    assert result.output_shapes["concrete"] == [[2, 3, 9, 40]]
    assert [f["data"][0] for f in result.serialized_fields[:2]] == [SHAPE_INPUT_SENTINEL] * 2
    assert result.runtime_fields == result.serialized_fields


def test_one_constant_one_shape_input(build):
    result = run(build, 12, H.ShapeArg((5,), min=(1,), opt=(5,), max=(7,)), profile=PROFILE)
    result.assert_conformant()
    assert result.output_shapes["symbolic"] == [["in0.d0", "3", "12", "shape0[0]"]]
    assert result.output_shapes["concrete"] == [[2, 3, 12, 5]]


def test_the_marker_as_the_onnx_parser_delivers_it(build):
    """The shape-input marker (INT32_MIN) arrives as a kINT32 from the ONNX parser (which makes no kINT64 field): the
    plugin reads it as the marker, and serializes it as its INT64 field."""
    call, x = plan(H.ShapeArg((9,), min=(1,), opt=(9,), max=(64,)), 17)
    fields = [FieldValue("height", "INT32", -(2**31)) if f.name == "height" else f for f in call.fields]
    result = H.run_call(
        dataclasses.replace(call, fields=fields), x, library=build.library, enqueue=False, profile=PROFILE
    )
    result.assert_conformant()
    assert result.output_shapes["symbolic"] == [["in0.d0", "3", "shape0[0]", "17"]]
    assert (result.serialized_fields[0]["type"], result.serialized_fields[0]["data"]) == (
        "INT64",
        [SHAPE_INPUT_SENTINEL],
    )


def test_shape_input_count_must_match_the_plan(build):
    result = run(build, 12, H.ShapeArg((5,)), shape_inputs=[])
    assert result.stopped and "getOutputShapes" in result.stopped
    assert "expected 1 shape inputs (one per field holding the shape-input marker: 'width'), got 0" in result.log_text()


def test_format_table_is_exactly_the_declared_types_in_linear(build):
    result = run(build)
    assert sorted(result.formats) == sorted(((NAMES[d], "LINEAR"),) * 2 for d in SPEC.inputs[0].dtypes)
    assert result.configured == (("HALF", "LINEAR"),) * 2 and result.output_types == ["HALF"]


@pytest.mark.parametrize("dtype", list(NAMES))
def test_every_declared_type_is_conformant(build, dtype):
    result = run(build, dtype=dtype, value=-7.0)
    result.assert_conformant()
    assert result.output_types == [NAMES[dtype]]


def test_wrong_rank_is_an_error_of_the_plan_and_of_the_plugin(build):
    with pytest.raises(SpecError, match=r"pad_to: argument 'x' must have shape \(B, C, H, W\), got \(3, 13, 21\)"):
        plan(shape=(3, 13, 21))
    call, _ = plan()
    result = H.run_call(call, H.TensorArg((3, 13, 21), torch.float16), library=build.library, enqueue=False)
    assert result.stopped
    assert "inputs (x) have ranks (3); the op's fake kernel accepts (4)" in result.log_text()


def test_wrong_type_stops_the_run_with_the_reason(build):
    result = run(build, dtype=torch.int32)
    assert result.stopped and "getOutputDataTypes" in result.stopped
    assert "input 'x' must have a type in {FLOAT, HALF, INT8, BF16}, got INT32" in result.log_text()


def test_serialization_round_trip(build):
    result = run(build, 7, 0, -3.5)
    assert [(f["name"], f["type"], f["data"]) for f in _scalar_fields(result.serialized_fields)] == [
        ("height", "INT64", [7]),
        ("width", "INT64", [0]),
        ("value", "FLOAT64", [-3.5]),
    ]
    assert result.runtime_fields == result.serialized_fields and "serialization" not in result.rules


INVALID = [
    pytest.param([("height", "INT64", -5), ("width", "INT64", 3)], "height", "must be an integer >= 0", id="negative"),
    # v1's shape-input marker is no v2 field value.
    pytest.param([("height", "INT64", -1), ("width", "INT64", 3)], "height", "got -1", id="v1-sentinel"),
    # One below the marker is no size.
    pytest.param([("height", "INT64", -(2**31) - 1), ("width", "INT64", 3)], "height", ">= 0", id="below-marker"),
    pytest.param([("height", "INT64", 3)], "width", "missing field 'width'", id="missing"),
    pytest.param(
        [("height", "FLOAT32", 3.0), ("width", "INT64", 3)], "height", "unsupported PluginFieldType FLOAT32", id="float"
    ),
    pytest.param(
        [("height", "INT64", 3), ("width", "INT64", 3), ("value", "FLOAT64", math.nan)],
        "value",
        "must be a float, got nan",
        id="nan-value",
    ),
]


@pytest.mark.parametrize("fields, field, expected", INVALID)
def test_invalid_fields_are_rejected_and_logged(build, fields, field, expected):
    result = run(build, invalid_fields=[fields])
    (invalid,) = result.invalid_fields
    assert invalid.rejected
    (line,) = [line for line in invalid.log if line.severity == "ERROR"]
    assert line.message.startswith("torchtrt::pad_to (plugin torchtrt::PadTo) createPlugin:")
    assert f"'{field}'" in line.message and expected in line.message
