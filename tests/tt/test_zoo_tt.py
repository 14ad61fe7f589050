"""The detector zoo (issue 45, ``torchtrt_plugins.zoo``) through Torch-TensorRT's own pipeline: each model exported
(torchvision's within ``vision.exportable()``), partitioned with the test-only addPluginV3 adapter (as full
TensorRT runs it) with us and without us (every op with a converter of ours in ``torch_executed_ops``, lowering off),
and with us as full TensorRT partitions it (``full_tensorrt``), the engines and what falls back counted; the
partitioned graph, its TensorRT segments run by our graph runner (``run_graph``: each plugin node through the
harness), gives the outputs of the model as its library ships it, run eagerly (torchvision's outside
``vision.exportable()``).

The counts are today's; a count that an op being added will change says which op.
"""

from __future__ import annotations

import collections

import pytest
import torch

#: name -> (engines without us, engines with us, engines with us as full TensorRT partitions, what stays in PyTorch
#: with us in both). Full TensorRT: Torch-TensorRT's own boolean aten.index.Tensor converter (nonzero), registered for
#: full TensorRT only, takes what our masked_rows plugin takes on TensorRT-RTX.
EXPECTED = {
    "fasterrcnn_mobilenet_v3_large_320_fpn": (4, 1, 1, {}),
    # Masks pasted into the image (vision.exportable()'s paste_masks_in_image: two batched matrix products).
    "maskrcnn_resnet50_fpn": (5, 1, 1, {}),
    # aten.topk of k = min(topk_candidates, n), n the data-dependent count of scores above the threshold, and the
    # boolean aten.index.Tensor: ours (converters.aten_fallbacks) where Torch-TensorRT's validators reject them.
    "retinanet_resnet50_fpn": (4, 1, 1, {}),
    "fcos_resnet50_fpn": (4, 1, 1, {}),
    # The same per class (two foreground classes here; 90 with COCO's 91).
    "ssdlite320_mobilenet_v3_large": (4, 1, 1, {}),
    # torchvision.deform_conv2d: our plugin (vision.DEFORM_CONV2D) keeps it in the engine.
    "deform_conv2d": (2, 1, 1, {}),
    "deform_conv2d_mask": (2, 1, 1, {}),
    # avg_pool2d(ceil_mode=True) of RT-DETR's ResNet shortcut: ours (converters.aten_fallbacks) where Torch-TensorRT's
    # validator rejects it.
    "RTDetrModel": (3, 1, 1, {}),
    "RTDetrV2Model": (3, 1, 1, {}),
    # aten.scaled_dot_product_attention whose key and value head dims differ (32 and 16): ours
    # (converters.aten_fallbacks), Torch-TensorRT's validator rejects it.
    "ConditionalDetrModel": (2, 1, 1, {}),
    # aten.baddbmm: Torch-TensorRT 2.13 has no converter and does not decompose it; ours (converters.aten_fallbacks).
    "Mask2FormerModel": (2, 1, 1, {}),
    # aten.isin, aten.cummax and aten.cummin of the special-token masks: Torch-TensorRT 2.13 has no converters; ours
    # (converters.aten_fallbacks).
    "GroundingDinoModel": (2, 1, 1, {}),
    "DeformableDetrModel": (1, 1, 1, {}),
    "DetrModel": (1, 1, 1, {}),
}
ATOL = RTOL = 1e-4


def _zoo():
    from torchvision_site import require_torchvision

    require_torchvision()  # before torchtrt_plugins.vision (imported by the zoo) stands in for its ops
    from torchtrt_plugins import zoo

    return zoo


class _ThroughRunner(torch.nn.Module):
    """A TensorRT segment run by our graph runner: its plugin nodes through the harness, the rest eagerly."""

    def __init__(self, segment: torch.fx.GraphModule):
        super().__init__()
        self.segment, self.results = segment, []

    def forward(self, *args):
        from zoo_runner import run_through_plugins

        result = run_through_plugins(self.segment, *args)
        self.results.append(result)
        return result.outputs


def _run_segments_through_runner(partitioned: torch.fx.GraphModule, inputs) -> tuple[tuple, int]:
    """The partitioned module's outputs, its engines run by our graph runner; and how many plugin nodes ran."""
    runners = {}
    for name, sub in list(partitioned.named_children()):
        if "_run_on_acc" in name:
            runners[name] = _ThroughRunner(sub)
            setattr(partitioned, name, runners[name])
    try:
        outputs = partitioned(*inputs)
    finally:
        for name, runner in runners.items():
            setattr(partitioned, name, runner.segment)
    return outputs, sum(len(result.results) for runner in runners.values() for result in runner.results)


def _ours_in_engines(partitioned: torch.fx.GraphModule) -> int:
    from zoo_runner import plugin_nodes

    return sum(plugin_nodes(sub) for name, sub in partitioned.named_children() if "_run_on_acc" in name)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_engines_with_and_without_us_and_as_full_tensorrt(name):
    zoo = _zoo()
    program, model, inputs = zoo.export(name)
    without, engines_with_us, engines_as_full_tensorrt, fallback = EXPECTED[name]
    assert zoo.partition(program, inputs, ours=False).engines == without
    full = zoo.partition(program, inputs, ours=True, full_tensorrt=True)
    assert (full.engines, full.fallback) == (engines_as_full_tensorrt, collections.Counter(fallback))
    ours = zoo.partition(program, inputs, ours=True)
    assert (ours.engines, ours.fallback) == (engines_with_us, collections.Counter(fallback))
    with torch.no_grad():
        expected = model(*inputs)  # as its library ships it (torchvision's own loops and guards)
        got, plugin_nodes = _run_segments_through_runner(ours.module, inputs)
    assert plugin_nodes == _ours_in_engines(ours.module)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=ATOL, rtol=RTOL, equal_nan=True)  # masked logits


def test_the_cli_prints_the_table():
    import contextlib
    import io

    _zoo()
    from torchtrt_plugins import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["zoo", "--models", "deform_conv2d"]) == 0
    assert "| `deform_conv2d` | 2 | 1 | — |" in out.getvalue()
