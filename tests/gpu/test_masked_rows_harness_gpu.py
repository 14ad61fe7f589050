"""The MaskedRows plugin's full lifecycle in the conformance harness on a GPU, against eager
torch.ops.torchtrt.masked_rows: the size tensor's value is K, y trimmed to it equals eager, for every dtype and for
empty, full and random masks; build and runtime plugins agree; zero violations."""

import pytest
import torch
from fixtures import cuda_generator

from torchtrt_plugins import converters
from torchtrt_plugins.ops import masked_rows
from torchtrt_plugins.testing import harness as H

SPEC = masked_rows.SPEC
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64]


def _case(rows, row_shape, dtype, kind, seed=0):
    g = cuda_generator(seed)
    x = (torch.randn((rows, *row_shape), device="cuda", generator=g) * 100).to(dtype)
    if kind == "random":
        mask = torch.rand(rows, device="cuda", generator=g) < 0.5
    else:
        mask = torch.full((rows,), kind == "all", dtype=torch.bool, device="cuda")
    return x, mask


def _run(build, x, mask, max_rows=None):
    rows, row_shape = x.shape[0], tuple(x.shape[1:])
    max_rows = max_rows or 2 * rows
    profile = [((1, *row_shape), tuple(x.shape), (max_rows, *row_shape)), ((1,), (rows,), (max_rows,))]
    # The converter casts the bool mask to INT32 in front of the plugin (SPEC's plugin_dtype): do the same.
    call = converters.plan(SPEC, (x, mask), {})
    assert call.input_casts == [None, torch.int32]
    return H.run_call(call, x, mask.to(torch.int32), library=build.library, profile=profile)


@pytest.mark.parametrize("kind", ["random", "all", "none"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, row_shape", [(1, (4,)), (1000, (3, 5)), (4097, (7,)), (70000, ())], ids=str)
def test_matches_eager(build, rows, row_shape, dtype, kind):
    x, mask = _case(rows, row_shape, dtype, kind)
    result = _run(build, x, mask)
    result.assert_conformant()
    assert result.enqueue_skipped is None
    eager = torch.ops.torchtrt.masked_rows(x, mask)
    for phase in ("build", "runtime"):
        record = result.run(0, phase)
        assert record.size_tensor_values == {1: eager.shape[0]}
        y = record.outputs[0]
        assert y.shape == eager.shape and torch.equal(y, eager)


def test_inputs_are_not_touched(build):
    x, mask = _case(3000, (16,), torch.bfloat16, "random", seed=1)
    x0, m0 = x.clone(), mask.clone()
    _run(build, x, mask).assert_conformant()
    assert torch.equal(x, x0) and torch.equal(mask, m0)
