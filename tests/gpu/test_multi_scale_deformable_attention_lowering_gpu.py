"""The lowering of decomposed multi-scale deformable attention on CUDA: each transformers model's pure-PyTorch
``MultiScaleDeformableAttention``, exported on the GPU and lowered, runs our CUDA kernel and equals the model (its own
grid_sample path on fp32 copies, within the op's tolerance for the dtype); so do the tiny zoo models and a Deformable
DETR encoder with a dynamic batch."""

from __future__ import annotations

import copy

import pytest
import torch
from deformable_attention_cases import (
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
from torchtrt_plugins.ops import multi_scale_deformable_attention as msda

MSDA = torch.ops.torchtrt.multi_scale_deformable_attention.default
PASS = "multi_scale_deformable_attention"
MAPS = [(50, 67), (25, 34), (13, 17), (7, 9)]


@pytest.fixture(autouse=True)
def _lowering_on():
    lowering.set_enabled(True)
    yield
    lowering.set_enabled(None)


def _lowered(program: torch.export.ExportedProgram, count: int) -> torch.fx.GraphModule:
    gm, report = lowering.lower_with_report(copy.deepcopy(program.module()))
    nodes = [node for node in gm.graph.nodes if node.target == MSDA]
    assert report[PASS] == count and len(nodes) == count
    assert all(node.meta["val"].device.type == "cuda" for node in nodes)
    return gm


@pytest.mark.parametrize("decompose", [True, False], ids=["decomposed", "exported"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", MODELING)
def test_lowered_attention_on_cuda_equals_the_model(name, dtype, decompose):
    module = attention_call(name, MAPS)
    args = random_inputs(batch=2, queries=300, heads=8, channels=32, maps=MAPS, spread=1.2, device="cuda")
    args = tuple(a.to(dtype) if a.is_floating_point() else a for a in args)
    program = torch.export.export(module, args)
    gm = _lowered(program.run_decompositions() if decompose else program, 1)
    got = gm(*args)
    expected = module(*(a.float() if a.is_floating_point() else a for a in args)).to(dtype)
    assert got.dtype == dtype and got.device.type == "cuda"
    tolerance = msda.SPEC.tolerance(dtype)
    torch.testing.assert_close(got, expected, atol=tolerance.atol, rtol=tolerance.rtol)


@pytest.mark.parametrize("name", ZOO_MODELS)
def test_lowered_zoo_model_on_cuda_equals_the_model(name):
    model, inputs = zoo_model(name)
    model, inputs = model.to("cuda"), tuple(t.to("cuda") for t in inputs)
    with torch.no_grad():
        gm = _lowered(torch.export.export(model, inputs), attention_modules(model))
        got, expected = gm(*inputs), model(*inputs)
    for a, b in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(expected), strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_lowered_encoder_with_dynamic_batch_on_cuda():
    encoder = DeformableDetrEncoder().to("cuda").eval()
    batch = torch.export.Dim("batch", min=1, max=8)
    with torch.no_grad():
        program = torch.export.export(encoder, encoder.example_inputs(device="cuda"), dynamic_shapes=({0: batch},) * 2)
        gm = _lowered(program, 1)
        for size in (1, 5):
            args = encoder.example_inputs(batch=size, seed=size, device="cuda")
            torch.testing.assert_close(gm(*args), encoder(*args), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_lowered_rt_detr_v2_attention_on_cuda_equals_the_model(dtype):
    module = AttentionV2Call(points=(4, 4, 4, 4), maps=MAPS).eval()
    args = v2_inputs(points=(4, 4, 4, 4), batch=2, queries=300, heads=8, channels=32, maps=MAPS, spread=1.2)
    args = tuple(a.to("cuda", dtype) for a in args)
    gm = _lowered(torch.export.export(module, args), 1)
    got, expected = gm(*args), module(*(a.float() for a in args)).to(dtype)
    tolerance = msda.SPEC.tolerance(dtype)
    torch.testing.assert_close(got, expected, atol=tolerance.atol, rtol=tolerance.rtol)


@pytest.mark.parametrize("name", ["deformable_detr", "rt_detr_v2"])
def test_lowered_attention_with_dynamic_map_sizes_on_cuda(name):
    module = AttentionOnMaps(name).eval()
    args = tuple(a.to("cuda") for a in AttentionOnMaps.inputs(name, [(5, 7), (3, 4), (2, 3)]))
    dims = tuple(
        {2: torch.export.Dim(f"h{i}", min=2, max=32), 3: torch.export.Dim(f"w{i}", min=2, max=32)} for i in range(3)
    )
    gm = _lowered(torch.export.export(module, args, dynamic_shapes=(None, None, dims)), 1)
    (node,) = [node for node in gm.graph.nodes if node.target == MSDA]
    assert all(n.meta["val"].device.type == "cuda" for n in node.args[1:3])
    for sizes in ([(6, 8), (4, 3), (2, 5)], [(11, 4), (2, 7), (3, 3)]):
        other = tuple(a.to("cuda") for a in AttentionOnMaps.inputs(name, sizes, seed=len(sizes[0])))
        torch.testing.assert_close(gm(*other), module(*other), atol=1e-4, rtol=1e-4)
