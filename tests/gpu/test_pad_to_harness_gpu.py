"""The PadTo plugin's full lifecycle in the conformance harness on a GPU, against eager torch.ops.torchtrt.pad_to:
every dtype, pad and crop, sizes from fields and from shape inputs, serialization round trip, zero violations; the
launcher's own refusal of an int8 fill the tensor cannot hold."""

import dataclasses

import pytest
import torch
from fixtures import cuda_randn

from torchtrt_plugins import converters
from torchtrt_plugins.declare import SHAPE_INPUT_SENTINEL
from torchtrt_plugins.ops import pad_to
from torchtrt_plugins.testing import harness as H

SPEC = pad_to.SPEC
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8]
CASES = [((2, 3, 13, 21), (16, 17)), ((1, 2, 16, 16), (9, 40)), ((3, 1, 5, 64), (5, 64)), ((1, 1, 7, 9), (0, 3))]


def _check(result, x, size, value):
    result.assert_conformant()
    assert result.enqueue_skipped is None
    eager = torch.ops.torchtrt.pad_to(x, *size, value)
    for phase in ("build", "runtime"):
        (y,) = result.outputs(0, phase)
        assert y.shape == eager.shape and y.dtype == x.dtype
        assert torch.equal(y.to(eager.device), eager)  # an empty output comes back without a device buffer


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, size", CASES, ids=str)
def test_constant_sizes_match_eager(build, shape, size, dtype):
    x = cuda_randn(shape, dtype, scale=50)
    result = H.run_call(converters.plan(SPEC, (x, *size, -3.0), {}), x, library=build.library)
    _check(result, x, size, -3.0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.int8])
def test_shape_inputs_match_eager(build, dtype):
    x = cuda_randn((2, 3, 13, 21), dtype, seed=1, scale=50)
    height = H.ShapeArg((9,), min=(1,), opt=(9,), max=(64,))
    width = H.ShapeArg((40,), min=(1,), opt=(24,), max=(64,))
    call = converters.plan(SPEC, (x, height, width, 5.0), {}, is_symbolic=lambda v: isinstance(v, H.ShapeArg))
    assert [f.value for f in call.fields[:3]] == [SHAPE_INPUT_SENTINEL, SHAPE_INPUT_SENTINEL, 5.0]
    profile = [((1, 3, 1, 1), (2, 3, 13, 21), (4, 3, 64, 64))]
    result = H.run_call(call, x, library=build.library, profile=profile)
    assert result.output_shapes["concrete"] == [[2, 3, 9, 40]]
    _check(result, x, (9, 40), 5.0)


def test_inputs_are_not_touched(build):
    x = cuda_randn((2, 4, 31, 33), torch.bfloat16, seed=2, scale=50)
    x0 = x.clone()
    H.run_call(converters.plan(SPEC, (x, 40, 20), {}), x, library=build.library).assert_conformant()
    assert torch.equal(x, x0)


@pytest.mark.parametrize("value", [0.5, 128.0, -129.0])
def test_launcher_refuses_an_int8_fill_the_tensor_cannot_hold(build, value):
    """createPlugin cannot tell (the field is a float, the type comes later): the launcher refuses at enqueue."""
    x = cuda_randn((1, 2, 3, 4), torch.int8, scale=50)
    call = converters.plan(SPEC, (x, 5, 6, 0.0), {})
    fields = [dataclasses.replace(f, value=value) if f.name == "value" else f for f in call.fields]
    result = H.run_call(dataclasses.replace(call, fields=fields), x, library=build.library)
    assert result.enqueue_skipped is None
    message = "torchtrt::pad_to (plugin torchtrt::PadTo) enqueue: launcher 'ttp::launchers::padTo' returned "
    assert any(message + "cudaErrorInvalidValue" in line.message for line in result.log), result.log_text()
