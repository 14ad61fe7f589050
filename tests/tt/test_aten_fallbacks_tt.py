"""Our converters of ATen nodes Torch-TensorRT 2.13 rejects (``torchtrt_plugins.converters.aten_fallbacks``), inside
Torch-TensorRT's pipeline: each node joins the engine where Torch-TensorRT's own validator rejects it and ours accepts
it, stays in PyTorch where neither does (and without us), and the plan builds (RTX's builder); where Torch-TensorRT's
own converter takes a node, ours does not. The partitioned graph gives eager's outputs; the engines' outputs are
checked on a GPU with TensorRT (``tests/trt/test_aten_fallbacks_trt.py``)."""

from __future__ import annotations

import pytest
import torch
import tt_helpers as tt
from aten_fallback_cases import (
    ATTENTION_MASKS,
    BADDBMM_SCALES,
    CUMULATIVE_DTYPES,
    Attention,
    Baddbmm,
    Cumulative,
    IsIn,
    Keep,
    Pool,
    TopHalf,
    attention_inputs,
    baddbmm_inputs,
    cumulative_inputs,
    isin_inputs,
    keep_inputs,
    top_half_dynamic_shapes,
)

AVG_POOL = "aten.avg_pool2d.default"
BADDBMM = "aten.baddbmm.default"
ATTENTION = "aten.scaled_dot_product_attention.default"
TOPK = "aten.topk.default"
INDEX = "aten.index.Tensor"
ISIN = {False: "aten.isin.Tensor_Tensor", True: "aten.isin.Tensor_Scalar"}


def _by_place(partitioned: torch.fx.GraphModule, target: str) -> dict[str, int]:
    where = {"trt": 0, "torch": 0}
    for name, targets in tt.targets_by_submodule(partitioned).items():
        where["trt" if "_run_on_acc" in name else "torch"] += targets.count(target)
    where["torch"] += sum(str(n.target) == target for n in partitioned.graph.nodes if n.op == "call_function")
    return where


def _nodes(program: torch.export.ExportedProgram, target: str) -> list[torch.fx.Node]:
    return [n for n in program.graph.nodes if str(n.target) == target]


def _as_full_tensorrt(program, inputs) -> torch.fx.GraphModule:
    from torchtrt_plugins import zoo

    return zoo.partition(program, tuple(inputs), full_tensorrt=True).module


def _without_us(program, inputs) -> torch.fx.GraphModule:
    from torchtrt_plugins.converters import aten_fallbacks

    with aten_fallbacks.disabled():
        return tt.dryrun(program, inputs)


@pytest.mark.parametrize(
    "ceil_mode, size, where",
    [(True, 16, {"trt": 1, "torch": 0}), (True, 15, {"trt": 0, "torch": 1}), (False, 15, {"trt": 1, "torch": 0})],
    ids=["ceil_is_floor", "ceil_adds_a_window", "floor_mode"],
)
def test_ceil_mode_avg_pool_joins_the_engine_where_it_is_the_floor_mode(ceil_mode, size, where):
    model, x = Pool(ceil_mode).eval(), torch.randn(1, 4, size, size)
    partitioned = tt.dryrun(torch.export.export(model, (x,)), [x])
    assert _by_place(partitioned, AVG_POOL) == where
    torch.testing.assert_close(partitioned(x), model(x))


def test_without_us_ceil_mode_stays_in_pytorch():
    model, x = Pool(True).eval(), torch.randn(1, 4, 16, 16)
    assert _by_place(_without_us(torch.export.export(model, (x,)), [x]), AVG_POOL) == {"trt": 0, "torch": 1}


def test_ceil_mode_avg_pool_plan_builds():
    model, x = Pool(True).eval(), torch.randn(1, 4, 16, 16)
    plan = tt.serialized_engine(torch.export.export(model, (x,)), [x])
    assert len(plan) > 0


def _baddbmm_case(beta: float, alpha: float):
    inputs, model = baddbmm_inputs(), Baddbmm(beta, alpha).eval()
    return model, torch.export.export(model, tuple(inputs)), inputs


SCALES = pytest.mark.parametrize("beta, alpha", list(BADDBMM_SCALES.values()), ids=list(BADDBMM_SCALES))


@SCALES
def test_baddbmm_joins_the_engine(beta, alpha):
    model, program, inputs = _baddbmm_case(beta, alpha)
    partitioned = tt.dryrun(program, inputs)
    assert _by_place(partitioned, BADDBMM) == {"trt": 1, "torch": 0}
    torch.testing.assert_close(partitioned(*inputs), model(*inputs))
    assert _by_place(_without_us(program, inputs), BADDBMM) == {"trt": 0, "torch": 1}


@SCALES
def test_baddbmm_plan_builds(beta, alpha):
    _, program, inputs = _baddbmm_case(beta, alpha)
    assert len(tt.serialized_engine(program, inputs)) > 0


def _attention_case(mask: str, value_dim: int, is_causal: bool = False):
    inputs, model = attention_inputs(value_dim), Attention(mask, is_causal).eval()
    return model, torch.export.export(model, tuple(inputs)), inputs


@pytest.mark.parametrize("mask", ATTENTION_MASKS)
def test_attention_whose_value_head_dim_differs_joins_the_engine(mask):
    from torchtrt_plugins.converters import aten_fallbacks

    model, program, inputs = _attention_case(mask, value_dim=16)
    (node,) = _nodes(program, ATTENTION)
    assert aten_fallbacks.attention_value_dim_differs(node)
    partitioned = tt.dryrun(program, inputs)
    assert _by_place(partitioned, ATTENTION) == {"trt": 1, "torch": 0}
    torch.testing.assert_close(partitioned(*inputs), model(*inputs))
    assert _by_place(_without_us(program, inputs), ATTENTION) == {"trt": 0, "torch": 1}


def test_attention_with_equal_head_dims_is_torch_tensorrts():
    from torchtrt_plugins.converters import aten_fallbacks

    _, program, inputs = _attention_case("bool", value_dim=32)
    (node,) = _nodes(program, ATTENTION)
    assert not aten_fallbacks.attention_value_dim_differs(node)
    assert _by_place(tt.dryrun(program, inputs), ATTENTION) == {"trt": 1, "torch": 0}


def test_causal_attention_whose_value_head_dim_differs_stays_in_pytorch():
    _, program, inputs = _attention_case("none", value_dim=16, is_causal=True)
    assert _by_place(tt.dryrun(program, inputs), ATTENTION) == {"trt": 0, "torch": 1}


@pytest.mark.parametrize("mask", ATTENTION_MASKS)
def test_attention_whose_value_head_dim_differs_plan_builds(mask):
    _, program, inputs = _attention_case(mask, value_dim=16)
    assert len(tt.serialized_engine(program, inputs)) > 0


def _topk_case(largest: bool = True, max_k: int = 500):
    model, scores = TopHalf(largest).eval(), torch.randn(30, generator=torch.Generator().manual_seed(0))
    program = torch.export.export(model, (scores,), dynamic_shapes=top_half_dynamic_shapes(max_k))
    return model, program, [tt.torch_tensorrt().Input(min_shape=(2,), opt_shape=(30,), max_shape=(2 * max_k,))]


@pytest.mark.parametrize("largest", [True, False], ids=["largest", "smallest"])
def test_topk_of_a_symbolic_k_joins_the_engine(largest):
    from torchtrt_plugins.converters import aten_fallbacks

    model, program, inputs = _topk_case(largest)
    (node,) = _nodes(program, TOPK)
    assert aten_fallbacks.topk_k_is_bounded_symint(node)
    partitioned = tt.dryrun(program, inputs)
    assert _by_place(partitioned, TOPK) == {"trt": 1, "torch": 0}
    for n in (2, 8, 30, 1000):
        scores = torch.randn(n)
        for got, expected in zip(partitioned(scores), model(scores)):
            torch.testing.assert_close(got, expected)
    assert _by_place(_without_us(program, inputs), TOPK) == {"trt": 0, "torch": 1}


def test_topk_of_a_constant_k_is_torch_tensorrts():
    from torchtrt_plugins.converters import aten_fallbacks

    scores = torch.randn(30)
    program, inputs = torch.export.export(TopHalf().eval(), (scores,)), [scores]
    (node,) = _nodes(program, TOPK)
    assert not aten_fallbacks.topk_k_is_bounded_symint(node)
    assert _by_place(tt.dryrun(program, inputs), TOPK) == {"trt": 1, "torch": 0}


def test_topk_of_a_k_past_tensorrts_limit_stays_in_pytorch():
    _, program, inputs = _topk_case(max_k=3840 + 1)
    assert _by_place(tt.dryrun(program, inputs), TOPK) == {"trt": 0, "torch": 1}


def test_topk_of_a_symbolic_k_plan_builds():
    _, program, inputs = _topk_case()
    assert len(tt.serialized_engine(program, inputs)) > 0


#: Shapes (scores, boxes) of the Keep cases by mask rank: the mask is ``scores > 0.5``, over all of the scores
#: (their output is 1-D) and over the boxes' leading dims.
KEEP_SHAPES = {1: ((40,), (40, 4)), 2: ((8, 5), (8, 5, 4)), 3: ((2, 4, 5), (2, 4, 5, 4))}


def _keep_case(mask_dims: int = 1, dynamic: bool = False):
    model, (scores, boxes) = Keep().eval(), keep_inputs()
    scores_shape, boxes_shape = KEEP_SHAPES[mask_dims]
    inputs = [scores.reshape(scores_shape), boxes.reshape(boxes_shape)]
    shapes = ({0: torch.export.Dim("batch", min=1, max=16)},) * 2 if dynamic else None
    return model, torch.export.export(model, tuple(inputs), dynamic_shapes=shapes), inputs


def test_index_by_a_boolean_mask_is_masked_rows_on_tensorrt_rtx():
    from torchtrt_plugins.converters import aten_fallbacks

    model, program, inputs = _keep_case()
    assert all(aten_fallbacks.index_by_mask_is_masked_rows(node) for node in _nodes(program, INDEX))
    partitioned = tt.dryrun(program, inputs)
    assert _by_place(partitioned, INDEX) == {"trt": 2, "torch": 0}
    for got, expected in zip(partitioned(*inputs), model(*inputs)):
        torch.testing.assert_close(got, expected)
    assert _by_place(_without_us(program, inputs), INDEX) == {"trt": 0, "torch": 2}


def test_index_by_a_boolean_mask_is_torch_tensorrts_on_full_tensorrt():
    _, program, inputs = _keep_case()
    partitioned = _as_full_tensorrt(program, inputs)
    assert _by_place(partitioned, INDEX) == {"trt": 2, "torch": 0}
    assert not any(
        tt.targets_by_submodule(partitioned)[name].count("torchtrt.masked_rows.default")
        for name in tt.targets_by_submodule(partitioned)
    )


@pytest.mark.parametrize("mask_dims, dynamic", [(2, False), (3, False), (2, True)], ids=["2d", "3d", "2d-dynamic"])
def test_index_by_an_nd_boolean_mask_is_masked_rows_on_tensorrt_rtx(mask_dims, dynamic):
    from torchtrt_plugins.converters import aten_fallbacks

    model, program, inputs = _keep_case(mask_dims, dynamic)
    nodes = _nodes(program, INDEX)
    assert [n.args[1][0].meta["val"].dim() for n in nodes] == [mask_dims] * 2
    assert all(aten_fallbacks.index_by_mask_is_masked_rows(node) for node in nodes)
    partitioned = tt.dryrun(program, inputs)
    assert _by_place(partitioned, INDEX) == {"trt": 2, "torch": 0}
    for got, expected in zip(partitioned(*inputs), model(*inputs)):
        torch.testing.assert_close(got, expected)
    assert _by_place(_without_us(program, inputs), INDEX) == {"trt": 0, "torch": 2}


class _TrailingDynamic(torch.nn.Module):
    def forward(self, x, mask):
        return x[mask] + 1


def test_index_by_an_nd_boolean_mask_with_dynamic_dims_past_it_stays_in_pytorch():
    """The reshape into rows infers one dim: the dims past the mask's must be static."""
    from torchtrt_plugins.converters import aten_fallbacks

    inputs = [torch.randn(3, 4, 6), torch.rand(3, 4) > 0.5]
    program = torch.export.export(
        _TrailingDynamic(), tuple(inputs), dynamic_shapes=({2: torch.export.Dim("width", min=2, max=16)}, None)
    )
    assert not any(aten_fallbacks.index_by_mask_is_masked_rows(node) for node in _nodes(program, INDEX))
    assert _by_place(tt.dryrun(program, inputs), INDEX) == {"trt": 0, "torch": 1}


@pytest.mark.parametrize("mask_dims", [1, 2])
def test_index_by_a_boolean_mask_plan_builds(mask_dims):
    tt.require_plugin_library()
    _, program, inputs = _keep_case(mask_dims)
    with tt.converter_calls() as calls:
        plan = tt.serialized_engine(program, inputs)
    assert len(plan) > 0
    assert [call.creator_key[0] for call in calls] == ["MaskedRows", "MaskedRows"]


def _isin_case(invert: bool = False, scalar: bool = False):
    model, inputs = IsIn(invert, scalar).eval(), isin_inputs()
    return model, torch.export.export(model, tuple(inputs)), inputs


ISIN_CASES = pytest.mark.parametrize(
    "invert, scalar", [(False, False), (True, False), (False, True)], ids=["tensor", "invert", "scalar"]
)


@ISIN_CASES
def test_isin_joins_the_engine(invert, scalar):
    model, program, inputs = _isin_case(invert, scalar)
    partitioned = tt.dryrun(program, inputs)
    assert _by_place(partitioned, ISIN[scalar]) == {"trt": 1, "torch": 0}
    torch.testing.assert_close(partitioned(*inputs), model(*inputs))
    assert _by_place(_without_us(program, inputs), ISIN[scalar]) == {"trt": 0, "torch": 1}


@ISIN_CASES
def test_isin_plan_builds(invert, scalar):
    _, program, inputs = _isin_case(invert, scalar)
    assert len(tt.serialized_engine(program, inputs)) > 0


def _cumulative_case(op: str, dim: int, dtype: str = "float32", shape: tuple[int, ...] = (3, 7, 5)):
    model, inputs = Cumulative(op, dim).eval(), cumulative_inputs(dtype, shape)
    return model, torch.export.export(model, tuple(inputs)), inputs


CUMULATIVE = pytest.mark.parametrize("op", ["cummax", "cummin"])


@CUMULATIVE
@pytest.mark.parametrize("dtype", CUMULATIVE_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumulative_extremum_joins_the_engine(op, dtype, dim):
    model, program, inputs = _cumulative_case(op, dim, dtype)
    target = f"aten.{op}.default"
    partitioned = tt.dryrun(program, inputs)
    assert _by_place(partitioned, target) == {"trt": 1, "torch": 0}
    for got, expected in zip(partitioned(*inputs), model(*inputs)):
        torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
    assert _by_place(_without_us(program, inputs), target) == {"trt": 0, "torch": 1}


@CUMULATIVE
def test_cumulative_extremum_past_the_length_limit_stays_in_pytorch(op):
    from torchtrt_plugins.converters import aten_fallbacks

    _, program, inputs = _cumulative_case(op, 1, shape=(2, aten_fallbacks.CUMULATIVE_MAX_LENGTH + 1))
    assert _by_place(tt.dryrun(program, inputs), f"aten.{op}.default") == {"trt": 0, "torch": 1}


@CUMULATIVE
def test_cumulative_extremum_along_a_symbolic_dim_stays_in_pytorch(op):
    model, inputs = Cumulative(op, 1).eval(), cumulative_inputs("float32", (2, 9))
    program = torch.export.export(model, tuple(inputs), dynamic_shapes=({1: torch.export.Dim("n", min=2, max=64)},))
    assert _by_place(tt.dryrun(program, inputs), f"aten.{op}.default") == {"trt": 0, "torch": 1}


@CUMULATIVE
@pytest.mark.parametrize("dtype", CUMULATIVE_DTYPES)
def test_cumulative_extremum_plan_builds(op, dtype):
    _, program, inputs = _cumulative_case(op, 1, dtype)
    assert len(tt.serialized_engine(program, inputs)) > 0
