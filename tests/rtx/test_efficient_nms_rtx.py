"""efficient_nms in NVIDIA's registry and builder (TensorRT-RTX, CPU): a plugin made from the fields NVIDIA's
EfficientNMS_TRT creator takes, with NVIDIA's field types; a network whose plugin layer has NVIDIA's optional
anchors input is refused by name. NVIDIA's builder builds the op's plans in test_builder.py; the renamed NVIDIA
node parses and builds through NVIDIA's ONNX parser in test_onnx_parser.py (handwritten_models.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _nvidia import add_plugin_v3
from handwritten_models import NVIDIA_EFFICIENT_NMS_ATTRIBUTES

from torchtrt_plugins.ops import efficient_nms

KEY = efficient_nms.SPEC.creator_key


def _nvidia_fields(trt: Any, **changes: Any) -> Any:
    """The attributes as NVIDIA's creator lists them: thresholds FLOAT32, the rest INT32."""
    fields = []
    for name, value in {**NVIDIA_EFFICIENT_NMS_ATTRIBUTES, **changes}.items():
        if name.endswith("_threshold"):
            fields.append(trt.PluginField(name, np.array([value], np.float32), trt.PluginFieldType.FLOAT32))
        else:
            fields.append(trt.PluginField(name, np.array([value], np.int32), trt.PluginFieldType.INT32))
    return trt.PluginFieldCollection(fields)


@pytest.mark.parametrize("phase", ["BUILD", "RUNTIME"])
def test_nvidia_s_fields_create_the_plugin(trt, registry, trt_log, phase):
    creator = registry.get_creator(*KEY)
    with trt_log.capture() as records:
        plugin = creator.create_plugin("nms", _nvidia_fields(trt), getattr(trt.TensorRTPhase, phase))
    assert plugin is not None and trt_log.errors(records) == []
    assert plugin.get_capability_interface(trt.PluginCapabilityType.BUILD).num_outputs == 4


@pytest.mark.parametrize(
    "changes, field",
    [({"box_coding": 2}, "box_coding"), ({"iou_threshold": 0.0}, "iou_threshold"), ({"max_output_boxes": 0}, "max")],
)
def test_values_nvidia_refuses_too_are_refused_by_name(trt, registry, trt_log, changes, field):
    creator = registry.get_creator(*KEY)
    with trt_log.capture() as records:
        plugin = creator.create_plugin("nms", _nvidia_fields(trt, **changes), trt.TensorRTPhase.BUILD)
    assert plugin is None
    (error,) = trt_log.errors(records)
    assert error.message.startswith("torchtrt::efficient_nms") and f"'{field}" in error.message, error.message


def test_the_anchors_input_is_refused_by_name(trt, registry, trt_log):
    reason = add_plugin_v3.unavailable_reason(trt)
    if reason:
        pytest.skip(f"rtx tier: {reason}")
    plugin = registry.get_creator(*KEY).create_plugin("nms", _nvidia_fields(trt), trt.TensorRTPhase.BUILD)
    builder = trt.Builder(trt_log.logger)
    network = builder.create_network(0)
    inputs = [
        network.add_input("boxes", trt.float32, (2, 50, 4)),
        network.add_input("scores", trt.float32, (2, 50, 80)),
        network.add_input("anchors", trt.float32, (1, 50, 4)),
    ]
    with trt_log.capture() as records, pytest.raises(RuntimeError, match="the network refused the plugin layer"):
        add_plugin_v3.add_plugin_v3(network, inputs, [], plugin)
    messages = " ".join(r.message for r in trt_log.errors(records))
    assert "torchtrt::efficient_nms" in messages and "expected 2 inputs" in messages and "got 3" in messages, messages
