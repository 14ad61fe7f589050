"""The lowering of decomposed multi-scale deformable attention (``lowering.multi_scale_deformable_attention``): the
exported graphs of transformers' pure-PyTorch ``MultiScaleDeformableAttention`` (each model's class, and the tiny zoo
models holding it) become one ``torchtrt.multi_scale_deformable_attention`` per module, equal to the graph they came
from on the op's CPU path; graphs that compute something else stay as they are."""

from __future__ import annotations

import logging

import pytest
import torch
from deformable_attention_cases import (
    MAPS,
    MODELING,
    ZOO_MODELS,
    AttentionOnMaps,
    AttentionV2Call,
    DeformableDetrEncoder,
    attention_call,
    attention_modules,
    random_inputs,
    v2_inputs,
    zoo_model,
)

from torchtrt_plugins import lowering

MSDA = torch.ops.torchtrt.multi_scale_deformable_attention.default
PASS = "multi_scale_deformable_attention"
GRID_SAMPLERS = (torch.ops.aten.grid_sampler.default, torch.ops.aten.grid_sampler_2d.default)


pytestmark = pytest.mark.usefixtures("lowering_as_configured")


def _exported(module, args, decompose: bool, dynamic_shapes=None) -> torch.fx.GraphModule:
    with torch.no_grad():
        program = torch.export.export(module, args, dynamic_shapes=dynamic_shapes)
    return (program.run_decompositions() if decompose else program).module()


def _calls(gm: torch.fx.GraphModule, *targets) -> list[torch.fx.Node]:
    return [node for node in gm.graph.nodes if node.op == "call_function" and node.target in targets]


def _lowered(gm: torch.fx.GraphModule, count: int) -> torch.fx.GraphModule:
    gm, report = lowering.lower_with_report(gm)
    assert report[PASS] == count
    assert len(_calls(gm, MSDA)) == count
    assert not _calls(gm, *GRID_SAMPLERS)
    return gm


def _assert_same(got, expected):
    for a, b in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(expected), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
@pytest.mark.parametrize("name", MODELING)
def test_each_models_attention_becomes_one_op(name, decompose):
    module = attention_call(name)
    args = random_inputs(spread=1.6)  # a third of the points outside the maps
    gm = _exported(module, args, decompose)
    expected = gm(*args)
    gm = _lowered(gm, 1)
    (node,) = _calls(gm, MSDA)
    shapes, starts = (getattr(gm, n.target) for n in node.args[1:3])
    assert shapes.dtype == starts.dtype == torch.int64
    assert shapes.tolist() == [list(m) for m in MAPS] and starts.tolist() == [0, 35, 47]
    _assert_same(gm(*args), expected)
    _assert_same(gm(*random_inputs(spread=1.6, seed=1)), module(*random_inputs(spread=1.6, seed=1)))


@pytest.mark.parametrize("maps", [[(6, 4)], [(1, 1), (2, 3)], [(4, 4), (4, 4), (2, 2), (1, 3)]], ids=str)
def test_level_counts_and_sizes(maps):
    module = attention_call("deformable_detr", maps)
    args = random_inputs(batch=1, heads=1, points=1, maps=maps, spread=1.3)
    gm = _exported(module, args, decompose=True)
    expected = gm(*args)
    _assert_same(_lowered(gm, 1)(*args), expected)


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_dynamic_batch_and_queries(decompose):
    module = attention_call("deformable_detr")
    batch, queries = torch.export.Dim("batch", min=1, max=16), torch.export.Dim("queries", min=2, max=1000)
    dynamic = ({0: batch}, None, None, {0: batch, 1: queries}, {0: batch, 1: queries})
    gm = _lowered(_exported(module, random_inputs(), decompose, dynamic), 1)
    for size, count in ((1, 9), (5, 3)):
        args = random_inputs(batch=size, queries=count, spread=1.4, seed=size)
        _assert_same(gm(*args), module(*args))


@pytest.mark.parametrize("name", ZOO_MODELS)
def test_zoo_models_one_op_per_attention_module(name):
    model, inputs = zoo_model(name)
    modules = attention_modules(model)
    assert modules >= 1
    gm = _exported(model, inputs, decompose=False)
    with torch.no_grad():
        expected = gm(*inputs)
        got = _lowered(gm, modules)(*inputs)
    _assert_same(got, expected)


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_rt_detr_v2_attention_becomes_one_op(decompose):
    module = AttentionV2Call(points=(3, 3, 3)).eval()
    args = v2_inputs(points=(3, 3, 3), spread=1.6)
    gm = _exported(module, args, decompose)
    expected = gm(*args)
    gm = _lowered(gm, 1)
    (node,) = _calls(gm, MSDA)
    assert [tuple(n.meta["val"].shape) for n in node.args[3:]] == [(2, 6, 3, 3, 3, 2), (2, 6, 3, 3, 3)]
    assert getattr(gm, node.args[1].target).tolist() == [list(m) for m in MAPS]
    _assert_same(gm(*args), expected)
    other = v2_inputs(points=(3, 3, 3), spread=1.6, seed=1)
    _assert_same(gm(*other), module(*other))


@pytest.mark.parametrize(
    ("points", "method", "reason"),
    [
        ((2, 3, 1), "default", "its levels sample [2, 3, 1] points (the op samples as many points at every level)"),
        ((2, 2, 2), "discrete", "level 0 is read by indexing at the nearest pixel, clamped to the map"),
    ],
    ids=["points_per_level", "discrete"],
)
def test_rt_detr_v2_attention_computing_something_else_is_refused(points, method, reason, caplog):
    module = AttentionV2Call(points=points, method=method).eval()
    args = v2_inputs(points=points, spread=1.6)
    gm = _exported(module, args, decompose=True)
    expected = gm(*args)
    with caplog.at_level(logging.INFO, logger="torchtrt_plugins.lowering"):
        gm, report = lowering.lower_with_report(gm)
    assert report[PASS] == 0 and not _calls(gm, MSDA)
    assert reason in caplog.text
    torch.testing.assert_close(gm(*args), expected, atol=0, rtol=0)


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
@pytest.mark.parametrize("name", ["deformable_detr", "rt_detr_v2"])
def test_dynamic_map_sizes(name, decompose):
    """Maps of dynamic sizes: spatial_shapes and level_start_index are tensors the graph computes from its size
    nodes, right at sizes other than the exported ones."""
    module = AttentionOnMaps(name).eval()
    maps = [
        {0: None, 1: None, 2: torch.export.Dim(f"h{i}", min=2, max=32), 3: torch.export.Dim(f"w{i}", min=2, max=32)}
        for i in range(3)
    ]
    gm = _lowered(
        _exported(module, AttentionOnMaps.inputs(name, [(5, 7), (3, 4), (2, 3)]), decompose, (None, None, tuple(maps))),
        1,
    )
    (node,) = _calls(gm, MSDA)
    assert all(n.op == "call_function" and n.meta["val"].dtype == torch.int64 for n in node.args[1:3])
    for sizes in ([(6, 8), (4, 3), (2, 5)], [(11, 4), (2, 7), (3, 3)]):
        args = AttentionOnMaps.inputs(name, sizes, seed=len(sizes[0]))
        _assert_same(gm(*args), module(*args))


def test_deformable_detr_encoder_with_dynamic_batch():
    encoder = DeformableDetrEncoder().eval()
    batch = torch.export.Dim("batch", min=1, max=8)
    gm = _lowered(_exported(encoder, encoder.example_inputs(), True, ({0: batch}, {0: batch})), 1)
    args = encoder.example_inputs(batch=3, seed=1)
    with torch.no_grad():
        _assert_same(gm(*args), encoder(*args))


def _sampler_args_changed(gm: torch.fx.GraphModule, level: int, index: int, new) -> None:
    sampler = _calls(gm, *GRID_SAMPLERS)[level]
    args = list(sampler.args)
    args[index] = new
    sampler.args = tuple(args)
    gm.recompile()


@pytest.mark.parametrize(
    ("index", "new", "reason"),
    [
        (3, 1, "padding_mode='border' (the op pads with zeros)"),
        (3, 2, "padding_mode='reflection'"),
        (4, True, "align_corners=True"),
        (2, 1, "mode='nearest' (the op samples bilinearly)"),
    ],
    ids=["border", "reflection", "align_corners", "nearest"],
)
@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_other_sampling_is_refused_with_the_reason(decompose, index, new, reason, caplog):
    module = attention_call("deformable_detr")
    args = random_inputs(spread=1.6)
    gm = _exported(module, args, decompose)
    _sampler_args_changed(gm, 1, index, new)
    expected = gm(*args)
    assert not torch.allclose(expected, module(*args), atol=1e-3)  # it computes something else
    with caplog.at_level(logging.INFO, logger="torchtrt_plugins.lowering"):
        gm, report = lowering.lower_with_report(gm)
    assert report[PASS] == 0 and not _calls(gm, MSDA) and len(_calls(gm, *GRID_SAMPLERS)) == 3
    assert f"level 1's grid_sample has {reason}" in caplog.text
    torch.testing.assert_close(gm(*args), expected, atol=0, rtol=0)


def test_a_level_sampled_at_another_levels_points_stays():
    module = attention_call("deformable_detr")
    args = random_inputs()
    gm = _exported(module, args, decompose=True)
    select = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.select.int and n.args[1:] == (3, 0))
    select.args = (select.args[0], 3, 1)
    gm.recompile()
    expected = gm(*args)
    gm, report = lowering.lower_with_report(gm)
    assert report[PASS] == 0 and len(_calls(gm, *GRID_SAMPLERS)) == 3
    torch.testing.assert_close(gm(*args), expected, atol=0, rtol=0)


class _WeightsOfOtherHeads(torch.nn.Module):
    """Deformable attention whose weights are laid out with queries and heads swapped (heads == queries, so every
    shape is the same): not what the op computes."""

    def __init__(self):
        super().__init__()
        self.call = attention_call("deformable_detr")

    def forward(self, value, shapes, starts, locations, weights):
        return self.call(value, shapes, starts, locations, weights.transpose(1, 2))


def test_weights_of_a_different_layout_are_followed_not_guessed():
    module = _WeightsOfOtherHeads()
    args = random_inputs(queries=3, heads=3)
    gm = _exported(module, args, decompose=True)
    expected = gm(*args)
    gm = _lowered(gm, 1)
    (node,) = _calls(gm, MSDA)
    assert node.args[4].target == torch.ops.aten.view.default  # the softmax's view, after the model's transpose
    _assert_same(gm(*args), expected)


def test_opt_out_leaves_the_graph():
    lowering.set_enabled(False)
    gm = _exported(attention_call("deformable_detr"), random_inputs(), decompose=True)
    assert lowering.lower_with_report(gm)[1] == {}
    assert len(_calls(gm, *GRID_SAMPLERS)) == 3
