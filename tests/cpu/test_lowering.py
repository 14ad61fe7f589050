"""Lowering passes: which subgraphs become torch.ops.torchtrt.*, numerics of the result, what stays."""

from __future__ import annotations

import copy
import functools
import logging
import sys
import types

import pytest
import torch
from models import RMS_NORMS, decoder_block, make_rms_norm
from torch import nn

import torchtrt_plugins  # noqa: F401  (defines the ops)
from torchtrt_plugins import lowering
from torchtrt_plugins.ops import rms_norm as rms_norm_op

RMS_NORM = torch.ops.torchtrt.rms_norm.default
ATEN = torch.ops.aten
HIDDEN = 32
#: What is left of an RMSNorm that was not replaced.
NORM_LEFTOVERS = {
    ATEN.mean.dim,
    ATEN.rsqrt.default,
    ATEN.sqrt.default,
    ATEN.rms_norm.default,
    ATEN._fused_rms_norm.default,
    torch.rsqrt,
    torch.nn.functional.rms_norm,
    "mean",
}


pytestmark = pytest.mark.usefixtures("lowering_as_configured")


def export(module: nn.Module, *inputs: torch.Tensor, decompose: bool = True, dynamic_shapes=None):
    program = torch.export.export(module, inputs, dynamic_shapes=dynamic_shapes)
    return (program.run_decompositions() if decompose else program).module()


def trace(module: nn.Module) -> torch.fx.GraphModule:
    return torch.fx.symbolic_trace(module)


def targets(gm: torch.fx.GraphModule) -> list:
    return [node.target for node in gm.graph.nodes if node.op in ("call_function", "call_method", "call_module")]


def op_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [node for node in gm.graph.nodes if node.target == RMS_NORM]


def lower_copy(gm: torch.fx.GraphModule, example_inputs=None):
    """``(original, lowered, report)``; the original is a deep copy taken before lowering."""
    original = copy.deepcopy(gm)
    lowered, report = lowering.lower_with_report(gm, example_inputs)
    return original, lowered, report


def assert_lowered_close(original, lowered, inputs, tolerance_dtype: torch.dtype) -> None:
    expected, actual = original(*inputs), lowered(*inputs)
    tolerance = rms_norm_op.SPEC.tolerance(tolerance_dtype)
    torch.testing.assert_close(actual, expected, atol=tolerance.atol, rtol=tolerance.rtol)  # dtypes, shapes too


def assert_replaced(gm: torch.fx.GraphModule, inputs, count: int, tolerance_dtype=None):
    original, lowered, report = lower_copy(gm)
    assert report == {"rms_norm": count, "multi_scale_roi_align": 0, "multi_scale_deformable_attention": 0}
    assert lowered.meta[lowering.META_KEY] == report
    assert len(op_nodes(lowered)) == count
    assert not NORM_LEFTOVERS & set(targets(lowered))
    assert_lowered_close(original, lowered, inputs, tolerance_dtype or inputs[0].dtype)
    return lowered


def inputs_for(dtype: torch.dtype, *shape: int) -> tuple[torch.Tensor]:
    return (torch.randn(*(shape or (2, 5, HIDDEN)), generator=torch.Generator().manual_seed(0)).to(dtype),)


BLOCK_INPUT_SHAPE = (2, 7, HIDDEN)


@functools.cache
def _exported_block(style: str, dtype: torch.dtype) -> torch.fx.GraphModule:
    block = decoder_block(style, hidden_size=HIDDEN, num_heads=4, intermediate_size=48).to(dtype)
    return export(block, *inputs_for(dtype, *BLOCK_INPUT_SHAPE))


def exported_block(style: str = "llama", dtype: torch.dtype = torch.float32) -> torch.fx.GraphModule:
    """A decoder block exported and decomposed (once per style and dtype; each caller gets a copy)."""
    return copy.deepcopy(_exported_block(style, dtype))


# ------------------------------------------------------------------------------------ positives


STYLE_CASES = [(style, dtype, True) for style in sorted(RMS_NORMS) for dtype in (torch.float32, torch.bfloat16)] + [
    (style, torch.bfloat16, False) for style in sorted(RMS_NORMS)
]


@pytest.mark.parametrize(
    "style, dtype, decompose",
    STYLE_CASES,
    ids=[f"{s}-{d}-{'decomposed' if c else 'exported'}" for s, d, c in STYLE_CASES],
)
def test_each_style_becomes_one_op(style, dtype, decompose):
    gm = export(make_rms_norm(style, HIDDEN, eps=1e-5).to(dtype), *inputs_for(dtype), decompose=decompose)
    lowered = assert_replaced(gm, inputs_for(dtype), 1)
    (node,) = op_nodes(lowered)
    assert node.args[2] == pytest.approx(1e-5)
    assert node.meta["val"].dtype == dtype and tuple(node.meta["val"].shape) == (2, 5, HIDDEN)


@pytest.mark.parametrize(
    "style, dtype", [("llama", torch.float32), ("llama", torch.bfloat16), ("t5", torch.bfloat16)], ids=str
)
def test_decoder_block_norms_both_replaced(style, dtype):
    lowered = assert_replaced(exported_block(style, dtype), inputs_for(dtype, *BLOCK_INPUT_SHAPE), 2)
    first, second = op_nodes(lowered)
    assert (
        first.args[1].target == "input_layernorm.weight" and second.args[1].target == "post_attention_layernorm.weight"
    )


def test_norm_of_a_norm_chains_the_ops():
    chain, inputs = (
        nn.Sequential(make_rms_norm("llama", HIDDEN), make_rms_norm("div_sqrt", HIDDEN)),
        inputs_for(torch.float32),
    )
    first, second = op_nodes(assert_replaced(export(chain, *inputs), inputs, 2))
    assert second.args[0] is first


def test_large_eps_is_the_graphs_eps():
    assert_replaced(
        export(make_rms_norm("llama", HIDDEN, eps=4.0), *inputs_for(torch.float32)), inputs_for(torch.float32), 1
    )


def test_default_eps_is_the_one_aten_rms_norm_uses():
    module, inputs = nn.RMSNorm(HIDDEN).to(torch.bfloat16), inputs_for(torch.bfloat16)
    (op_level,) = op_nodes(lowering.lower(export(module, *inputs, decompose=False)))
    (decomposed,) = op_nodes(lowering.lower(export(module, *inputs)))
    assert op_level.args[2] == decomposed.args[2] == torch.finfo(torch.float32).eps


@pytest.mark.parametrize("style", ["llama", "weight_before_cast", "t5", "nn"])
def test_fp32_weight_with_bf16_input_keeps_output_dtype(style):
    module = make_rms_norm(style, HIDDEN)  # fp32 weight
    inputs = inputs_for(torch.bfloat16)
    lowered = assert_replaced(export(module, *inputs), inputs, 1, tolerance_dtype=torch.bfloat16)
    (node,) = op_nodes(lowered)
    x, weight = node.args[0].meta["val"], node.args[1].meta["val"]
    assert x.dtype == weight.dtype == node.meta["val"].dtype == module(*inputs).dtype


def test_bf16_weight_with_fp32_input():
    inputs = inputs_for(torch.float32)
    assert_replaced(export(make_rms_norm("t5", HIDDEN).to(torch.bfloat16), *inputs), inputs, 1, torch.bfloat16)


class FusedRMSNorm(nn.Module):
    """``aten._fused_rms_norm`` as exported on CUDA; ``use_rstd`` also returns the inverse rms."""

    def __init__(self, use_rstd: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(HIDDEN) + 0.5)
        self.use_rstd = use_rstd

    def forward(self, x):
        y, rstd = ATEN._fused_rms_norm(x, [HIDDEN], self.weight, 1e-5)
        return (y, rstd) if self.use_rstd else y


class TorchTensorRTDecomposedRMSNorm(nn.Module):
    """What Torch-TensorRT's replace_fused_rms_norm leaves: ``x * x``, a positive dim, no casts."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(HIDDEN) + 0.5)

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(dim=[x.dim() - 1], keepdim=True) + 1e-5) * self.weight


def test_fused_rms_norm_replaced():
    inputs = inputs_for(torch.float32)
    assert_replaced(export(FusedRMSNorm(), *inputs, decompose=False), inputs, 1)


@pytest.mark.parametrize("decompose", [True, False], ids=["decomposed", "exported"])
def test_torch_tensorrt_decomposed_form_replaced(decompose):
    inputs = inputs_for(torch.float32)
    assert_replaced(export(TorchTensorRTDecomposedRMSNorm(), *inputs, decompose=decompose), inputs, 1)


def torch_tensorrt_decompositions(experimental: bool = False) -> dict:
    """The decomposition table Torch-TensorRT 2.11-2.14 hands to ``run_decompositions`` before its
    post-lowering passes (``torch_tensorrt/dynamo/lowering/_decompositions.py:get_decompositions``), as far
    as an RMSNorm goes: every CompositeImplicitAutograd aten op (``aten.rms_norm``, ``aten.square``; with
    ``enable_experimental_decompositions`` the core ATen table instead, ``aten._fused_rms_norm`` included),
    then its own rewrites ``rsqrt -> reciprocal(sqrt(.))`` and ``reciprocal -> div(1, .)``.
    The tt tier checks the same forms inside the real Torch-TensorRT."""
    from torch._decomp import core_aten_decompositions
    from torch._export.utils import _collect_all_valid_cia_ops_for_aten_namespace, _get_decomp_for_cia

    if experimental:
        table = dict(core_aten_decompositions())
    else:
        table = {op: _get_decomp_for_cia(op) for op in _collect_all_valid_cia_ops_for_aten_namespace()}
    table[ATEN.rsqrt.default] = lambda x: torch.reciprocal(torch.sqrt(x))
    table[ATEN.reciprocal.default] = lambda x: torch.div(1, x)
    return table


TORCH_TENSORRT_CASES = [
    (style, dtype, experimental)
    for style in sorted(RMS_NORMS)
    for dtype in (torch.float32, torch.float16, torch.bfloat16)
    for experimental in (False, True)
]


@pytest.mark.parametrize(
    "style, dtype, experimental",
    TORCH_TENSORRT_CASES,
    ids=[f"{s}-{d}-{'experimental' if e else 'default'}" for s, d, e in TORCH_TENSORRT_CASES],
)
def test_each_style_replaced_after_torch_tensorrt_decompositions(style, dtype, experimental):
    """Defect 1 of issue 11: after Torch-TensorRT's decompositions ``rsqrt`` is ``div(1, sqrt(.))``."""
    inputs = inputs_for(dtype)
    program = torch.export.export(make_rms_norm(style, HIDDEN, eps=1e-5).to(dtype), inputs)
    gm = program.run_decompositions(torch_tensorrt_decompositions(experimental)).module()
    assert ATEN.rsqrt.default not in targets(gm) and ATEN.reciprocal.default not in targets(gm)
    (node,) = op_nodes(assert_replaced(gm, inputs, 1, tolerance_dtype=dtype))
    assert node.args[2] == pytest.approx(1e-5)


@pytest.mark.parametrize("experimental", [False, True], ids=["default", "experimental"])
def test_fused_rms_norm_replaced_after_torch_tensorrt_decompositions(experimental):
    """``aten._fused_rms_norm`` (what CUDA exports) is decomposed by both tables before our pass sees it."""
    inputs = inputs_for(torch.float32)
    program = torch.export.export(FusedRMSNorm(), inputs)
    gm = program.run_decompositions(torch_tensorrt_decompositions(experimental)).module()
    assert ATEN._fused_rms_norm.default not in targets(gm)
    assert_replaced(gm, inputs, 1)


@pytest.mark.parametrize(
    "spelling",
    [
        lambda v: torch.reciprocal(torch.sqrt(v)),
        lambda v: 1.0 / torch.sqrt(v),
        lambda v: torch.sqrt(v) ** -1,
        lambda v: v**-0.5,
        lambda v: 1 / v**0.5,
    ],
    ids=["reciprocal_sqrt", "one_over_sqrt", "sqrt_pow_minus_one", "pow_minus_half", "one_over_pow_half"],
)
def test_inverse_square_root_spellings(spelling):
    class Norm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.rand(HIDDEN) + 0.5)

        def forward(self, x):
            return x * spelling(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight

    inputs = inputs_for(torch.float32)
    assert_replaced(export(Norm(), *inputs), inputs, 1)


def test_dynamic_batch_and_sequence():
    dynamic = ({0: torch.export.Dim("batch", min=1, max=8), 1: torch.export.Dim("seq", min=2, max=64)},)
    gm = export(make_rms_norm("llama", HIDDEN).to(torch.bfloat16), *inputs_for(torch.bfloat16), dynamic_shapes=dynamic)
    original, lowered, report = lower_copy(gm)
    assert report == {"rms_norm": 1, "multi_scale_roi_align": 0, "multi_scale_deformable_attention": 0}
    assert_lowered_close(original, lowered, inputs_for(torch.bfloat16, 3, 11, HIDDEN), torch.bfloat16)


@pytest.mark.parametrize("style", sorted(set(RMS_NORMS) - {"t5"}))  # T5LayerNorm branches on a dtype: untraceable
def test_symbolic_trace_with_example_inputs(style):
    block = decoder_block(style, hidden_size=HIDDEN, num_heads=4, intermediate_size=48).to(torch.bfloat16)
    inputs = inputs_for(torch.bfloat16, *BLOCK_INPUT_SHAPE)
    original, lowered, report = lower_copy(trace(block), example_inputs=inputs)
    assert report == {"rms_norm": 2, "multi_scale_roi_align": 0, "multi_scale_deformable_attention": 0}
    assert not NORM_LEFTOVERS & set(targets(lowered))
    assert not any(node.op == "call_module" and node.target.endswith("layernorm") for node in lowered.graph.nodes)
    assert_lowered_close(original, lowered, inputs, torch.bfloat16)


def test_symbolic_trace_without_dtypes_is_left_alone():
    gm = trace(make_rms_norm("llama", HIDDEN))
    before = gm.code
    assert lowering.lower_with_report(gm)[1] == {
        "rms_norm": 0,
        "multi_scale_roi_align": 0,
        "multi_scale_deformable_attention": 0,
    }
    assert gm.code == before


def test_new_nodes_carry_fake_values_and_provenance():
    lowered = export(make_rms_norm("t5", HIDDEN).to(torch.bfloat16), *inputs_for(torch.float32))
    lowering.lower(lowered)
    (node,) = op_nodes(lowered)
    cast = node.args[0]  # fp32 input cast to the output dtype (bf16) for the op
    assert cast.target == ATEN._to_copy.default and cast.meta["val"].dtype == torch.bfloat16
    assert node.meta["val"].dtype == torch.bfloat16 and "nn_module_stack" in node.meta
    assert node.args[1].op == "get_attr" and node.args[1].meta["val"].dtype == torch.bfloat16


def _weightless(x, w, e):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


WEIGHTLESS = {
    "composite": (_weightless, 1),
    # what follows the norm is no ``* weight``: the norm alone becomes the op, the rest stays
    "weight added": (lambda x, w, e: w + _weightless(x, w, e), 1),
    "normalized also used": (lambda x, w, e: (lambda n: (w * n, n.sum()))(_weightless(x, w, e)), 1),
    "times a scalar": (lambda x, w, e: _weightless(x, w, e) * 2.0, 1),
}


@pytest.mark.parametrize("name", sorted(WEIGHTLESS))
@pytest.mark.parametrize("decompose", [True, False], ids=["decomposed", "exported"])
def test_norm_without_weight_gets_ones(name, decompose):
    fn, count = WEIGHTLESS[name]
    inputs = inputs_for(torch.float32, HIDDEN, HIDDEN)
    (node,) = op_nodes(assert_replaced(export(Norm(fn), *inputs, decompose=decompose), inputs, count))
    ones = node.args[1]
    assert ones.target == ATEN.full.default and ones.args == ([HIDDEN], 1.0)
    assert ones.meta["val"].dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("style", ["nn_no_weight", "functional_no_weight"])
@pytest.mark.parametrize("decompose", [True, False], ids=["decomposed", "exported"])
def test_rms_norm_ops_without_weight_replaced(style, dtype, decompose):
    """``nn.RMSNorm(elementwise_affine=False)`` and ``F.rms_norm(x, shape, None, eps)`` (issue 25)."""
    module, inputs = make_rms_norm(style, HIDDEN, eps=1e-5).to(dtype), inputs_for(dtype)
    (node,) = op_nodes(assert_replaced(export(module, *inputs, decompose=decompose), inputs, 1))
    assert node.args[2] == pytest.approx(1e-5) and node.args[1].meta["val"].dtype == dtype


def test_rms_norm_module_without_weight_replaced_after_symbolic_trace():
    inputs = inputs_for(torch.bfloat16)
    original, lowered, report = lower_copy(trace(nn.RMSNorm(HIDDEN, elementwise_affine=False)), inputs)
    assert report == {
        "rms_norm": 1,
        "multi_scale_roi_align": 0,
        "multi_scale_deformable_attention": 0,
    } and not NORM_LEFTOVERS & set(targets(lowered))
    assert_lowered_close(original, lowered, inputs, torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("decompose", [True, False], ids=["decomposed", "exported"])
def test_gemma_weight_offset_rounds_once(dtype, decompose):
    """Gemma's ``x * (1 + w)`` in fp32, cast once: the op takes ``w`` and ``weight_offset=1``, so its output is the
    original's bit for bit, where ``1 + w`` rounded to fp16/bf16 first would differ (issue 25)."""
    module = make_rms_norm("gemma", 256).to(dtype)
    with torch.no_grad():
        module.weight.copy_(0.3 * torch.randn(256, generator=torch.Generator().manual_seed(1)))
    inputs = (torch.randn(64, 256, generator=torch.Generator().manual_seed(0)).to(dtype),)
    original, lowered, report = lower_copy(export(module, *inputs, decompose=decompose))
    assert report == {"rms_norm": 1, "multi_scale_roi_align": 0, "multi_scale_deformable_attention": 0}
    (node,) = op_nodes(lowered)
    assert node.args[1].op == "get_attr" and node.args[1].meta["val"].dtype == dtype and node.args[3] == 1.0
    torch.testing.assert_close(lowered(*inputs), original(*inputs), atol=0, rtol=0)


def test_weight_offset_shared_with_another_use_stays_the_weight():
    """``1 + w`` also used elsewhere is not the op's to take apart: it is the weight, as before."""

    def shared(x, w, e):
        plus_one = 1.0 + w
        return _weightless(x, w, e) * plus_one, plus_one.sum()

    inputs = inputs_for(torch.float32, HIDDEN, HIDDEN)
    (node,) = op_nodes(assert_replaced(export(Norm(shared), *inputs, decompose=False), inputs, 1))
    assert len(node.args) == 3 and node.args[1].target == ATEN.add.Tensor


# ------------------------------------------------------------------------------------ negatives


class Norm(nn.Module):
    """A hand-written norm-like ``fn(x, weight, eps_buffer)`` with a weight of ``weight_shape``."""

    def __init__(self, fn, weight_shape=(HIDDEN,)):
        super().__init__()
        self.fn = fn
        self.weight = nn.Parameter(torch.rand(weight_shape) + 0.5)
        self.register_buffer("eps", torch.tensor(1e-6))

    def forward(self, x):
        return self.fn(x, self.weight, self.eps)


def _llama_like(x, w, variance=None, normed=None):
    variance = x.pow(2).mean(-1, keepdim=True) if variance is None else variance
    return w * (x * torch.rsqrt(variance + 1e-6) if normed is None else normed)


def _variance_also_returned(x, w, e):
    variance = x.pow(2).mean(-1, keepdim=True)
    return _llama_like(x, w, variance=variance), variance


def _square_also_used(x, w, e):
    square = x.pow(2)
    return _llama_like(x, w, variance=square.mean(-1, keepdim=True)), square.sum()


NEGATIVES = {
    "mean over another dim": lambda x, w, e: _llama_like(x, w, variance=x.pow(2).mean(0, keepdim=True)),
    "keepdim false then unsqueeze": lambda x, w, e: _llama_like(x, w, variance=x.pow(2).mean(-1).unsqueeze(-1)),
    # (H, H) inputs: the (H,) mean broadcasts over the wrong dimension, shapes still work out
    "keepdim false": lambda x, w, e: _llama_like(x, w, variance=x.pow(2).mean(-1)),
    "eps after rsqrt": lambda x, w, e: w * (x * (torch.rsqrt(x.pow(2).mean(-1, keepdim=True)) + 1e-6)),
    "eps as a tensor": lambda x, w, e: w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + e)),
    "cube instead of square": lambda x, w, e: _llama_like(x, w, variance=x.pow(3).mean(-1, keepdim=True)),
    "mean of abs": lambda x, w, e: _llama_like(x, w, variance=x.abs().mean(-1, keepdim=True)),
    "other numerator": lambda x, w, e: _llama_like(
        x, w, normed=x.flip(0) * torch.rsqrt(x.pow(2).mean(-1, True) + 1e-6)
    ),
    "eps zero (op refuses)": lambda x, w, e: w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 0.0)),
    "variance also returned": _variance_also_returned,
    "square also used": _square_also_used,
}


def assert_untouched(gm: torch.fx.GraphModule, example_inputs=None) -> None:
    before_graph, before_code = str(gm.graph), gm.code
    _, report = lowering.lower_with_report(gm, example_inputs)
    assert report == {"rms_norm": 0, "multi_scale_roi_align": 0, "multi_scale_deformable_attention": 0}
    assert str(gm.graph) == before_graph and gm.code == before_code


@pytest.mark.parametrize("name", sorted(NEGATIVES))
def test_not_rms_norm_stays(name):
    assert_untouched(export(Norm(NEGATIVES[name]), *inputs_for(torch.float32, HIDDEN, HIDDEN), decompose=False))


@pytest.mark.parametrize("weight_shape", [(1,), (5, 1), (1, HIDDEN)], ids=str)
def test_weight_of_wrong_shape_stays(weight_shape):
    assert_untouched(export(Norm(_llama_like, weight_shape), *inputs_for(torch.float32), decompose=False))


def test_float64_stays_since_op_refuses_it():
    assert_untouched(export(make_rms_norm("llama", HIDDEN).double(), *inputs_for(torch.float64), decompose=False))


@pytest.mark.parametrize(
    "module",
    [nn.RMSNorm((5, HIDDEN)), FusedRMSNorm(use_rstd=True)],
    ids=["two normalized dims", "fused with rstd used"],
)
def test_rms_norm_ops_we_cannot_take_stay(module):
    assert_untouched(export(module, *inputs_for(torch.float32), decompose=False))


def test_rms_norm_modules_we_cannot_take_stay_after_symbolic_trace():
    assert_untouched(trace(nn.RMSNorm((5, HIDDEN))), inputs_for(torch.float32))


# ---------------------------------------------------------------------------- switches, report


def test_report_logged_at_info(caplog):
    with caplog.at_level(logging.INFO, logger="torchtrt_plugins.lowering"):
        lowering.lower(exported_block())
    assert "rms_norm x2" in caplog.text


@pytest.mark.parametrize("switch", ["env", "function"])
def test_opt_out(switch, monkeypatch):
    if switch == "env":
        monkeypatch.setenv(lowering.ENV_VAR, "0")
    else:
        lowering.set_enabled(False)
    gm = export(make_rms_norm("llama", HIDDEN), *inputs_for(torch.float32))
    before = gm.code
    assert lowering.lower_with_report(gm) == (gm, {})
    assert gm.code == before and lowering.META_KEY not in gm.meta
    lowering.set_enabled(True)
    assert lowering.lower_with_report(gm)[1] == {
        "rms_norm": 1,
        "multi_scale_roi_align": 0,
        "multi_scale_deformable_attention": 0,
    }


def test_set_enabled_names_bad_argument():
    with pytest.raises(TypeError, match="set_enabled: 'enabled' must be a bool"):
        lowering.set_enabled("no")


def test_lower_names_bad_argument():
    with pytest.raises(TypeError, match="'gm' must be a torch.fx.GraphModule .*got Linear"):
        lowering.lower(nn.Linear(2, 2))


def test_passes_is_an_ordered_list_of_named_passes():
    assert [p.name for p in lowering.PASSES] == [
        "rms_norm",
        "multi_scale_roi_align",
        "multi_scale_deformable_attention",
    ]


# -------------------------------------------------------------------------------- Torch-TensorRT


def test_registration_skipped_without_torch_tensorrt(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_tensorrt", None)  # makes ``import torch_tensorrt`` fail
    assert lowering.register_with_torch_tensorrt() is False


def test_registration_adds_the_pass_once_first(monkeypatch):
    registry = types.SimpleNamespace(passes=["replace_fused_rms_norm", "constant_fold"])
    calls = []

    def _aten_lowering_pass(lowering_pass, index=None):
        calls.append(index)
        registry.passes.insert(index, lowering_pass)
        return lowering_pass

    passes_module = types.ModuleType(lowering.TORCH_TENSORRT_PASSES_MODULE)
    passes_module.ATEN_POST_LOWERING_PASSES = registry
    passes_module._aten_lowering_pass = _aten_lowering_pass
    monkeypatch.setitem(sys.modules, "torch_tensorrt", types.ModuleType("torch_tensorrt"))
    monkeypatch.setitem(sys.modules, lowering.TORCH_TENSORRT_PASSES_MODULE, passes_module)

    assert lowering.register_with_torch_tensorrt() and lowering.register_with_torch_tensorrt()
    assert calls == [0]
    registered = registry.passes[0]
    gm = export(make_rms_norm("nn", HIDDEN), *inputs_for(torch.float32))
    assert registered(gm, object()) is gm and len(op_nodes(gm)) == 1
