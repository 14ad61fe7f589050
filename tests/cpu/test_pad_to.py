"""pad_to on the CPU: declaration, reference, fake kernel, converter plan (fields vs shape inputs) and validator."""

import importlib

import pytest
import torch
from fixtures import GraphRecorder
from torch._subclasses.fake_tensor import FakeTensorMode

import torchtrt_plugins
from torchtrt_plugins import SpecError, _derive, converters
from torchtrt_plugins.declare import SHAPE_INPUT_SENTINEL
from torchtrt_plugins.ops import pad_to

SPEC = pad_to.SPEC
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8]
INT8_VALUE = r"torchtrt.pad_to: argument 'value' must be an integer in \[-128, 127\] when 'x' is int8, got "


def test_spec_names_are_ours():
    assert SPEC.qualname == "torchtrt::pad_to"
    assert SPEC.creator_key == ("PadTo", "2", "torchtrt")
    assert [(f.name, f.type, f.shape_input) for f in SPEC.fields] == [
        ("height", "INT64", True),
        ("width", "INT64", True),
        ("value", "FLOAT64", False),
    ]
    assert all(f.shape_input_sentinel == SHAPE_INPUT_SENTINEL == -(2**31) for f in SPEC.fields if f.shape_input)
    assert SPEC.num_plugin_outputs == 1 and not SPEC.requires_output_allocator
    assert SPEC.tactics == () and pad_to.ENTRY.declaration is pad_to.PAD_TO and pad_to.ENTRY.spec is SPEC
    assert SPEC.input("x").dtypes == tuple(DTYPES)


def test_schema_registered_from_spec():
    schema = torch.ops.torchtrt.pad_to.default._schema
    assert str(schema) == "torchtrt::pad_to(Tensor x, SymInt height, SymInt width, float value=0.) -> Tensor"


def test_reference_matches_hand_computed():
    x = torch.tensor([[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]])  # (1, 1, 2, 3)
    expected = torch.tensor([[[[1.0, 2.0], [4.0, 5.0], [9.0, 9.0]]]])  # taller, narrower
    torch.testing.assert_close(pad_to.reference(x, 3, 2, 9.0), expected)
    assert pad_to.reference(x, 0, 5).shape == (1, 1, 0, 5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, size",
    [
        ((2, 3, 5, 7), (8, 8)),  # pad both
        ((2, 3, 5, 7), (3, 4)),  # crop both
        ((1, 2, 5, 7), (9, 2)),  # pad height, crop width
        ((1, 1, 1, 1), (1, 1)),  # unchanged
        ((0, 3, 4, 4), (6, 6)),  # empty batch
        ((2, 3, 0, 0), (2, 5)),  # empty planes: all padding
        ((2, 3, 4, 4), (0, 3)),  # empty output
    ],
    ids=str,
)
def test_cpu_op_is_reference(dtype, shape, size):
    x = (torch.randn(shape) * 10).to(dtype)
    y = torch.ops.torchtrt.pad_to(x, *size, -3.0)
    assert y.dtype == dtype and y.shape == (*shape[:2], *size)
    torch.testing.assert_close(y, pad_to.reference(x, *size, -3.0), atol=0, rtol=0)
    h, w = min(shape[2], size[0]), min(shape[3], size[1])
    assert torch.equal(y[:, :, :h, :w], x[:, :, :h, :w])
    assert bool((y[:, :, h:, :] == -3).all()) and bool((y[:, :, :, w:] == -3).all())


def test_value_defaults_to_zero():
    y = torch.ops.torchtrt.pad_to(torch.ones(1, 1, 1, 1), 2, 2)
    assert torch.equal(y, torch.tensor([[[[1.0, 0.0], [0.0, 0.0]]]]))


def test_fake_kernel_shapes_and_checks():
    with FakeTensorMode():
        x = torch.empty(2, 3, 17, 19, dtype=torch.bfloat16)
        y = torch.ops.torchtrt.pad_to(x, 32, 8)
        assert y.shape == (2, 3, 32, 8) and y.dtype == torch.bfloat16
        with pytest.raises(SpecError, match=r"pad_to: argument 'x' must have shape \(B, C, H, W\), got \(3, 17, 19\)"):
            torch.ops.torchtrt.pad_to(torch.empty(3, 17, 19), 4, 4)


@pytest.mark.parametrize(
    "args, message",
    [
        ((-1, 4), r"torchtrt.pad_to: argument 'height' must be an integer >= 0, got -1"),
        ((4, -2), r"torchtrt.pad_to: argument 'width' must be an integer >= 0, got -2"),
        ((4, 4, float("nan")), r"torchtrt.pad_to: argument 'value' must be a float, got nan"),
        ((4, 4, float("inf")), r"torchtrt.pad_to: argument 'value' must be a float, got inf"),
    ],
)
def test_invalid_args_are_rejected_with_a_clear_message(args, message):
    with pytest.raises(SpecError, match=message):
        torch.ops.torchtrt.pad_to(torch.zeros(1, 1, 2, 2), *args)


def test_invalid_dtype_and_int8_value():
    with pytest.raises(
        SpecError, match=r"argument 'x' must have dtype in \{float32, float16, bfloat16, int8\}, got int32"
    ):
        torch.ops.torchtrt.pad_to(torch.zeros(1, 1, 2, 2, dtype=torch.int32), 3, 3)
    x8 = torch.zeros(1, 1, 2, 2, dtype=torch.int8)
    for value in (0.5, 128.0, -129.0):
        with pytest.raises(SpecError, match=INT8_VALUE + repr(value)):
            torch.ops.torchtrt.pad_to(x8, 3, 3, value)
    assert torch.ops.torchtrt.pad_to(x8, 3, 3, -128.0)[0, 0, 2, 2].item() == -128
    assert torch.ops.torchtrt.pad_to(x8, 3, 3, 127.0)[0, 0, 2, 2].item() == 127


def test_int8_value_is_checked_by_the_fake_kernel_when_tracing():
    with FakeTensorMode():
        x8 = torch.empty(2, 3, 4, 5, dtype=torch.int8)
        assert torch.ops.torchtrt.pad_to(x8, 6, 7, -7.0).shape == (2, 3, 6, 7)
        with pytest.raises(SpecError, match=INT8_VALUE + "300.0"):
            torch.ops.torchtrt.pad_to(x8, 6, 7, 300.0)
    # A float output takes any finite value.
    assert torch.ops.torchtrt.pad_to(torch.zeros(1, 1, 1, 1), 2, 2, 0.5)[0, 0, 1, 1].item() == 0.5


# ---------------------------------------------------------------------------------------------- planning


class _PadLike(torch.nn.Module):
    """pad_to(x, *ref.shape[-2:]): the output size comes from another tensor's (possibly dynamic) shape."""

    def forward(self, x, ref):
        return torch.ops.torchtrt.pad_to(x, *ref.shape[-2:], value=1.5) + 1


class _PadConst(torch.nn.Module):
    def forward(self, x):
        return torch.ops.torchtrt.pad_to(x, 16, 24)


def _op_nodes(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and "torchtrt.pad_to" in str(n.target)]


def _scalar_fields(call):
    """The op's own fields (height, width, value), in schema order."""
    return call.fields[: len(SPEC.fields)]


def test_plan_with_static_ints_makes_fields():
    call = converters.plan(SPEC, (torch.empty(2, 3, 5, 7), 16, 24), {})
    assert [(f.name, f.type, f.value) for f in _scalar_fields(call)] == [
        ("height", "INT64", 16),
        ("width", "INT64", 24),
        ("value", "FLOAT64", 0.0),
    ]
    assert call.shape_inputs == [] and call.num_outputs == 1 and call.input_casts == [None]
    assert call.fields[0].numpy().dtype.name == "int64" and call.fields[2].numpy().dtype.name == "float64"


@pytest.mark.parametrize("dynamic", [False, True])
def test_plan_from_exported_graph_with_constant_size(dynamic):
    shapes = {"x": {0: torch.export.Dim("batch", min=1, max=8), 2: torch.export.Dim("h", min=2, max=64)}}
    ep = torch.export.export(_PadConst(), (torch.randn(2, 3, 5, 7),), dynamic_shapes=shapes if dynamic else None)
    (node,) = _op_nodes(ep.graph_module)
    call = converters.plan_node(node)
    assert [f.value for f in _scalar_fields(call)] == [16, 24, 0.0] and call.shape_inputs == []
    assert converters.validate_node(node)
    assert tuple(node.meta["val"].shape[1:]) == (3, 16, 24)


def test_plan_from_exported_graph_with_symbolic_size_makes_shape_inputs():
    dims = {
        "x": {0: torch.export.Dim("batch", min=1, max=8)},
        "ref": {2: torch.export.Dim("h", min=2, max=64), 3: torch.export.Dim("w", min=2, max=64)},
    }
    ep = torch.export.export(_PadLike(), (torch.randn(2, 3, 5, 7), torch.randn(1, 1, 9, 4)), dynamic_shapes=dims)
    (node,) = _op_nodes(ep.graph_module)
    call = converters.plan_node(node)
    assert [(f.name, f.value) for f in _scalar_fields(call)] == [
        ("height", SHAPE_INPUT_SENTINEL),
        ("width", SHAPE_INPUT_SENTINEL),
        ("value", 1.5),
    ]
    assert [s.target for s in call.shape_inputs] == [torch.ops.aten.sym_size.int] * 2
    assert [s.args[1] for s in call.shape_inputs] == [2, 3]  # height first, then width, as the plugin reads them
    assert converters.validate_node(node)
    out = node.meta["val"]
    assert isinstance(out.shape[2], torch.SymInt) and isinstance(out.shape[3], torch.SymInt)


def test_plan_mixes_a_field_and_a_shape_input():
    class Model(torch.nn.Module):
        def forward(self, x, ref):
            return torch.ops.torchtrt.pad_to(x, 12, ref.shape[-1])

    dims = {"x": None, "ref": {1: torch.export.Dim("w", min=2, max=64)}}
    ep = torch.export.export(Model(), (torch.randn(1, 2, 5, 7), torch.randn(1, 9)), dynamic_shapes=dims)
    (node,) = _op_nodes(ep.graph_module)
    call = converters.plan_node(node)
    assert [f.value for f in _scalar_fields(call)] == [12, SHAPE_INPUT_SENTINEL, 0.0]
    assert len(call.shape_inputs) == 1 and call.shape_inputs[0].args[1] == 1


def test_plan_from_symbolic_fx_graph():
    """make_fx in symbolic mode leaves sym_size nodes as the size arguments, as dynamo does."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(x, ref):
        return torch.ops.torchtrt.pad_to(x, ref.shape[2], ref.shape[3])

    gm = make_fx(fn, tracing_mode="symbolic")(torch.randn(2, 3, 5, 7), torch.randn(1, 1, 9, 4))
    (node,) = _op_nodes(gm)
    call = converters.plan_node(node)
    assert [f.value for f in _scalar_fields(call)] == [SHAPE_INPUT_SENTINEL, SHAPE_INPUT_SENTINEL, 0.0]
    assert all(isinstance(s, torch.fx.Node) for s in call.shape_inputs) and len(call.shape_inputs) == 2


def test_plan_rejects_invalid_values():
    x = torch.empty(1, 2, 3, 4)
    with pytest.raises(SpecError, match=r"torchtrt.pad_to: argument 'height' must be an integer >= 0, got -3"):
        converters.plan(SPEC, (x, -3, 4), {})
    with pytest.raises(SpecError, match=r"torchtrt.pad_to: argument 'width' must be an integer >= 0, got 2.5"):
        converters.plan(SPEC, (x, 3, 2.5), {})
    with pytest.raises(SpecError, match=r"torchtrt.pad_to: argument 'value' must be a constant"):
        converters.plan(SPEC, (x, 3, 4), {"value": torch.fx.Graph().placeholder("v")})


@pytest.mark.parametrize("value", [0.5, 128.0, -129.0])
def test_plan_rejects_an_int8_value_the_tensor_cannot_hold(value):
    """The fake kernel's check, at conversion: with constant sizes and with sizes that become shape inputs."""
    x8 = torch.empty(1, 2, 3, 4, dtype=torch.int8)
    with pytest.raises(SpecError, match=INT8_VALUE + repr(value)):
        converters.plan(SPEC, (x8, 5, 6, value), {})
    size = torch.fx.Graph().placeholder("size")
    with pytest.raises(SpecError, match=INT8_VALUE + repr(value)):
        converters.plan(SPEC, (x8, size, size, value), {})
    assert converters.plan(SPEC, (x8, size, size, -128.0), {}).shape_inputs == [size, size]


def test_validator_keeps_an_int8_node_with_a_bad_value_in_pytorch():
    ep = torch.export.export(_PadConst(), (torch.randn(1, 2, 3, 4),))
    (node,) = _op_nodes(ep.graph_module)
    node.args[0].meta["val"] = torch.empty(1, 2, 3, 4, dtype=torch.int8, device="meta")
    assert converters.validate_node(node)
    node.kwargs = {"value": 0.5}
    assert not converters.validate_node(node)


def test_symbolic_sizes_become_the_shape_program_s_shape_inputs():
    """Constant sizes are constants of the output dims; a symbolic one is read from its shape input."""
    x = torch.empty(2, 3, 5, 7)
    size = torch.fx.Graph().placeholder("size")
    constant = _derive.Program.parse(pad_to.PAD_TO.derive_for_values(x, 16, 24).program)
    assert constant.num_shape_inputs == 0
    assert [dims for _, dims in constant.outputs] == [
        ((_derive.DIM, 0, 0), (_derive.DIM, 0, 1), (_derive.CONST, 16), (_derive.CONST, 24))
    ]
    mixed = _derive.Program.parse(pad_to.PAD_TO.derive_for_values(x, 16, size).program)
    assert mixed.num_shape_inputs == 1
    assert [dims[2:] for _, dims in mixed.outputs] == [((_derive.CONST, 16), (_derive.SHAPE, 0, 0))]
    assert [code for code, _ in mixed.outputs] == [-1]  # the type of input 0


def test_validator_rejects_unsupported_dtype():
    ep = torch.export.export(_PadConst(), (torch.randn(1, 2, 3, 4),))
    (node,) = _op_nodes(ep.graph_module)
    node.args[0].meta["val"] = torch.empty(1, 2, 3, 4, dtype=torch.float64, device="meta")
    assert not converters.validate_node(node)


def test_compile_keeps_op_in_graph_with_dynamic_sizes():
    backend = GraphRecorder()

    model = _PadLike()
    compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=True)
    for shape, ref in (((2, 3, 5, 7), (4, 6, 9, 8)), ((3, 5, 6, 2), (6, 4, 3, 10))):
        x, r = torch.randn(shape), torch.randn(ref)
        torch.testing.assert_close(compiled(x, r), model(x, r))
    assert len(backend.graphs) == 1  # one graph for every size
    (node,) = _op_nodes(backend.graphs[0])
    call = converters.plan(SPEC, node.args, node.kwargs)
    assert [f.value for f in _scalar_fields(call)] == [SHAPE_INPUT_SENTINEL, SHAPE_INPUT_SENTINEL, 1.5]


def test_public_api_and_one_way_to_make_it():
    """Declared like every op of ours: the generic converter, no converter module of its own."""
    entry = torchtrt_plugins.get("pad_to")
    assert entry is pad_to.ENTRY and entry.spec is SPEC and entry.library is None
    assert "pad_to" in [e.spec.name for e in torchtrt_plugins.all_ops()]
    assert converters.make_converter(entry).__name__ == "convert_pad_to"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("torchtrt_plugins.converters.pad_to")
