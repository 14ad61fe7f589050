"""multi_scale_deformable_attention on the GPU: every tactic against the reference (Hugging Face's function in fp32)
for every dtype at odd shapes (one point per lane group and more, D not a multiple of a vector, locations outside
[0, 1], int32 and int64 indices, unaligned views), the Deformable DETR sizes, shapes inconsistent with value read
nothing out of bounds; the plugin's enqueue for every tactic through the harness against eager; opcheck,
torch.compile, CUDA graph capture, check_op and a tiny Deformable DETR routed to the op."""

from __future__ import annotations

import pytest
import torch

from torchtrt_plugins.converters import plan
from torchtrt_plugins.ops import multi_scale_deformable_attention as msda
from torchtrt_plugins.testing import check_op
from torchtrt_plugins.testing import harness as H

SPEC = msda.SPEC
MSDA = torch.ops.torchtrt.multi_scale_deformable_attention
MSDA_TACTIC = torch.ops.torchtrt.multi_scale_deformable_attention_tactic
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TACTICS = [0] + [t.value for t in SPEC.tactics]
DETR_MAPS = [(100, 134), (50, 67), (25, 34), (13, 17)]

# (batch, queries, heads, channels, points, maps): Deformable DETR's decoder at a small batch, D below a group (8 and
# 3 lanes), D past a warp (33, 96: two channel passes), one level of one pixel, more points than lanes in a group, no
# queries, no batch.
SHAPES = [
    (2, 300, 8, 32, 4, DETR_MAPS),
    (3, 37, 3, 8, 4, [(7, 9), (3, 5)]),
    (1, 19, 2, 3, 5, [(4, 6), (2, 3), (1, 1)]),
    (2, 11, 4, 33, 3, [(9, 10), (5, 5)]),
    (1, 5, 2, 96, 2, [(6, 7)]),
    (2, 9, 1, 2, 20, [(3, 3), (2, 2)]),
    (1, 0, 2, 16, 4, [(4, 4)]),
    (0, 5, 2, 16, 4, [(4, 4)]),
]


def shape_id(shape) -> str:
    b, q, h, d, p, maps = shape
    return f"b{b}q{q}h{h}d{d}p{p}l{len(maps)}"


def inputs(batch, queries, heads, channels, points, maps, dtype, index_dtype=torch.int64, spread=1.4, seed=0):
    """Locations spread over [0.5 - spread/2, 0.5 + spread/2]: past 1 some points sample only padding."""
    g = torch.Generator().manual_seed(seed)
    sizes = [h * w for h, w in maps]
    shapes = torch.tensor(maps, dtype=index_dtype).cuda()
    starts = torch.tensor([sum(sizes[:i]) for i in range(len(sizes))], dtype=index_dtype).cuda()
    value = torch.randn(batch, sum(sizes), heads, channels, generator=g).to(dtype).cuda()
    locations = 0.5 + spread * (torch.rand(batch, queries, heads, len(maps), points, 2, generator=g) - 0.5)
    logits = torch.randn(batch, queries, heads, len(maps) * points, generator=g)
    weights = logits.softmax(-1).view(batch, queries, heads, len(maps), points)
    return value, shapes, starts, locations.to(dtype).cuda(), weights.to(dtype).cuda()


def call(args, tactic: int):
    return MSDA_TACTIC(*args, tactic=tactic) if tactic else MSDA(*args)


def check(out, args):
    tol = SPEC.tolerance(args[0].dtype)
    b, _, h, d = args[0].shape
    assert out.shape == (b, args[3].shape[1], h * d) and out.dtype == args[0].dtype
    torch.testing.assert_close(out, msda.reference(*args), atol=tol.atol, rtol=tol.rtol)


@pytest.mark.parametrize("tactic", TACTICS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_matches_reference(shape, dtype, tactic):
    args = inputs(*shape, dtype)
    check(call(args, tactic), args)


@pytest.mark.parametrize("tactic", TACTICS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_int32_indices_and_unaligned_views(dtype, tactic):
    value, shapes, starts, locations, weights = inputs(2, 50, 4, 16, 4, [(11, 13), (6, 7)], dtype, torch.int32)
    wide = torch.randn(*value.shape[:-1], 17, device="cuda").to(dtype)
    unaligned = wide[..., 1:]  # non-contiguous: the op makes it contiguous
    flat = torch.randn(value.numel() + 1, device="cuda").to(dtype)[1:].view(value.shape)  # misaligned base
    for v in (unaligned, flat):
        check(call((v, shapes, starts, locations, weights), tactic), (v, shapes, starts, locations, weights))


@pytest.mark.parametrize("tactic", TACTICS)
def test_hugging_face_encoder_size_in_fp32(tactic):
    args = inputs(2, sum(h * w for h, w in DETR_MAPS), 8, 32, 4, DETR_MAPS, torch.float32, spread=1.0)
    check(call(args, tactic), args)


@pytest.mark.parametrize("tactic", TACTICS)
def test_shapes_inconsistent_with_value_read_only_value(tactic):
    """Spatial shapes larger than value's S rows (a caller's error the op cannot see without reading them): corners
    past value's rows are padding, so the output is finite and memcheck finds no out-of-bounds read."""
    value, shapes, starts, locations, weights = inputs(1, 64, 2, 8, 4, [(5, 5)], torch.float32, spread=1.0)
    big = torch.tensor([[50, 50]], device="cuda")
    out = call((value, big, starts, locations, weights), tactic)
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()


def test_tactics_agree_to_the_bit_in_fp32():
    args = inputs(2, 301, 8, 32, 4, DETR_MAPS, torch.float32)
    outs = [call(args, t) for t in TACTICS]
    for other in outs[1:]:
        assert torch.equal(outs[0], other)


@pytest.mark.parametrize("dtype", DTYPES)
def test_opcheck(dtype):
    args = inputs(2, 7, 2, 8, 2, [(3, 4), (2, 2)], dtype)
    torch.library.opcheck(MSDA.default, args)
    torch.library.opcheck(MSDA_TACTIC.default, args, {"tactic": 2})


def test_compile_fullgraph_with_dynamic_queries():
    compiled = torch.compile(lambda *a: MSDA(*a) * 2, fullgraph=True, dynamic=True)
    for queries in (17, 45):
        args = inputs(2, queries, 4, 16, 4, [(9, 8), (4, 4)], torch.float16)
        torch.testing.assert_close(compiled(*args), MSDA(*args) * 2)


def test_captured_in_a_cuda_graph():
    args = inputs(2, 100, 8, 32, 4, DETR_MAPS, torch.bfloat16)
    expected = MSDA(*args)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        MSDA(*args)
        with torch.cuda.graph(graph, stream=stream):
            out = MSDA(*args)
    args[0].copy_(torch.randn_like(args[0]))
    graph.replay()
    torch.cuda.synchronize()
    check(out, args)
    assert not torch.equal(out, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_plugin_enqueue_of_every_tactic_matches_eager(build, dtype):
    args = inputs(2, 150, 8, 32, 4, DETR_MAPS, dtype)
    result = H.run_call(plan(SPEC, args, {}), *args, library=build.library)
    result.assert_conformant()  # graph capture and replay of enqueue included
    assert result.enqueue_skipped is None
    for tactic in TACTICS:
        assert torch.equal(result.output(tactic), call(args, tactic)), tactic


def test_plugin_takes_int32_indices(build):
    args = inputs(1, 40, 4, 16, 3, [(10, 12), (5, 6)], torch.float16, torch.int32)
    result = H.run_call(plan(SPEC, args, {}), *args, library=build.library)
    result.assert_conformant()
    assert torch.equal(result.output(0), MSDA(*args))


def test_check_op():
    report = check_op(
        MSDA,
        [
            inputs(2, 33, 8, 32, 4, DETR_MAPS, torch.float16),
            inputs(1, 9, 3, 5, 2, [(6, 5), (3, 3)], torch.float32, torch.int32),
        ],
    )
    assert "harness" in report.passed, report


def test_tiny_deformable_detr_routed_to_the_op_matches_its_own_code():
    from deformable_attention_cases import tiny_deformable_detr

    from torchtrt_plugins.transformers import apply_multi_scale_deformable_attention

    model = tiny_deformable_detr(
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_queries=30,
        encoder_n_points=4,
        decoder_n_points=4,
    ).cuda()
    pixels = torch.randn(2, 3, 128, 160, device="cuda")
    with torch.no_grad():
        expected = model(pixel_values=pixels).last_hidden_state
        assert apply_multi_scale_deformable_attention(model) == 4
        got = model(pixel_values=pixels).last_hidden_state
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
