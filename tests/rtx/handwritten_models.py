"""ONNX graphs with our plugin nodes written by hand, as users insert plugins (onnx.helper, as onnx-graphsurgeon
writes them): the node's op_type is the plugin name, its attributes are ``plugin_version``, ``plugin_namespace``, the
op's scalar arguments and, for a weight given as a field, its elements and dims, nothing derived by torchtrt_plugins.
Used by test_onnx_parser.py, whose worker parses them with TensorRT-RTX's ONNX parser and builds a plan."""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx import ModelProto, TensorProto, helper

#: A size tensor's marker in a field: the SymInt comes from a shape input (csrc/sdk/ttp_sdk.h).
SHAPE_INPUT_MARKER = -(2**31)


@dataclass
class Handwritten:
    id: str
    model: ModelProto
    #: input name -> (min, opt, max) dims
    profile: dict[str, list[list[int]]]
    #: per plugin output: its rank and, where known, dims (-1 for a dynamic one)
    outputs: list[list[int]] = field(default_factory=list)
    declared: bool = False  # needs the declared libraries (examples/myops, torchtrt_plugins.vision)
    #: Built with PreviewFeature.ALIASED_PLUGIN_IO_10_03, under which the builder asks getAliasedInput.
    aliased_io: bool = False


def _model(name: str, node, inputs, outputs, extra_nodes=()) -> ModelProto:
    graph = helper.make_graph([*extra_nodes, node], name, inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _plugin(op_type: str, inputs, outputs, version: str, namespace: str, **attributes):
    return helper.make_node(op_type, inputs, outputs, plugin_version=version, plugin_namespace=namespace, **attributes)


def _value(name: str, dtype: int, dims: list) -> object:
    return helper.make_tensor_value_info(name, dtype, dims)


def models() -> list[Handwritten]:
    f16, f32, i32, i64 = TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
    cases = []

    for rank in (2, 3):
        dims = ["b", "s", 64][-rank:]
        node = _plugin("RMSNorm", ["x", "w"], ["y"], "3", "torchtrt", eps=1e-5)
        model = _model("rms_norm", node, [_value("x", f16, dims), _value("w", f16, [64])], [_value("y", f16, dims)])
        shapes = [[1] * (rank - 1) + [64], [4] * (rank - 1) + [64], [16] * (rank - 1) + [64]]
        cases.append(Handwritten(f"rms_norm-rank{rank}", model, {"x": shapes}, [[-1] * (rank - 1) + [64]]))

    # The weight baked into the node as a TENSOR attribute (kFLOAT16 for the plugin) and its dims as INTS (kINT32):
    # the plugin has one input.
    weight = helper.make_tensor("weight", f16, [64], [0.5 + i / 64 for i in range(64)])
    node = _plugin("RMSNorm", ["x"], ["y"], "3", "torchtrt", eps=1e-5, weight=weight, weight_shape=[64])
    model = _model("rms_norm_weight_field", node, [_value("x", f16, ["b", 64])], [_value("y", f16, ["b", 64])])
    shapes = [[1, 64], [4, 64], [16, 64]]
    cases.append(Handwritten("rms_norm-weight_field", model, {"x": shapes}, [[-1, 64]]))

    # The residual updated in place: the plugin's second output, aliased to input 1.
    dims = ["b", "s", 64]
    node = _plugin("AddRMSNorm", ["x", "residual", "w"], ["y", "residual_out"], "1", "torchtrt", eps=1e-6)
    inputs = [_value("x", f16, dims), _value("residual", f16, dims), _value("w", f16, [64])]
    model = _model("add_rms_norm", node, inputs, [_value("y", f16, dims), _value("residual_out", f16, dims)])
    shapes = [[1, 1, 64], [4, 4, 64], [16, 16, 64]]
    # Built with the preview feature: NVIDIA's builder refuses an aliased output without it (test_builder.py).
    profile = {"x": shapes, "residual": shapes}
    cases.append(Handwritten("add_rms_norm", model, profile, [[-1, -1, 64]] * 2, aliased_io=True))

    # Quantized output, as an explicitly quantized graph holds it: the scale an initializer shared by the plugin and
    # the DequantizeLinear that consumes the plugin's FP8 / INT8 output.
    for op_type, element in (("RMSNormFP8", TensorProto.FLOAT8E4M3FN), ("RMSNormINT8", TensorProto.INT8)):
        dims = ["b", "s", 64]
        node = _plugin(op_type, ["x", "w", "scale"], ["q"], "1", "torchtrt", eps=1e-5)
        graph = helper.make_graph(
            [node, helper.make_node("DequantizeLinear", ["q", "scale"], ["y"])],
            op_type.lower(),
            [_value("x", f16, dims), _value("w", f16, [64])],
            [_value("y", f32, dims)],
            initializer=[helper.make_tensor("scale", f32, [], [0.03])],
            value_info=[_value("q", element, dims)],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
        shapes = [[1, 1, 64], [4, 4, 64], [16, 16, 64]]
        cases.append(Handwritten(f"{op_type}-dequantized", model, {"x": shapes}, [[-1, -1, 64]]))

    node = _plugin("PadTo", ["x"], ["y"], "2", "torchtrt", height=8, width=12, value=0.0)
    model = _model("pad_to", node, [_value("x", f16, ["b", 3, "h", "w"])], [_value("y", f16, None)])
    profile = {"x": [[1, 3, 4, 4], [2, 3, 16, 16], [4, 3, 32, 32]]}
    cases.append(Handwritten("pad_to", model, profile, [[-1, 3, 8, 12]]))

    # The height from another tensor's shape: a shape input, its field holding the marker.
    height = [
        helper.make_node("Shape", ["like"], ["like_shape"]),
        helper.make_node("Slice", ["like_shape", "two", "three"], ["rows"]),
    ]
    node = _plugin(
        "PadTo",
        ["x", "rows"],
        ["y"],
        "2",
        "torchtrt",
        height=SHAPE_INPUT_MARKER,
        width=12,
        value=1.0,
        tensorrt_plugin_shape_input_indices=[1],
    )
    graph = helper.make_graph(
        [*height, node],
        "pad_to_like",
        [_value("x", f16, [1, 3, 5, 5]), _value("like", f16, [1, 1, "n", 7])],
        [_value("y", f16, None)],
        initializer=[helper.make_tensor("two", i64, [1], [2]), helper.make_tensor("three", i64, [1], [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    cases.append(
        Handwritten(
            "pad_to-shape-input", model, {"like": [[1, 1, 1, 7], [1, 1, 9, 7], [1, 1, 40, 7]]}, [[1, 3, -1, 12]]
        )
    )

    node = _plugin("MaskedRows", ["x", "mask"], ["y", "kept"], "3", "torchtrt")
    model = _model(
        "masked_rows",
        node,
        [_value("x", f32, ["n", 4]), _value("mask", i32, ["n"])],
        [_value("y", f32, None), _value("kept", i64, [])],
    )
    profile = {"x": [[1, 4], [64, 4], [256, 4]], "mask": [[1], [64], [256]]}
    cases.append(Handwritten("masked_rows", model, profile, [[-1, 4], []]))

    node = _plugin(
        "RoIAlign",
        ["input", "rois"],
        ["y"],
        "2",
        "torchtrt_vision",
        spatial_scale=0.5,
        pooled_height=3,
        pooled_width=2,
        sampling_ratio=2,
        aligned=1,
    )
    model = _model(
        "roi_align",
        node,
        [_value("input", f32, [1, 8, 16, 16]), _value("rois", f32, ["k", 5])],
        [_value("y", f32, None)],
    )
    cases.append(Handwritten("roi_align", model, {"rois": [[1, 5], [8, 5], [32, 5]]}, [[-1, 8, 3, 2]], declared=True))

    scalars = {"stride_h": 1, "stride_w": 2, "pad_h": 1, "pad_w": 1, "dilation_h": 1, "dilation_w": 1, "groups": 1}
    node = _plugin(
        "DeformConv2d",
        ["input", "weight", "offset", "mask", "bias"],
        ["y"],
        "1",
        "torchtrt_vision",
        **scalars,
        offset_groups=1,
        use_mask=1,
    )
    model = _model(
        "deform_conv2d",
        node,
        [
            _value("input", f16, ["n", 4, 8, 8]),
            _value("weight", f16, [6, 4, 3, 3]),
            _value("offset", f16, ["n", 18, 8, 4]),
            _value("mask", f16, ["n", 9, 8, 4]),
            _value("bias", f16, [6]),
        ],
        [_value("y", f16, None)],
    )
    profile = {name: [[b, c, 8, w] for b in (1, 2, 4)] for name, c, w in (("input", 4, 8), ("offset", 18, 4))}
    profile["mask"] = [[b, 9, 8, 4] for b in (1, 2, 4)]
    cases.append(Handwritten("deform_conv2d", model, profile, [[-1, 6, 8, 4]], declared=True))

    node = _plugin("NMS", ["dets", "scores"], ["keep", "count"], "2", "torchtrt_vision", iou_threshold=0.5)
    model = _model(
        "nms",
        node,
        [_value("dets", f32, ["n", 4]), _value("scores", f32, ["n"])],
        [_value("keep", i64, None), _value("count", i64, [])],
    )
    profile = {"dets": [[1, 4], [32, 4], [128, 4]], "scores": [[1], [32], [128]]}
    cases.append(Handwritten("nms", model, profile, [[-1], []], declared=True))

    node = _plugin("ScaledAdd", ["x", "y"], ["z"], "1", "myops", alpha=0.5)
    model = _model(
        "scaled_add", node, [_value("x", f32, ["n", 3, 5]), _value("y", f32, ["n", 3, 5])], [_value("z", f32, None)]
    )
    profile = {"x": [[1, 3, 5], [4, 3, 5], [8, 3, 5]], "y": [[1, 3, 5], [4, 3, 5], [8, 3, 5]]}
    cases.append(Handwritten("scaled_add", model, profile, [[-1, 3, 5]], declared=True))

    node = _plugin("FilterAbove", ["x"], ["y", "count"], "1", "myops", threshold=0.25)
    model = _model(
        "filter_above", node, [_value("x", f32, ["n", 7])], [_value("y", f32, None), _value("count", i64, [])]
    )
    cases.append(Handwritten("filter_above", model, {"x": [[1, 7], [4, 7], [8, 7]]}, [[-1], []], declared=True))
    cases.append(nvidia_efficient_nms())
    return cases


#: An EfficientNMS_TRT node's attributes as NVIDIA's plugin takes them (plugin/efficientNMSPlugin: FLOAT thresholds,
#: INT flags and sizes), with NVIDIA's output names.
NVIDIA_EFFICIENT_NMS_ATTRIBUTES = {
    "score_threshold": 0.25,
    "iou_threshold": 0.45,
    "max_output_boxes": 100,
    "background_class": -1,
    "score_activation": 0,
    "class_agnostic": 0,
    "box_coding": 1,
}
NVIDIA_EFFICIENT_NMS_OUTPUTS = ["num_detections", "detection_boxes", "detection_scores", "detection_classes"]


def nvidia_efficient_nms(op_type: str = "EfficientNMS", anchors: bool = False) -> Handwritten:
    """A node made for NVIDIA's EfficientNMS_TRT with its op type renamed to ours (and our plugin namespace, which
    NVIDIA's node leaves empty); with ``anchors``, NVIDIA's fused box decoder input, which ours refuses."""
    f32, i32 = TensorProto.FLOAT, TensorProto.INT32
    inputs = ["boxes", "scores", *(["anchors"] if anchors else [])]
    node = _plugin(op_type, inputs, NVIDIA_EFFICIENT_NMS_OUTPUTS, "1", "torchtrt", **NVIDIA_EFFICIENT_NMS_ATTRIBUTES)
    values = [_value("boxes", f32, ["b", "n", 4]), _value("scores", f32, ["b", "n", 80])]
    values += [_value("anchors", f32, [1, "n", 4])] if anchors else []
    outputs = [
        _value("num_detections", i32, ["b", 1]),
        _value("detection_boxes", f32, ["b", 100, 4]),
        _value("detection_scores", f32, ["b", 100]),
        _value("detection_classes", i32, ["b", 100]),
    ]
    model = _model("efficient_nms_nvidia", node, values, outputs)
    profile = {
        "boxes": [[1, 10, 4], [2, 1000, 4], [8, 20000, 4]],
        "scores": [[1, 10, 80], [2, 1000, 80], [8, 20000, 80]],
    }
    if anchors:
        profile["anchors"] = [[1, 10, 4], [1, 1000, 4], [1, 20000, 4]]
    shapes = [[-1, 1], [-1, 100, 4], [-1, 100], [-1, 100]]
    return Handwritten("efficient_nms-nvidia_node" + ("-anchors" if anchors else ""), model, profile, shapes)


#: The Deformable DETR sizes of NVIDIA's node below: four levels of an 800x1066 image at strides 8 to 64.
DETR_MAPS = [(100, 134), (50, 67), (25, 34), (13, 17)]


def nvidia_deformable_attention_models() -> list[Handwritten]:
    """A node made for NVIDIA's ``MultiscaleDeformableAttnPlugin_TRT`` (five inputs in its order, no attributes;
    spatial shapes and level starts as int32 initializers, as its plugin takes them; fp16 value, locations and weights)
    with its op type renamed to ours: with nothing else changed (``op_type_only``), and with the namespace attribute our
    creator is registered under (``with_namespace``)."""
    f16, i32 = TensorProto.FLOAT16, TensorProto.INT32
    sizes = [h * w for h, w in DETR_MAPS]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    initializers = [
        helper.make_tensor("spatial_shapes", i32, [4, 2], [d for hw in DETR_MAPS for d in hw]),
        helper.make_tensor("level_start_index", i32, [4], starts),
    ]
    inputs = [
        _value("value", f16, ["b", sum(sizes), 8, 32]),
        _value("sampling_locations", f16, ["b", "q", 8, 4, 4, 2]),
        _value("attention_weights", f16, ["b", "q", 8, 4, 4]),
    ]
    names = ["value", "spatial_shapes", "level_start_index", "sampling_locations", "attention_weights"]
    profile = {
        "value": [[1, sum(sizes), 8, 32], [2, sum(sizes), 8, 32], [8, sum(sizes), 8, 32]],
        "sampling_locations": [[1, 1, 8, 4, 4, 2], [2, 900, 8, 4, 4, 2], [8, sum(sizes), 8, 4, 4, 2]],
        "attention_weights": [[1, 1, 8, 4, 4], [2, 900, 8, 4, 4], [8, sum(sizes), 8, 4, 4]],
    }
    cases = []
    for variant, attributes in (("op_type_only", {}), ("with_namespace", {"plugin_namespace": "torchtrt"})):
        node = helper.make_node("MultiScaleDeformableAttention", names, ["out"], **attributes)
        graph = helper.make_graph(
            [node], f"msda_{variant}", inputs, [_value("out", f16, None)], initializer=initializers
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        cases.append(Handwritten(f"nvidia_msda-{variant}", model, profile, [[-1, -1, 256]]))
    return cases
