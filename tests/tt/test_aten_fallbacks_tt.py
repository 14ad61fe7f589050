"""Our converters of ATen nodes Torch-TensorRT 2.13 rejects (``torchtrt_plugins.converters.aten_fallbacks``), inside
Torch-TensorRT's pipeline: each node joins the engine where Torch-TensorRT's own validator rejects it and ours accepts
it, stays in PyTorch where neither does (and without us), and the plan builds (RTX's builder); where Torch-TensorRT's
own converter takes a node, ours does not. The partitioned graph gives eager's outputs; the engines' outputs are
checked on a GPU with TensorRT (``tests/trt/test_aten_fallbacks_trt.py``)."""

from __future__ import annotations

import pytest
import torch
import tt_helpers as tt

AVG_POOL = "aten.avg_pool2d.default"
BADDBMM = "aten.baddbmm.default"
ATTENTION = "aten.scaled_dot_product_attention.default"
TOPK = "aten.topk.default"


def _by_place(partitioned: torch.fx.GraphModule, target: str) -> dict[str, int]:
    where = {"trt": 0, "torch": 0}
    for name, targets in tt.targets_by_submodule(partitioned).items():
        where["trt" if "_run_on_acc" in name else "torch"] += targets.count(target)
    where["torch"] += sum(str(n.target) == target for n in partitioned.graph.nodes if n.op == "call_function")
    return where


def _nodes(program: torch.export.ExportedProgram, target: str) -> list[torch.fx.Node]:
    return [n for n in program.graph.nodes if str(n.target) == target]


def _without_us(program, inputs) -> torch.fx.GraphModule:
    from torchtrt_plugins.converters import aten_fallbacks

    with aten_fallbacks.disabled():
        return tt.dryrun(program, inputs)


class Pool(torch.nn.Module):
    def __init__(self, ceil_mode: bool):
        super().__init__()
        self.pool = torch.nn.AvgPool2d(2, 2, 0, ceil_mode=ceil_mode)

    def forward(self, x):
        return self.pool(x.relu()) * 2


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


class Baddbmm(torch.nn.Module):
    """Mask2Former's form: ``baddbmm(mask, query, key)``, scaled as asked."""

    def __init__(self, beta: float, alpha: float):
        super().__init__()
        self.beta, self.alpha = beta, alpha

    def forward(self, base, batch1, batch2):
        return torch.baddbmm(base.relu(), batch1, batch2, beta=self.beta, alpha=self.alpha).sigmoid()


def _baddbmm_case(beta: float, alpha: float):
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(shape, generator=generator) for shape in ((2, 5, 4), (2, 5, 16), (2, 16, 4))]
    model = Baddbmm(beta, alpha).eval()
    return model, torch.export.export(model, tuple(inputs)), inputs


BADDBMM_SCALES = pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, 2.0), (0, 1)], ids=["plain", "scaled", "beta0"])


@BADDBMM_SCALES
def test_baddbmm_joins_the_engine(beta, alpha):
    model, program, inputs = _baddbmm_case(beta, alpha)
    partitioned = tt.dryrun(program, inputs)
    assert _by_place(partitioned, BADDBMM) == {"trt": 1, "torch": 0}
    torch.testing.assert_close(partitioned(*inputs), model(*inputs))
    assert _by_place(_without_us(program, inputs), BADDBMM) == {"trt": 0, "torch": 1}


@BADDBMM_SCALES
def test_baddbmm_plan_builds(beta, alpha):
    _, program, inputs = _baddbmm_case(beta, alpha)
    assert len(tt.serialized_engine(program, inputs)) > 0


class Attention(torch.nn.Module):
    def __init__(self, mask: str, is_causal: bool = False):
        super().__init__()
        self.mask, self.is_causal = mask, is_causal

    def forward(self, q, k, v, scores_bias):
        mask = {"none": None, "bool": scores_bias > -0.5, "float": scores_bias}[self.mask]
        out = torch.nn.functional.scaled_dot_product_attention(
            q.relu(), k, v, attn_mask=mask, is_causal=self.is_causal, scale=0.2 if self.mask == "float" else None
        )
        return out * 2


def _attention_case(mask: str, value_dim: int, is_causal: bool = False):
    """ConditionalDETR's cross-attention shapes: 5 queries, 4 keys, head dim 32, value head dim ``value_dim``."""
    generator = torch.Generator().manual_seed(0)
    shapes = ((1, 2, 5, 32), (1, 2, 4, 32), (1, 2, 4, value_dim), (1, 1, 5, 4))
    inputs = [torch.randn(shape, generator=generator) for shape in shapes]
    model = Attention(mask, is_causal).eval()
    return model, torch.export.export(model, tuple(inputs)), inputs


@pytest.mark.parametrize("mask", ["none", "bool", "float"])
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


@pytest.mark.parametrize("mask", ["none", "bool", "float"])
def test_attention_whose_value_head_dim_differs_plan_builds(mask):
    _, program, inputs = _attention_case(mask, value_dim=16)
    assert len(tt.serialized_engine(program, inputs)) > 0


class TopHalf(torch.nn.Module):
    """The top half of ``n`` scores: a SymInt ``k`` as torchvision's one-stage postprocessing has (there
    ``min(candidates, n)`` of a data-dependent ``n``: the zoo's full-TensorRT partition)."""

    def __init__(self, largest: bool = True):
        super().__init__()
        self.largest = largest

    def forward(self, scores):
        values, indices = scores.sigmoid().topk(scores.shape[0] // 2, largest=self.largest)
        return values * 2, indices


def _topk_case(largest: bool = True, max_k: int = 500):
    """``TopHalf`` of an even dynamic ``n`` (export proves ``n // 2 <= n`` for ``n = 2 * half`` only)."""
    model, scores = TopHalf(largest).eval(), torch.randn(30, generator=torch.Generator().manual_seed(0))
    n = 2 * torch.export.Dim("half", min=1, max=max_k)
    program = torch.export.export(model, (scores,), dynamic_shapes=({0: n},))
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
