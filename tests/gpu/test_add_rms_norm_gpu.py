"""add_rms_norm's CUDA kernel vs the unfused ops: every dtype, odd shapes and every kernel configuration's width,
the residual updated in place (also when it is not contiguous); opcheck; torch.compile."""

import pytest
import torch
from norm_cases import COMMON_SHAPES, DTYPES, shape_id

from torchtrt_plugins.ops import add_rms_norm, rms_norm

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SPEC = add_rms_norm.SPEC
# Widths around each configuration's limit (4..4096 vectors and the two-pass kernel beyond), odd and unaligned ones.
SHAPES = [*COMMON_SHAPES, (3, 16384), (2, 32768), (2, 65536), (2, 70000), (513, 512), (4, 8, 130)]


def inputs(shape, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x, residual = (torch.randn(shape, generator=g, device="cuda").to(dtype) for _ in range(2))
    weight = torch.rand(shape[-1], generator=g, device="cuda").to(dtype) + 0.5
    return x, residual, weight


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_matches_the_unfused_ops(shape, dtype):
    x, residual, weight = inputs(shape, dtype)
    h = residual + x
    expected = rms_norm.reference(h, weight, 1e-6)
    pointer = residual.data_ptr()
    y = torch.ops.torchtrt.add_rms_norm(x, residual, weight, 1e-6)
    assert residual.data_ptr() == pointer and torch.equal(residual, h)  # in place, and the sum rounded like h
    tol = SPEC.tolerance(dtype)
    torch.testing.assert_close(y, expected, atol=tol.atol, rtol=tol.rtol)


def test_a_residual_that_is_not_contiguous_is_updated():
    x, _, weight = inputs((6, 256), torch.bfloat16)
    base = torch.randn(256, 6, device="cuda", dtype=torch.bfloat16)
    residual = base.t()
    h = residual + x
    torch.ops.torchtrt.add_rms_norm(x, residual, weight, 1e-6)
    assert torch.equal(base.t(), h)


def test_opcheck():
    x, residual, weight = inputs((4, 512), torch.float16)
    torch.library.opcheck(torch.ops.torchtrt.add_rms_norm.default, (x, residual, weight, 1e-6))


def test_torch_compile_matches_eager():
    x, residual, weight = inputs((8, 4096), torch.bfloat16)
    r_eager, r_compiled = residual.clone(), residual.clone()
    fn = torch.compile(lambda x, r, w: torch.ops.torchtrt.add_rms_norm(x, r, w, 1e-6), fullgraph=True)
    torch.testing.assert_close(fn(x, r_compiled, weight), torch.ops.torchtrt.add_rms_norm(x, r_eager, weight, 1e-6))
    assert torch.equal(r_compiled, r_eager)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hidden", [4096, 3080, 8192, 12288, 16384])
@pytest.mark.parametrize("l2s", [1, 3], ids=["writes-2xL2", "writes-6xL2"])
def test_writes_larger_than_the_l2_match_too(dtype, hidden, l2s):
    # Past the L2 (the two outputs' bytes exceed it) rows of 4096, 8192, 12288 and 16384 elements take the two-pass
    # kernel (a configuration per row length and element size), and other rows the row kernel with other cache hints:
    # 3080 leaves threads of the last vector slot idle (385 vectors on 128 x 4 in 16-bit, 770 on 1024 x 1 in float32).
    l2 = torch.cuda.get_device_properties().L2_cache_size
    rows = l2s * l2 // (hidden * dtype.itemsize) + 7
    x, residual, weight = inputs((rows, hidden), dtype)
    h = residual + x
    expected = rms_norm.reference(h, weight, 1e-6)
    y = torch.ops.torchtrt.add_rms_norm(x, residual, weight, 1e-6)
    assert torch.equal(residual, h)
    tol = SPEC.tolerance(dtype)
    torch.testing.assert_close(y, expected, atol=tol.atol, rtol=tol.rtol)
