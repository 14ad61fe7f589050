"""multi_scale_deformable_attention on the CPU: the declaration, the reference against Hugging Face's function, the
fake kernel's shapes and its errors naming the argument, plans and ONNX export from exported graphs, and a tiny
Deformable DETR (random weights) whose attention modules apply_multi_scale_deformable_attention routes to the op."""

from __future__ import annotations

import pytest
import torch
from deformable_attention_cases import MAPS, modeling, random_inputs, tiny_deformable_detr
from torch.utils._python_dispatch import TorchDispatchMode

from torchtrt_plugins import SpecError
from torchtrt_plugins import onnx as tonnx
from torchtrt_plugins.converters import plan_node, validate_node
from torchtrt_plugins.ops import multi_scale_deformable_attention as msda
from torchtrt_plugins.transformers import apply_multi_scale_deformable_attention

SPEC = msda.SPEC
MSDA = torch.ops.torchtrt.multi_scale_deformable_attention


@pytest.fixture(scope="module")
def hugging_face():
    """transformers' Deformable DETR module (MultiScaleDeformableAttention among its classes)."""
    return modeling("deformable_detr")


def test_declaration():
    assert SPEC.creator_key == ("MultiScaleDeformableAttention", "1", "torchtrt")
    assert SPEC.fields == ()
    assert [t.name for t in SPEC.inputs] == [
        "value",
        "spatial_shapes",
        "level_start_index",
        "sampling_locations",
        "attention_weights",
    ]
    assert [t.dtypes for t in SPEC.inputs][1:3] == [(torch.int64, torch.int32)] * 2
    assert set(msda.MULTI_SCALE_DEFORMABLE_ATTENTION.launchers) == {0, 1, 2, 3, 4}
    assert not SPEC.requires_output_allocator
    assert len(msda.MULTI_SCALE_DEFORMABLE_ATTENTION.compiled_programs) == 1  # ranks (4, 2, 1, 6, 5) only


def test_plain_torch_and_the_op_match_hugging_faces_function(hugging_face):
    value, shapes, starts, locations, weights = random_inputs(spread=1.6)  # a third of the points outside
    expected = hugging_face.MultiScaleDeformableAttention()(value, shapes, MAPS, starts, locations, weights, 64)
    torch.testing.assert_close(msda.plain_torch(value, MAPS, locations, weights), expected, atol=0, rtol=0)
    torch.testing.assert_close(MSDA(value, shapes, starts, locations, weights), expected, atol=1e-6, rtol=1e-6)


def test_bilinear_sampling_at_pixel_centres_and_padding():
    # One level of 2x3, one head, one channel: a point at a pixel centre reads that pixel; one half a pixel past the
    # left edge of the map reads half of the edge pixel (the other corner is padding); one outside reads zero.
    value = torch.arange(6.0).view(1, 6, 1, 1)
    shapes, starts = torch.tensor([[2, 3]]), torch.tensor([0])
    centre = [(1.5 / 3, 0.5 / 2), (2.5 / 3, 1.5 / 2)]  # pixels (y=0, x=1) and (y=1, x=2): values 1 and 5
    edge = [(0.0, 1.5 / 2)]  # x = -0.5, y = 1: half of pixel (y=1, x=0), value 3
    outside = [(1.2, 0.5)]
    locations = torch.tensor(centre + edge + outside).view(1, 4, 1, 1, 1, 2)
    weights = torch.ones(1, 4, 1, 1, 1)
    out = MSDA(value, shapes, starts, locations, weights)
    torch.testing.assert_close(out.view(4), torch.tensor([1.0, 5.0, 1.5, 0.0]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_dtypes_are_fp32_math_rounded_once(dtype):
    args = random_inputs(dtype=dtype)
    out = MSDA(*args)
    assert out.dtype == dtype and out.shape == (2, 6, 24)
    expected = msda.plain_torch(args[0].float(), MAPS, args[3].float(), args[4].float()).to(dtype)
    assert torch.equal(out, expected)


def test_int32_indices():
    value, shapes, starts, locations, weights = random_inputs()
    torch.testing.assert_close(
        MSDA(value, shapes.int(), starts.int(), locations, weights), MSDA(value, shapes, starts, locations, weights)
    )


def test_fake_kernel_shapes():
    with torch._subclasses.FakeTensorMode() as mode:
        out = MSDA(*[mode.from_tensor(a) for a in random_inputs(batch=3, queries=11, heads=8, channels=32, points=2)])
    assert out.shape == (3, 11, 256) and out.dtype == torch.float32


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: {0: a[0][0]}, r"argument 'value' must be \(B, S, H, D\), got shape \(49, 3, 8\)"),
        (lambda a: {1: a[1].view(-1)}, r"argument 'spatial_shapes' must be \(L, 2\): \(H_l, W_l\) of each level"),
        (lambda a: {1: a[1][:, :1]}, r"argument 'spatial_shapes' must be \(L, 2\).*got shape \(3, 1\)"),
        (lambda a: {2: a[2][:2]}, r"argument 'level_start_index' must be \(L,\) with L = 3 levels, got shape \(2,\)"),
        (lambda a: {3: a[3][..., 0]}, r"argument 'sampling_locations' must be \(B, Q, H, L, P, 2\), got shape"),
        (
            lambda a: {3: a[3][:, :, :2]},
            r"argument 'sampling_locations' must be \(B, Q, H, L, P, 2\) with B = 2, H = 3, L = 3, got shape "
            r"\(2, 6, 2, 3, 4, 2\)",
        ),
        (lambda a: {3: a[3][:, :, :, :2]}, r"argument 'sampling_locations' must be .* L = 3, got shape"),
        (
            lambda a: {4: a[4][..., :3]},
            r"argument 'attention_weights' must be \(B, Q, H, L, P\) = \(2, 6, 3, 3, 4\) \(those of "
            r"'sampling_locations'\), got shape \(2, 6, 3, 3, 3\)",
        ),
        (lambda a: {4: a[4][:, :5]}, r"argument 'attention_weights' must be .*got shape \(2, 5, 3, 3, 4\)"),
        (lambda a: {1: a[1].float()}, r"argument 'spatial_shapes'.*int64, int32"),
        (lambda a: {2: a[2].int()}, r"argument 'level_start_index'.*spatial_shapes"),
        (lambda a: {3: a[3].half()}, r"argument 'sampling_locations'.*value"),
        (lambda a: {4: a[4].double()}, r"argument 'attention_weights'"),
        (lambda a: {0: a[0].int()}, r"argument 'value'.*float32, float16, bfloat16"),
    ],
)
def test_bad_input_names_the_op_and_argument(change, message):
    args = list(random_inputs())
    for index, replacement in change(args).items():
        args[index] = replacement
    with pytest.raises(SpecError, match=r"torchtrt\.multi_scale_deformable_attention: " + message):
        MSDA(*args)
    with torch._subclasses.FakeTensorMode() as mode, pytest.raises(SpecError, match=message):
        MSDA(*[mode.from_tensor(a) for a in args])


class _Attention(torch.nn.Module):
    def forward(self, value, shapes, starts, locations, weights):
        return MSDA(value, shapes, starts, locations.sigmoid(), weights.softmax(-1))


def _exported():
    batch, queries = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("queries", min=1, max=30000)
    args = random_inputs()
    dynamic = ({0: batch}, None, None, {0: batch, 1: queries}, {0: batch, 1: queries})
    return torch.export.export(_Attention(), args, dynamic_shapes=dynamic), args


def test_plan_from_exported_graph():
    ep, _ = _exported()
    (node,) = [n for n in ep.graph_module.graph.nodes if "multi_scale_deformable_attention" in str(n.target)]
    call = plan_node(node)
    assert call.creator_key == SPEC.creator_key and validate_node(node)
    assert call.fields == [] and call.shape_inputs == [] and len(call.tensor_inputs) == 5


def test_onnx_export_gives_one_plugin_node_with_fiverandom_inputs():
    onnx = pytest.importorskip("onnx")
    ep, args = _exported()
    program = torch.onnx.export(ep, args, dynamo=True, custom_translation_table=tonnx.translation_table())
    nodes = [n for n in program.model_proto.graph.node if n.op_type == SPEC.plugin_name]
    assert len(nodes) == 1 and len(nodes[0].input) == 5
    assert sorted(a.name for a in nodes[0].attribute) == ["plugin_namespace", "plugin_version"]  # no fields
    onnx.checker.check_model(program.model_proto)


class _OpsCalled(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def test_apply_routes_a_deformable_detr_to_the_op_with_the_same_output():
    model = tiny_deformable_detr()
    pixels = torch.randn(1, 3, 64, 80)
    with torch.no_grad():
        expected = model(pixel_values=pixels).last_hidden_state
        assert apply_multi_scale_deformable_attention(model) == 2  # the encoder's and the decoder's layer
        with _OpsCalled() as called:
            got = model(pixel_values=pixels).last_hidden_state
    assert called.names.count("torchtrt.multi_scale_deformable_attention.default") == 2
    assert not [name for name in called.names if "grid_sampler" in name]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_apply_refuses_what_is_not_a_module():
    with pytest.raises(TypeError, match=r"apply_multi_scale_deformable_attention: argument 'model' must be"):
        apply_multi_scale_deformable_attention("model")
