"""Hugging Face decoders from tiny configs (``tests/hf_models.py``) through Torch-TensorRT's own pipeline, with the
test-only addPluginV3 adapter (issue 25): after its decompositions our lowering pass turns every norm module into one
``torchtrt.rms_norm`` of the right kind, all in the TensorRT partition, and the partitioned model's logits match
eager's; ``torch.compile(backend="tensorrt")`` partitions the same way, and RTX's builder builds the plan.
"""

from __future__ import annotations

import pytest
import torch
import tt_helpers as tt
from hf_models import (
    DTYPES,
    EXPORT_SHAPE,
    MODELS,
    RUN_SHAPE,
    build,
    export,
    input_ids,
    norm_kinds,
    norm_modules,
    op_kinds,
    tolerance,
    torch_tensorrt_inputs,
)

RMS_NORM = "torchtrt.rms_norm.default"
NORM_OPS = ("aten.rsqrt", "aten.sqrt", "aten.mean", "aten.reciprocal", "aten.rms_norm", "aten._fused_rms_norm")


def _nodes(partitioned: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [node for sub in partitioned.children() for node in getattr(sub, "graph", torch.fx.Graph()).nodes]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", MODELS)
def test_every_norm_lowered_into_the_tensorrt_partition(name, dtype, dynamic):
    model = build(name, dtype)
    partitioned = tt.dryrun(export(model, dynamic), torch_tensorrt_inputs(dynamic))
    expected = norm_kinds(model.model)
    assert tt.placement(partitioned) == {"trt": [RMS_NORM] * sum(expected.values()), "torch": []}
    nodes = _nodes(partitioned)
    assert op_kinds([n for n in nodes if str(n.target) == RMS_NORM]) == expected
    assert not [n for n in nodes if str(n.target).startswith(NORM_OPS)]
    ids = input_ids(RUN_SHAPE if dynamic else EXPORT_SHAPE, seed=1)
    torch.testing.assert_close(partitioned(ids), model(ids), **tolerance(dtype))


@pytest.mark.parametrize("name", MODELS)
def test_torch_compile_backend_lowers_every_norm(name):
    model = build(name, "bfloat16")
    ids = input_ids(EXPORT_SHAPE)
    logits, placements = tt.torch_compile_dryrun(model, ids)
    assert placements == [{"trt": [RMS_NORM] * sum(norm_kinds(model.model).values()), "torch": []}]
    torch.testing.assert_close(logits, model(ids), **tolerance("bfloat16"))


@pytest.mark.parametrize("name", MODELS)
def test_plan_builds_for_each_norm_class_of_the_model(name):
    """RTX's builder builds a plan holding our plugin from each norm class the model's code has (a whole decoder has
    ops RTX converts no engine for, ``cumsum`` in its mask, so the classes go alone); Gemma's carries its offset."""
    tt.require_plugin_library()
    model = build(name, "float16", layers=1)
    for module in {type(norm): norm for norm in norm_modules(model.model)}.values():
        hidden = module.weight.shape[0] if module.weight is not None else module.normalized_shape[0]
        x = torch.randn(2, 5, hidden).to(torch.float16)
        with tt.converter_calls() as calls:
            plan = tt.serialized_engine(torch.export.export(module, (x,)), [x])
        offset = 1.0 if type(module).__name__.startswith("Gemma") else 0.0
        assert [call.field_value("weight_offset") for call in calls] == [offset] and b"RMSNorm" in plan
