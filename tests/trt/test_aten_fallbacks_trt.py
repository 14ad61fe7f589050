"""Our converters of ATen nodes Torch-TensorRT rejects (``converters.aten_fallbacks``) inside TensorRT engines built by
Torch-TensorRT (needs a GPU with TensorRT): each model is one engine, and its outputs are eager's."""

import pytest
import torch
from aten_fallback_cases import (
    ATTENTION_MASKS,
    BADDBMM_SCALES,
    CUMULATIVE_DTYPES,
    Attention,
    Baddbmm,
    Cumulative,
    IsIn,
    Pool,
    TopHalf,
    attention_inputs,
    baddbmm_inputs,
    cumulative_inputs,
    isin_inputs,
    top_half_dynamic_shapes,
)
from fixtures import assert_no_fallback, compile_trt

TOL = {"atol": 1e-4, "rtol": 1e-4}


def _one_engine(model: torch.nn.Module, inputs: list, op: str) -> torch.nn.Module:
    import torch_tensorrt

    program = torch.export.export(model, tuple(inputs))
    trt_module = torch_tensorrt.dynamo.compile(program, arg_inputs=inputs, min_block_size=1, use_explicit_typing=True)
    assert_no_fallback(trt_module, op)
    return trt_module


def test_ceil_mode_avg_pool():
    model, x = Pool(True).cuda().eval(), torch.randn(2, 4, 16, 16, device="cuda")
    trt_module = compile_trt(model, [x])
    assert_no_fallback(trt_module, "avg_pool2d")
    torch.testing.assert_close(trt_module(x), model(x), **TOL)


@pytest.mark.parametrize("beta, alpha", list(BADDBMM_SCALES.values()), ids=list(BADDBMM_SCALES))
def test_baddbmm(beta, alpha):
    model, inputs = Baddbmm(beta, alpha).eval(), baddbmm_inputs("cuda")
    torch.testing.assert_close(_one_engine(model, inputs, "baddbmm")(*inputs), model(*inputs), **TOL)


@pytest.mark.parametrize("mask", ATTENTION_MASKS)
def test_attention_whose_value_head_dim_differs(mask):
    model, inputs = Attention(mask).eval(), attention_inputs(value_dim=16, device="cuda")
    trt_module = _one_engine(model, inputs, "scaled_dot_product_attention")
    torch.testing.assert_close(trt_module(*inputs), model(*inputs), **TOL)


def test_attention_with_a_fully_masked_row_gives_zeros_there():
    model, inputs = Attention("bool").eval(), attention_inputs(value_dim=16, device="cuda")
    trt_module = _one_engine(model, inputs, "scaled_dot_product_attention")
    inputs[3][..., 2, :] = -1.0  # mask row 2 is all False
    got = trt_module(*inputs)
    torch.testing.assert_close(got, model(*inputs), **TOL)
    assert torch.equal(got[..., 2, :], torch.zeros_like(got[..., 2, :]))


@pytest.mark.parametrize("largest", [True, False], ids=["largest", "smallest"])
def test_topk_of_a_symbolic_k(largest):
    import torch_tensorrt

    model = TopHalf(largest).eval()
    program = torch.export.export(
        model, (torch.randn(30, device="cuda"),), dynamic_shapes=top_half_dynamic_shapes(max_k=500)
    )
    spec = torch_tensorrt.Input(min_shape=(2,), opt_shape=(30,), max_shape=(1000,))
    trt_module = torch_tensorrt.dynamo.compile(program, arg_inputs=[spec], min_block_size=1, use_explicit_typing=True)
    assert_no_fallback(trt_module, "topk")
    for n in (2, 8, 30, 1000):
        scores = torch.randn(n, device="cuda")
        values, indices = trt_module(scores)
        expected_values, _ = model(scores)
        assert values.shape == (n // 2,)
        torch.testing.assert_close(values, expected_values, **TOL)
        torch.testing.assert_close(scores.sigmoid()[indices.long()] * 2, values, **TOL)


@pytest.mark.parametrize(
    "invert, scalar", [(False, False), (True, False), (False, True)], ids=["tensor", "invert", "scalar"]
)
def test_isin(invert, scalar):
    model, inputs = IsIn(invert, scalar).cuda().eval(), isin_inputs("cuda")
    assert torch.equal(_one_engine(model, inputs, "isin")(*inputs), model(*inputs))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", CUMULATIVE_DTYPES)
@pytest.mark.parametrize("dim, shape", [(0, (3, 7, 5)), (1, (3, 7, 5)), (-1, (3, 7, 5)), (1, (2, 900))])
def test_cumulative_extremum_values_and_indices(op, dtype, dim, shape):
    """Values and PyTorch's indices exactly (ties take the later index; NaN from its first on, the last NaN's index),
    on a short dim and on one near the length limit."""
    model, inputs = Cumulative(op, dim).eval(), cumulative_inputs(dtype, shape, "cuda")
    got = _one_engine(model, inputs, op)(*inputs)
    for g, e in zip(got, model(*inputs)):
        torch.testing.assert_close(g, e, rtol=0, atol=0, equal_nan=True)
