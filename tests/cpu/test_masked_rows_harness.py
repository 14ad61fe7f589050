"""The MaskedRows plugin (the generic declared-op plugin) in the conformance harness without a GPU: the size tensor
(0-D INT64, opt N/2, upper N), output shapes for min/opt/max, the format table (INT32 mask, no BOOL), workspace,
serialization (the shape program only: the op has no scalar arguments)."""

import dataclasses

import pytest
import torch

from torchtrt_plugins import SpecError, converters
from torchtrt_plugins.ops import masked_rows
from torchtrt_plugins.testing import harness as H

SPEC = masked_rows.SPEC


def run(
    build, rows=100, row_shape=(3, 5), dtype=torch.float32, mask_dtype=torch.int32, max_rows=1000, casts=True, **kwargs
):
    """``casts=False`` drops the converter's input casts: the plugin then sees the mask dtype as given."""
    x = H.TensorArg((rows, *row_shape), dtype)
    mask = H.TensorArg((rows,), mask_dtype)
    profile = [((1, *row_shape), (rows, *row_shape), (max_rows, *row_shape)), ((1,), (rows,), (max_rows,))]
    call = converters.plan(SPEC, (x, mask), {})
    if not casts:
        call = dataclasses.replace(call, input_casts=[None] * len(call.input_casts))
    return H.run_call(call, x, mask, library=build.library, enqueue=False, profile=profile, **kwargs)


def test_creator_matches_the_op_spec(build):
    result = run(build)
    result.assert_conformant()
    # No field: masked_rows has no scalar argument, and its shape rules are compiled into the library.
    assert result.creator(*SPEC.creator_key)["fields"] == []
    assert result.serialized_fields == [] and result.runtime_fields == []
    assert result.tactics == [] and result.timing_cache_id == "torchtrt::masked_rows_v3"


def test_size_tensor_declares_the_data_dependent_dim(build):
    result = run(build)
    assert result.output_types == ["FLOAT", "INT64"]
    # The fake kernel's bound (kept <= rows; x's rows and the mask's length are one size, checked equal).
    assert result.size_tensors == [{"output": 1, "opt": "floordiv((in0.d0 * 1), 2)", "upper": "in0.d0"}]
    (symbolic_y, symbolic_count) = result.output_shapes["symbolic"]
    assert symbolic_y[0].startswith("size(out1") and symbolic_y[1:] == ["3", "5"] and symbolic_count == []
    assert result.output_shapes["opt"] == [[50, 3, 5], []]
    assert result.output_shapes["max"] == [[1000, 3, 5], []]


def test_format_table_takes_an_int32_mask(build):
    result = run(build)
    names = {torch.float32: "FLOAT", torch.float16: "HALF", torch.bfloat16: "BF16", torch.int32: "INT32"}
    names[torch.int64] = "INT64"
    expected = [
        ((names[d], "LINEAR"), ("INT32", "LINEAR"), (names[d], "LINEAR"), ("INT64", "LINEAR"))
        for d in SPEC.inputs[0].dtypes
    ]
    assert result.formats == expected
    assert SPEC.input("mask").plugin_dtype is torch.int32


def test_a_bool_mask_is_refused_with_the_reason(build):
    result = run(build, mask_dtype=torch.bool, casts=False)
    assert result.stopped and "getOutputDataTypes" in result.stopped
    assert "input 'mask' must have a type in {INT32}, got BOOL" in result.log_text()


def test_workspace_covers_the_largest_profile(build):
    small = run(build, max_rows=1000).workspace_size
    large = run(build, max_rows=1_000_000).workspace_size
    assert 0 < small < large and large >= 1_000_000 // 8


def test_mismatched_mask_length_is_an_error_of_the_plan():
    """The fake kernel's check, run on the concrete shapes before anything reaches the plugin (the plugin's
    launcher checks again at enqueue: tests/gpu/test_masked_rows_harness_gpu.py)."""
    with pytest.raises(SpecError, match=r"argument 'mask' must have shape \(10,\) to match the first dimension"):
        converters.plan(SPEC, (H.TensorArg((10, 4)), H.TensorArg((9,), torch.int32)), {})


def test_mismatched_mask_length_is_an_error_of_the_plugin(build):
    x = H.TensorArg((10, 4))
    call = converters.plan(SPEC, (x, H.TensorArg((10,), torch.int32)), {})
    result = H.run_call(call, x, H.TensorArg((9,), torch.int32), library=build.library, enqueue=False)
    assert result.stopped and "configurePlugin" in result.stopped
    assert "input sizes break the op's fake kernel check 'mask'.shape[0] == 'x'.shape[0]" in result.log_text()


def test_run_call_casts_inputs_like_the_converter(build):
    """run_call applies the plan's input casts (the converter's cast layer): a torch bool mask reaches the plugin
    as INT32 (with casts=False the same call stops at getOutputDataTypes, test above)."""
    assert converters.plan(SPEC, (H.TensorArg((4, 2)), H.TensorArg((4,), torch.bool)), {}).input_casts == [
        None,
        torch.int32,
    ]
    run(build, mask_dtype=torch.bool).assert_conformant()
