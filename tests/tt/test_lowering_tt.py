"""The automatic lowering inside Torch-TensorRT: every RMSNorm form docs/torch_tensorrt.md lists (issue 11, defect 1),
and a Deformable DETR encoder's deformable attention.

Torch-TensorRT decomposes ``rsqrt`` into ``reciprocal(sqrt(.))`` and ``reciprocal`` into ``div(1, .)``
before its post-lowering passes (ours among them) run; each form must still become one
``torchtrt.rms_norm``, placed in the TensorRT partition.
"""

from __future__ import annotations

import pytest
import torch
from models import RMS_NORMS, make_rms_norm
from tt_helpers import dryrun, placement, torch_compile_dryrun, torch_tensorrt

RMS_NORM = "torchtrt.rms_norm.default"
DTYPES = ("float32", "float16", "bfloat16")
HIDDEN = 64
NORM_OPS = ("aten.rsqrt", "aten.sqrt", "aten.mean", "aten.reciprocal", "aten.rms_norm", "aten._fused_rms_norm")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("style", sorted(RMS_NORMS))
def test_each_form_lowered_inside_dynamo_compile(style, dtype):
    dtype = getattr(torch, dtype)
    model = make_rms_norm(style, HIDDEN, eps=1e-5).to(dtype).eval()
    x = torch.randn(2, 5, HIDDEN).to(dtype)
    partitioned = dryrun(torch.export.export(model, (x,)), [x])
    where = placement(partitioned)
    assert where == {"trt": [RMS_NORM], "torch": []}, where
    leftovers = [t for n, ts in _all_targets(partitioned) for t in ts if t.startswith(NORM_OPS)]
    assert not leftovers, leftovers
    torch.testing.assert_close(partitioned(x), model(x), **_tolerance(dtype))


@pytest.mark.parametrize("style", ["llama", "nn"])
def test_lowered_with_dynamic_batch(style):
    model = make_rms_norm(style, HIDDEN).to(torch.float16).eval()
    x = torch.randn(4, 5, HIDDEN).to(torch.float16)
    program = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=16)},))
    spec = torch_tensorrt().Input(
        min_shape=(1, 5, HIDDEN), opt_shape=(4, 5, HIDDEN), max_shape=(16, 5, HIDDEN), dtype=torch.float16
    )
    assert placement(dryrun(program, [spec])) == {"trt": [RMS_NORM], "torch": []}


def test_opt_out_leaves_the_norm_to_torch_tensorrt():
    from torchtrt_plugins import lowering

    lowering.set_enabled(False)
    try:
        model = make_rms_norm("llama", HIDDEN).eval()
        x = torch.randn(2, 5, HIDDEN)
        partitioned = dryrun(torch.export.export(model, (x,)), [x])
    finally:
        lowering.set_enabled(None)
    assert placement(partitioned) == {"trt": [], "torch": []}


def test_torch_compile_backend_lowers_the_llama_form():
    model = make_rms_norm("llama", HIDDEN).to(torch.bfloat16).eval()
    x = torch.randn(3, 7, HIDDEN).to(torch.bfloat16)
    y, placements = torch_compile_dryrun(model, x)
    assert placements == [{"trt": [RMS_NORM], "torch": []}], placements
    torch.testing.assert_close(y, model(x), **_tolerance(torch.bfloat16))


def _all_targets(partitioned):
    from tt_helpers import targets_by_submodule

    return targets_by_submodule(partitioned).items()


def _tolerance(dtype):
    from torchtrt_plugins.ops import rms_norm

    tolerance = rms_norm.SPEC.tolerance(dtype)
    return {"atol": tolerance.atol * 4, "rtol": tolerance.rtol * 4}


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic_batch"])
def test_deformable_detr_encoder_attention_lowered_into_the_engine(dynamic):
    from deformable_attention_cases import DeformableDetrEncoder

    encoder = DeformableDetrEncoder().eval()
    args = encoder.example_inputs(batch=2)
    dynamic_shapes, inputs = None, list(args)
    if dynamic:
        dynamic_shapes = ({0: torch.export.Dim("batch", min=1, max=8)},) * 2
        shape = tuple(args[0].shape[1:])
        inputs = [torch_tensorrt().Input(min_shape=(1, *shape), opt_shape=(2, *shape), max_shape=(8, *shape))] * 2
    with torch.no_grad():
        partitioned = dryrun(torch.export.export(encoder, args, dynamic_shapes=dynamic_shapes), inputs)
        where = placement(partitioned)
        assert where == {"trt": ["torchtrt.multi_scale_deformable_attention.default"], "torch": []}, where
        samplers = [t for _, ts in _all_targets(partitioned) for t in ts if "grid_sampler" in t]
        assert not samplers, samplers
        torch.testing.assert_close(partitioned(*args), encoder(*args), atol=1e-4, rtol=1e-4)


def test_attention_over_maps_of_dynamic_sizes_lowered_into_the_engine():
    """Symbolic level sizes: the spatial_shapes and level_start_index the lowering computes from the graph's size
    nodes convert too, so the attention stays one op in the TensorRT partition."""
    from deformable_attention_cases import AttentionOnMaps

    module = AttentionOnMaps("deformable_detr").eval()
    maps, sizes = [(5, 7), (3, 4), (2, 3)], [(6, 8), (4, 3), (2, 5)]
    args = AttentionOnMaps.inputs("deformable_detr", maps)
    dims = [
        {2: torch.export.Dim(f"h{i}", min=2, max=16), 3: torch.export.Dim(f"w{i}", min=2, max=16)} for i in range(3)
    ]
    Input = torch_tensorrt().Input
    inputs = [*args[:2]] + [
        Input(min_shape=(*m.shape[:2], 2, 2), opt_shape=tuple(m.shape), max_shape=(*m.shape[:2], 16, 16))
        for m in args[2:]
    ]
    with torch.no_grad():
        program = torch.export.export(module, args, dynamic_shapes=(None, None, tuple(dims)))
        partitioned = dryrun(program, inputs)
        where = placement(partitioned)
        assert where == {"trt": ["torchtrt.multi_scale_deformable_attention.default"], "torch": []}, where
        samplers = [t for _, ts in _all_targets(partitioned) for t in ts if "grid_sampler" in t]
        assert not samplers, samplers
        outside = {name: ts for name, ts in _all_targets(partitioned) if "_run_on_acc" not in name and ts}
        assert "aten.scalar_tensor.default" in [t for _, ts in _all_targets(partitioned) for t in ts]
        assert not outside, outside  # the level sizes' tensors are in the engine too
        other = AttentionOnMaps.inputs("deformable_detr", sizes, seed=1)
        torch.testing.assert_close(partitioned(*other), module(*other), atol=1e-4, rtol=1e-4)
