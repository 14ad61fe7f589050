"""The PadTo plugin in the conformance harness without a GPU: creator vs spec, output shapes from fields and
from shape inputs (min/opt/max/concrete), format table, serialization (the -1 sentinel included), invalid fields."""

import math

import pytest
import torch

from torchtrt_plugins import converters
from torchtrt_plugins.ops import pad_to
from torchtrt_plugins.testing import harness as H

SPEC = pad_to.SPEC
PROFILE = [((1, 3, 1, 1), (2, 3, 13, 21), (4, 3, 64, 64))]


def _symbolic(value):
    return isinstance(value, H.ShapeArg)


def run(build, height=16, width=17, value=2.5, shape=(2, 3, 13, 21), dtype=torch.float16, **kwargs):
    x = H.TensorArg(shape, dtype)
    call = converters.plan(SPEC, (x, height, width, value), {}, is_symbolic=_symbolic)
    return H.run_call(call, x, library=build.library, enqueue=False, **kwargs)


def test_creator_matches_the_op_spec(build):
    result = run(build)
    result.assert_conformant()
    creator = result.creator(*SPEC.creator_key)
    assert [(f["name"], f["type"], f["length"]) for f in creator["fields"]] == [
        (f.name, f.type, 1) for f in SPEC.fields
    ]
    assert result.tactics == [] and result.workspace_size == 0
    assert result.timing_cache_id == "PadTo_v1_16_17_2.5"


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
    assert [f["data"][0] for f in result.serialized_fields[:2]] == [-1, -1]
    assert result.runtime_fields == result.serialized_fields


def test_one_constant_one_shape_input(build):
    result = run(build, 12, H.ShapeArg((5,), min=(1,), opt=(5,), max=(7,)), profile=PROFILE)
    result.assert_conformant()
    assert result.output_shapes["symbolic"] == [["in0.d0", "3", "12", "shape0[0]"]]
    assert result.output_shapes["concrete"] == [[2, 3, 12, 5]]


def test_shape_input_count_must_match_the_sentinel_fields(build):
    result = run(build, 12, H.ShapeArg((5,)), shape_inputs=[])
    assert result.stopped and "getOutputShapes" in result.stopped
    assert "expected 1 input, 1 shape inputs" in result.log_text()


def test_format_table_is_exactly_the_spec_types_in_linear(build):
    result = run(build)
    names = {torch.float32: "FLOAT", torch.float16: "HALF", torch.bfloat16: "BF16", torch.int8: "INT8"}
    assert result.formats == [((names[d], "LINEAR"),) * 2 for d in SPEC.inputs[0].dtypes]
    assert result.configured == (("HALF", "LINEAR"),) * 2 and result.output_types == ["HALF"]


def test_wrong_rank_and_type_stop_the_run_with_the_reason(build):
    result = run(build, shape=(3, 13, 21))
    assert result.stopped and "input 'x' must have rank 4 (B, C, H, W), got rank 3" in result.log_text()
    result = run(build, dtype=torch.int32)
    assert result.stopped and "getOutputDataTypes" in result.stopped


def test_serialization_round_trip(build):
    result = run(build, 7, 0, -3.5)
    assert [(f["name"], f["type"], f["data"]) for f in result.serialized_fields] == [
        ("height", "INT64", [7]),
        ("width", "INT64", [0]),
        ("value", "FLOAT32", [-3.5]),
    ]
    assert result.runtime_fields == result.serialized_fields and "serialization" not in result.rules


INVALID = [
    pytest.param([("height", "INT64", -5), ("width", "INT64", 3)], "height", "must be an integer >= 0", id="negative"),
    pytest.param([("height", "INT64", -2), ("width", "INT64", 3)], "height", "got -2", id="below-sentinel"),
    pytest.param([("height", "INT64", 3)], "width", "missing field 'width'", id="missing"),
    pytest.param(
        [("height", "FLOAT32", 3.0), ("width", "INT64", 3)], "height", "unsupported PluginFieldType FLOAT32", id="float"
    ),
    pytest.param(
        [("height", "INT64", 3), ("width", "INT64", 3), ("value", "FLOAT32", math.nan)],
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
    assert line.message.startswith("torchtrt::PadTo createPlugin:") and f"'{field}'" in line.message
    assert expected in line.message
