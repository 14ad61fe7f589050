"""Lowering on CUDA: the decoder block's norms run in our CUDA kernel and match the original graph."""

import copy

import pytest
import torch
from models import decoder_block

from torchtrt_plugins import lowering
from torchtrt_plugins.ops import rms_norm

RMS_NORM = torch.ops.torchtrt.rms_norm.default
HIDDEN = 256


@pytest.fixture(autouse=True)
def _lowering_on():
    lowering.set_enabled(True)
    yield
    lowering.set_enabled(None)


@pytest.mark.parametrize("decompose", [True, False], ids=["decomposed", "exported"])
@pytest.mark.parametrize("style", ["llama", "t5", "nn"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_decoder_block_lowered_matches_original(dtype, style, decompose):
    block = decoder_block(style, hidden_size=HIDDEN, num_heads=8, intermediate_size=512).to("cuda", dtype)
    x = torch.randn(3, 33, HIDDEN, device="cuda", generator=torch.Generator("cuda").manual_seed(0)).to(dtype)
    program = torch.export.export(block, (x,))
    original = (program.run_decompositions() if decompose else program).module()
    lowered, report = lowering.lower_with_report(copy.deepcopy(original))

    assert report == {"rms_norm": 2, "multi_scale_roi_align": 0, "multi_scale_deformable_attention": 0}
    nodes = [node for node in lowered.graph.nodes if node.target == RMS_NORM]
    assert len(nodes) == 2 and all(node.meta["val"].device.type == "cuda" for node in nodes)
    expected, actual = original(x), lowered(x)
    assert actual.dtype == expected.dtype == dtype and actual.device == expected.device
    tolerance = rms_norm.SPEC.tolerance(dtype)
    torch.testing.assert_close(actual, expected, atol=tolerance.atol, rtol=tolerance.rtol)
