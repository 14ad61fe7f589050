"""The zoo on the GPU (issue 45, item 6): each model run eagerly on CUDA, as its library ships it, and its converted
graph (``zoo.converted``: exported within ``vision.exportable()``, our lowering applied) run by our graph runner, every
declared op's node (ours and torchvision's) through the harness (the plugin's whole lifecycle, enqueued on the GPU),
the rest eagerly on CUDA: the outputs agree within tolerance. Their times: ``torchtrt-plugins zoo --time``
(``torchtrt_plugins.benchmarks.zoo_timing``)."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import pytest  # noqa: E402
import torch  # noqa: E402
from torchvision_site import require_torchvision  # noqa: E402
from zoo_runner import plugin_nodes, run_through_plugins  # noqa: E402

#: The zoo's models (``zoo.MODELS``), named here so that collecting this file imports neither torchvision nor
#: transformers; ``test_every_zoo_model_is_here`` keeps the two in step.
NAMES = (
    "fasterrcnn_mobilenet_v3_large_320_fpn",
    "maskrcnn_resnet50_fpn",
    "retinanet_resnet50_fpn",
    "fcos_resnet50_fpn",
    "ssdlite320_mobilenet_v3_large",
    "deform_conv2d",
    "deform_conv2d_mask",
    "RTDetrModel",
    "RTDetrV2Model",
    "Mask2FormerModel",
    "GroundingDinoModel",
    "ConditionalDetrModel",
    "DeformableDetrModel",
    "DetrModel",
)
#: Models whose converted graph holds declared ops: torchvision's (nms, roi_align, deform_conv2d) and, from our
#: lowering, multi_scale_deformable_attention (RT-DETR v2's own form of it is not lowered). The rest hold none and
#: run eagerly through the runner too.
WITH_PLUGINS = set(NAMES[:7]) | {"RTDetrModel", "Mask2FormerModel", "GroundingDinoModel", "DeformableDetrModel"}
ATOL = RTOL = 1e-4


def _zoo():
    require_torchvision()  # before torchtrt_plugins.vision (imported by the zoo)
    from torchtrt_plugins import zoo

    return zoo


def test_every_zoo_model_is_here():
    assert set(NAMES) == set(_zoo().MODELS)


@pytest.mark.parametrize("name", NAMES)
def test_converted_graph_on_our_plugins_equals_eager_on_cuda(name):
    zoo = _zoo()
    program, model, inputs = zoo.export(name, device="cuda")
    graph = zoo.converted(program)
    with torch.no_grad():
        expected = model(*inputs)  # as its library ships it
        result = run_through_plugins(graph, *inputs)
    assert not result.fell_back, f"plugin nodes computed eagerly on a GPU: {result.fell_back}"
    assert len(result.results) == plugin_nodes(graph)
    if name in WITH_PLUGINS:
        assert result.results, f"{name}: no declared op in the converted graph"
    got, want = torch.utils._pytree.tree_leaves(result.outputs), torch.utils._pytree.tree_leaves(expected)
    assert len(got) == len(want)
    for g, e in zip(got, want):
        assert g.device.type == "cuda"
        torch.testing.assert_close(g, e, atol=ATOL, rtol=RTOL, equal_nan=True)  # masked logits
