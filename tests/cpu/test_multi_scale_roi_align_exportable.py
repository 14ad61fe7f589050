"""The multi_scale_roi_align lowering on MultiScaleRoIAlign as ``vision.exportable()`` exports it (every box pooled at
every level, a ``torch.where`` chain keeps each box's own level): torchvision's pooler and the zoo's Faster R-CNN lower
to one ``torchtrt_vision::multi_scale_roi_align_<L>`` and give torchvision's values; chains that compute something
else are left alone."""

from __future__ import annotations

import sys

import pytest
import torch
from torchvision_site import require_torchvision

require_torchvision()  # before torchtrt_plugins.vision, which stands in for its ops where they do not load
if "torchtrt_plugins.vision" in sys.modules and "torchvision" not in sys.modules:
    pytest.skip("needs torchvision on the path before torchtrt_plugins.vision is imported", allow_module_level=True)

import multi_scale_cases  # noqa: E402

import torchtrt_plugins  # noqa: E402
from torchtrt_plugins import vision  # noqa: E402

_WHERE = torch.ops.aten.where.self


def op(levels: int):
    return getattr(torch.ops.torchtrt_vision, f"multi_scale_roi_align_{levels}").default


def _exported(model, tensors, decompose=True):
    with vision.exportable(), torch.no_grad():
        program = torch.export.export(model.eval(), tensors)
    return program.run_decompositions() if decompose else program


def _calls(gm, target=None):
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    return nodes if target is None else [n for n in nodes if n.target == target]


@pytest.mark.parametrize(
    ("levels", "images", "decompose"),
    [(2, 1, False), (3, 2, False), (3, 2, True), (5, 1, True)],
    ids=["2-export", "3-export", "3-decomposed", "5-decomposed"],
)
def test_the_exportable_pooler_lowers_to_one_op(levels, images, decompose):
    tensors = multi_scale_cases.inputs(levels=levels, images=images)
    model = multi_scale_cases.TorchvisionPooler(levels, images)
    program = _exported(model, tensors, decompose)
    assert len(_calls(program.graph_module, _WHERE)) == levels - 1
    gm, report = torchtrt_plugins.lower_with_report(program.module())
    assert report["multi_scale_roi_align"] == 1
    assert len(_calls(gm, op(levels))) == 1
    left = {str(n.target) for n in _calls(gm)} & {"aten.where.self", "aten.eq.Scalar", "torchvision.roi_align.default"}
    assert not left
    torch.testing.assert_close(gm(*tensors), model(*tensors))


def test_the_op_takes_the_poolers_scales_and_level_mapping():
    tensors = multi_scale_cases.inputs(levels=3, images=2)
    model = multi_scale_cases.TorchvisionPooler(3, 2, output_size=(5, 4), canonical_scale=112, canonical_level=3)
    gm, report = torchtrt_plugins.lower_with_report(_exported(model, tensors).module())
    (node,) = _calls(gm, op(3))
    assert node.args[4:] == (0.25, 0.125, 0.0625, 5, 4, 2, 112.0, 3, False)
    torch.testing.assert_close(gm(*tensors), model(*tensors))


@pytest.fixture(scope="module")
def three_levels():
    """(program, model, inputs): the pooler of 3 levels over one image, exported and decomposed."""
    tensors = multi_scale_cases.inputs(levels=3, images=1)
    model = multi_scale_cases.TorchvisionPooler(3, 1)
    return _exported(model, tensors), model, tensors


def test_a_box_of_negative_area_is_zero_as_in_torchvision(three_levels):
    """LevelMapper's level of such a box is NaN cast to int64, no level's: torchvision's pooler and the op leave its
    row zero, the exported where chain gives it the last level's pooling."""
    program, model, tensors = three_levels
    tensors = list(tensors)
    gm, report = torchtrt_plugins.lower_with_report(program.module())
    assert report["multi_scale_roi_align"] == 1
    tensors[3] = tensors[3].clone()
    tensors[3][0] = torch.tensor([60.0, 20.0, 40.0, 90.0])  # x1 < x0
    expected = model(*tensors)
    assert torch.equal(expected[0], torch.zeros_like(expected[0]))
    torch.testing.assert_close(gm(*tensors), expected)
    assert program.module()(*tensors)[0].abs().sum() > 0


def _swap_level_constants(graph, wheres, aligns):
    inner, outer = wheres[0].args[0], wheres[1].args[0]
    inner.args, outer.args = (inner.args[0], outer.args[1]), (outer.args[0], inner.args[1])


def _wrong_level_constant(graph, wheres, aligns):
    test = wheres[1].args[0]
    test.args = (test.args[0], 2)


def _other_rois(graph, wheres, aligns):
    rois = aligns[1].args[1]
    with graph.inserting_before(aligns[1]):
        flipped = graph.call_function(torch.ops.aten.flip.default, (rois, [0]))
    flipped.meta["val"] = rois.meta["val"]
    aligns[1].args = (aligns[1].args[0], flipped, *aligns[1].args[2:])


def _missing_level(graph, wheres, aligns):
    """Level 1 of 3 dropped: boxes of that level take level 2's pooling."""
    inner, outer = wheres
    outer.args = (outer.args[0], outer.args[1], inner.args[2])
    test = inner.args[0]
    for node in (inner, test, aligns[1]):
        graph.erase_node(node)


@pytest.mark.parametrize("change", [_swap_level_constants, _wrong_level_constant, _other_rois, _missing_level])
def test_a_chain_that_differs_is_left_alone(change, three_levels):
    program, _, tensors = three_levels
    gm = program.module()
    wheres, aligns = _calls(gm, _WHERE), [n for n in _calls(gm) if "roi_align" in str(n.target)]
    assert len(wheres) == 2 and len(aligns) == 3
    change(gm.graph, wheres, aligns)
    gm.graph.lint()
    gm.recompile()
    expected = gm(*tensors)
    lowered, report = torchtrt_plugins.lower_with_report(gm)
    assert report["multi_scale_roi_align"] == 0
    assert not _calls(lowered, op(2)) and not _calls(lowered, op(3))
    torch.testing.assert_close(lowered(*tensors), expected)


def test_the_zoos_faster_rcnn_reports_the_match():
    """The zoo's smallest detector (both its levels at scale 1/32 at the zoo's 64 x 64 image): its box head's pooler.
    Its outputs against eager: tests/tt/test_zoo_tt.py, through Torch-TensorRT's partitioning."""
    from torchtrt_plugins import zoo

    program, _, _ = zoo.export("fasterrcnn_mobilenet_v3_large_320_fpn")
    gm, report = torchtrt_plugins.lower_with_report(program.module())
    assert report["multi_scale_roi_align"] == 1
    assert len(_calls(gm, op(2))) == 1
