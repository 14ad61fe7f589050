"""efficient_nms on the CPU: declaration (NVIDIA's EfficientNMS_TRT attributes), reference against hand-computed
cases and a brute-force walk, fake kernel, bad input named, converter plan and ONNX export."""

import props
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from torchtrt_plugins import SpecError, converters
from torchtrt_plugins.ops import efficient_nms

SPEC = efficient_nms.SPEC
OP = torch.ops.torchtrt.efficient_nms
#: NVIDIA's EfficientNMS_TRT attributes, in its creator's order (plugin/efficientNMSPlugin/efficientNMSPlugin.cpp).
NVIDIA_ATTRIBUTES = [
    "score_threshold",
    "iou_threshold",
    "max_output_boxes",
    "background_class",
    "score_activation",
    "class_agnostic",
    "box_coding",
]


def test_spec_follows_nvidia_s_contract():
    assert SPEC.qualname == "torchtrt::efficient_nms"
    assert SPEC.creator_key == ("EfficientNMS", "1", "torchtrt")
    assert [f.name for f in SPEC.fields] == NVIDIA_ATTRIBUTES
    assert [f.name for f in SPEC.fields if f.required] == ["score_threshold", "iou_threshold", "max_output_boxes"]
    assert SPEC.num_plugin_outputs == 4 and not SPEC.requires_output_allocator
    assert SPEC.input("boxes").dtypes == (torch.float32, torch.float16)
    schema = str(OP.default._schema)
    assert schema.endswith(
        "-> (Tensor num_detections, Tensor detection_boxes, Tensor detection_scores, Tensor detection_classes)"
    )


def _corners(*boxes):
    return torch.tensor([boxes], dtype=torch.float32)


def test_hand_computed_per_class_and_agnostic():
    # Boxes 0 and 1 overlap with IoU 81 / 119 (0.68); box 2 is apart. Class 0 scores: 0.9, 0.8, 0.1; class 1: 0.7 on
    # box 1 only.
    boxes = _corners((0, 0, 10, 10), (1, 1, 11, 11), (50, 50, 60, 60))
    scores = torch.tensor([[[0.9, 0.0], [0.8, 0.7], [0.1, 0.0]]])
    num, det_boxes, det_scores, det_classes = OP(boxes, scores, 0.05, 0.5, 4)
    # Per class: box 1 is suppressed in class 0 (by box 0) and kept in class 1.
    assert num.tolist() == [[3]]
    assert det_scores[0].tolist() == pytest.approx([0.9, 0.7, 0.1, 0.0])
    assert det_classes.tolist() == [[0, 1, 0, 0]]
    assert det_boxes[0, :3].tolist() == [[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]]
    assert det_boxes[0, 3].tolist() == [0, 0, 0, 0]
    num, _, det_scores, det_classes = OP(boxes, scores, 0.05, 0.5, 4, class_agnostic=True)
    assert num.tolist() == [[2]] and det_scores[0].tolist() == pytest.approx([0.9, 0.1, 0.0, 0.0])
    # An IoU equal to the threshold suppresses (NVIDIA compares >=).
    num, *_ = OP(boxes, scores, 0.05, 81 / 119, 4, class_agnostic=True)
    assert num.tolist() == [[2]]
    num, *_ = OP(boxes, scores, 0.05, 0.69, 4, class_agnostic=True)
    assert num.tolist() == [[3]]


def test_thresholds_background_k_and_ties():
    boxes = _corners((0, 0, 1, 1), (5, 5, 6, 6), (10, 10, 11, 11), (20, 20, 21, 21))
    scores = torch.tensor([[[0.5, 0.3], [0.5, 0.2], [0.5, 0.25], [0.29, 0.9]]])
    num, _, det_scores, det_classes = OP(boxes, scores, 0.3, 0.5, 8)  # a score equal to the threshold is kept
    assert num.tolist() == [[5]]
    assert det_scores[0, :5].tolist() == pytest.approx([0.9, 0.5, 0.5, 0.5, 0.3])
    assert det_classes[0, :5].tolist() == [1, 0, 0, 0, 1]
    # Ties by lower flat index n * C + c: the three 0.5 are boxes 0, 1, 2 in that order.
    _, det_boxes, _, _ = OP(boxes, scores, 0.3, 0.5, 8)
    assert det_boxes[0, 1:4, 0].tolist() == [0, 5, 10]
    num, _, _, det_classes = OP(boxes, scores, 0.3, 0.5, 8, background_class=1)
    assert num.tolist() == [[3]] and det_classes[0, :3].tolist() == [0, 0, 0]
    num, det_boxes, det_scores, _ = OP(boxes, scores, 0.3, 0.5, 2)  # K rows only
    assert (
        num.tolist() == [[2]] and det_boxes.shape == (1, 2, 4) and det_scores[0].tolist() == pytest.approx([0.9, 0.5])
    )


def test_center_size_and_swapped_corners_and_sigmoid():
    center = torch.tensor([[[5.0, 5.0, 10.0, 10.0], [6.0, 6.0, 10.0, 10.0]]])
    scores = torch.tensor([[[2.0], [1.0]]])  # raw: logit space
    num, det_boxes, det_scores, _ = OP(center, scores, 0.5, 0.5, 3, score_activation=True, box_coding=1)
    assert num.tolist() == [[1]]  # IoU 81 / 119 >= 0.5
    assert det_boxes[0, 0].tolist() == [0, 0, 10, 10]  # output as corners
    torch.testing.assert_close(det_scores[0, 0], torch.sigmoid(torch.tensor(2.0)))
    # sigmoid(-1) < 0.3 <= sigmoid(1): the threshold is logit(0.3) on the raw score.
    num, *_ = OP(center, torch.tensor([[[1.0], [-1.0]]]), 0.3, 0.9, 3, score_activation=True, box_coding=1)
    assert num.tolist() == [[1]]
    # NVIDIA orders the corners for the IoU only; the output is the box as given.
    swapped = _corners((10, 10, 0, 0), (1, 1, 11, 11))
    num, det_boxes, *_ = OP(swapped, torch.tensor([[[0.9], [0.8]]]), 0.1, 0.5, 3)
    assert num.tolist() == [[1]] and det_boxes[0, 0].tolist() == [10, 10, 0, 0]


def test_per_class_boxes_and_an_empty_image():
    boxes = torch.zeros(2, 2, 2, 4)
    boxes[0, 0, 0] = torch.tensor([0, 0, 10, 10])
    boxes[0, 0, 1] = torch.tensor([100, 100, 110, 110])
    scores = torch.tensor([[[0.9, 0.8], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]])
    num, det_boxes, _, det_classes = OP(boxes, scores, 0.5, 0.5, 2, class_agnostic=True)
    assert num.tolist() == [[2], [0]]
    assert det_boxes[0].tolist() == [[0, 0, 10, 10], [100, 100, 110, 110]] and det_classes[0].tolist() == [0, 1]
    assert bool((det_boxes[1] == 0).all())


def test_only_the_first_4096_candidates_are_suppressed_among():
    # 4097 identical boxes of decreasing score, then one apart with the lowest score: NVIDIA's limit drops it.
    n = 4098
    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0]]).repeat(n, 1)
    boxes[-1] = torch.tensor([5.0, 5.0, 6.0, 6.0])
    scores = torch.linspace(1.0, 0.5, n).reshape(1, n, 1)
    num, det_boxes, *_ = OP(boxes[None], scores, 0.1, 0.5, 10)
    assert num.tolist() == [[1]] and det_boxes[0, 0].tolist() == [0, 0, 1, 1]
    num, *_ = OP(boxes[None, 4000:], scores[:, 4000:], 0.1, 0.5, 10)
    assert num.tolist() == [[2]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("seed", range(6))
def test_reference_matches_a_brute_force_walk(dtype, seed):
    """The reference (per-class greedy NMS, merged) against one walk over every candidate (tests/props.py)."""
    g = torch.Generator().manual_seed(seed)
    coding, per_class, agnostic = seed % 2, seed % 3 == 0, seed % 4 == 1
    boxes, scores = props.draw_nms_inputs(g, 2, 150, 5, box_coding=coding, per_class=per_class, spread=80.0)
    args = (boxes.to(dtype), scores.to(dtype), 0.2, 0.4, 1000, seed % 5 - 1, False, agnostic, coding)
    case = props.Case("efficient_nms", args, note=f"seed {seed}")
    props.check_efficient_nms(case, efficient_nms.reference(*args))
    candidates = ((scores.to(dtype).float() >= 0.2) & (torch.arange(5) != seed % 5 - 1)).sum(dim=(1, 2))
    num = efficient_nms.reference(*args)[0].flatten()
    assert bool((0 < num).all()) and bool((num < candidates).all())  # suppression dropped some, K cut none


def test_fake_kernel_shapes_and_dtypes():
    with FakeTensorMode():
        for boxes in (torch.empty(3, 100, 4, dtype=torch.float16), torch.empty(3, 100, 7, 4, dtype=torch.float16)):
            num, det_boxes, det_scores, det_classes = OP(
                boxes, torch.empty(3, 100, 7, dtype=torch.float16), 0.1, 0.5, 9
            )
            assert num.shape == (3, 1) and num.dtype == torch.int32
            assert det_boxes.shape == (3, 9, 4) and det_boxes.dtype == torch.float16
            assert det_scores.shape == (3, 9) and det_scores.dtype == torch.float16
            assert det_classes.shape == (3, 9) and det_classes.dtype == torch.int32


@pytest.mark.parametrize(
    "boxes, scores, message",
    [
        ((2, 10, 4), (2, 10), r"argument 'scores' must have shape \(B, N, C\), got \(2, 10\)"),
        ((2, 10), (2, 10, 3), r"argument 'boxes' must have shape \(B, N, 4\) or \(B, N, C, 4\), got \(2, 10\)"),
        ((2, 10, 5), (2, 10, 3), r"argument 'boxes' must have shape \(2, 10, 4\) to match 'scores' \(2, 10, 3\)"),
        ((2, 9, 4), (2, 10, 3), r"argument 'boxes' must have shape \(2, 10, 4\) to match"),
        ((1, 10, 4), (2, 10, 3), r"argument 'boxes' must have shape \(2, 10, 4\) to match"),
        ((2, 10, 2, 4), (2, 10, 3), r"argument 'boxes' must have shape \(2, 10, 3, 4\) to match"),
    ],
)
def test_bad_shapes_are_named(boxes, scores, message):
    for mode in (FakeTensorMode(), torch.device("cpu")):
        with mode, pytest.raises(SpecError, match=r"torchtrt.efficient_nms: " + message):
            OP(torch.zeros(boxes), torch.zeros(scores), 0.1, 0.5, 4)


@pytest.mark.parametrize(
    "args, message",
    [
        ((-0.1, 0.5, 4), r"argument 'score_threshold' must be a float >= 0"),
        ((0.1, 0.0, 4), r"argument 'iou_threshold' must be a float > 0"),
        ((0.1, 0.5, 0), r"argument 'max_output_boxes' must be an integer >= 1"),
        ((0.1, 0.5, 4, -1, False, False, 2), r"argument 'box_coding' must be an integer >= 0 and <= 1, got 2"),
        ((0.1, float("nan"), 4), r"argument 'iou_threshold' must be a float"),
    ],
)
def test_bad_fields_are_named(args, message):
    with pytest.raises(SpecError, match=r"torchtrt.efficient_nms: " + message):
        OP(torch.zeros(1, 3, 4), torch.zeros(1, 3, 2), *args)


def test_bad_dtypes_are_named():
    with pytest.raises(SpecError, match=r"efficient_nms: argument 'boxes' must have dtype in \{float32, float16\}"):
        OP(torch.zeros(1, 3, 4, dtype=torch.bfloat16), torch.zeros(1, 3, 2, dtype=torch.bfloat16), 0.1, 0.5, 4)
    with pytest.raises(
        SpecError, match=r"efficient_nms: argument 'scores' must have the same dtype as 'boxes' \(torch.float32\)"
    ):
        OP(torch.zeros(1, 3, 4), torch.zeros(1, 3, 2, dtype=torch.float16), 0.1, 0.5, 4)


class Detector(torch.nn.Module):
    def forward(self, boxes, scores):
        return OP(boxes, scores, 0.25, 0.45, 100, -1, True, False, 1)


def test_plan_from_an_exported_graph_with_a_dynamic_batch_and_box_count():
    dims = {"boxes": {0: torch.export.Dim("b", max=8), 1: torch.export.Dim("n", min=2, max=20000)}}
    dims["scores"] = {0: dims["boxes"][0], 1: dims["boxes"][1]}
    ep = torch.export.export(Detector(), (torch.rand(2, 50, 4), torch.rand(2, 50, 80)), dynamic_shapes=dims)
    (node,) = [n for n in ep.graph_module.graph.nodes if n.target == OP.default]
    call = converters.plan_node(node)
    assert [(f.name, f.value) for f in call.fields[: len(SPEC.fields)]] == [
        ("score_threshold", 0.25),
        ("iou_threshold", 0.45),
        ("max_output_boxes", 100),
        ("background_class", -1),
        ("score_activation", 1),
        ("class_agnostic", 0),
        ("box_coding", 1),
    ]
    assert call.num_outputs == 4 and call.shape_inputs == [] and converters.validate_node(node)
    assert [tuple(v.shape[1:]) for v in node.meta["val"]] == [(1,), (100, 4), (100,), (100,)]


def test_validator_keeps_a_bf16_node_in_pytorch():
    ep = torch.export.export(Detector(), (torch.rand(2, 50, 4), torch.rand(2, 50, 80)))
    (node,) = [n for n in ep.graph_module.graph.nodes if n.target == OP.default]
    assert converters.validate_node(node)
    for arg in node.args[:2]:
        arg.meta["val"] = arg.meta["val"].to(torch.bfloat16)
    assert not converters.validate_node(node)


def test_check_op():
    from torchtrt_plugins.testing import check_op

    g = torch.Generator().manual_seed(3)
    boxes, scores = props.draw_nms_inputs(g, 2, 64, 3, box_coding=0, per_class=False, spread=50.0)
    samples = [(boxes, scores, 0.1, 0.5, 20), (boxes[:1], scores[:1].half().float(), 0.3, 0.4, 7, 1, True, True, 1)]
    report = check_op(OP, samples, reference=efficient_nms.reference)
    assert {"eager", "opcheck", "compile", "plan", "harness"} <= set(report.passed), report


onnx = pytest.importorskip("onnx", reason="the ONNX export test needs onnx (pip install -e '.[test]')")


def test_onnx_node_carries_nvidia_s_attributes():
    pytest.importorskip("onnxscript", reason="the dynamo ONNX exporter needs onnxscript")
    import export_cases

    (case, _) = [c for c in export_cases.cases() if c.op == "efficient_nms"]
    model = case.export("dynamo")
    (node,) = [n for n in model.graph.node if n.op_type == "EfficientNMS"]
    attributes = {a.name: a for a in node.attribute}
    assert set(NVIDIA_ATTRIBUTES) <= set(attributes)
    assert onnx.helper.get_attribute_value(attributes["max_output_boxes"]) == 16
    assert onnx.helper.get_attribute_value(attributes["box_coding"]) == 0
    assert onnx.numpy_helper.to_array(attributes["iou_threshold"].t).reshape(-1).tolist() == [0.5]
    assert len(node.input) == 2 and len(node.output) == 4
