"""masked_rows on the CPU: spec, reference, fake kernel (unbacked K), converter plan and validator."""

import pytest
import torch
from fixtures import GraphRecorder
from torch._subclasses.fake_tensor import DynamicOutputShapeException, FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv, free_unbacked_symbols

import torchtrt_plugins
from torchtrt_plugins import SpecError, converters
from torchtrt_plugins.ops import masked_rows

SPEC = masked_rows.SPEC
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64]


def test_spec_names_are_ours():
    assert SPEC.qualname == "torchtrt::masked_rows"
    assert SPEC.creator_key == ("MaskedRows", "3", "torchtrt")
    assert SPEC.fields == () and SPEC.tactics == ()
    # Plugin outputs: y and the size tensor K, which the torch op does not return.
    assert SPEC.hidden_outputs == 1 and SPEC.num_plugin_outputs == 2 and len(SPEC.outputs) == 1
    assert SPEC.requires_output_allocator
    # TensorRT plugins take no BOOL I/O: the converter hands the mask over as int32.
    assert SPEC.input("mask").dtypes == (torch.bool,) and SPEC.input("mask").plugin_dtype is torch.int32
    assert SPEC.input("x").plugin_dtype is None


def test_schema_registered_from_spec():
    assert (
        str(torch.ops.torchtrt.masked_rows.default._schema) == "torchtrt::masked_rows(Tensor x, Tensor mask) -> Tensor"
    )


def test_reference_matches_hand_computed():
    x = torch.tensor([[1, 2], [3, 4], [5, 6], [7, 8]])
    mask = torch.tensor([False, True, False, True])
    assert torch.equal(masked_rows.reference(x, mask), torch.tensor([[3, 4], [7, 8]]))
    assert masked_rows.reference(x, torch.zeros(4, dtype=torch.bool)).shape == (0, 2)


def _mask(n, kind, seed=0):
    g = torch.Generator().manual_seed(seed)
    if kind == "random":
        return torch.rand(n, generator=g) < 0.5
    return torch.full((n,), kind == "all", dtype=torch.bool)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["random", "all", "none"])
@pytest.mark.parametrize("shape", [(1,), (7,), (33, 5), (4, 3, 2), (0, 6), (5, 0), (0,)], ids=str)
def test_cpu_op_is_reference(dtype, kind, shape):
    x = (torch.randn(shape) * 100).to(dtype)
    mask = _mask(shape[0], kind)
    y = torch.ops.torchtrt.masked_rows(x, mask)
    assert y.dtype == dtype and y.shape == (int(mask.sum()), *shape[1:])
    assert torch.equal(y, masked_rows.reference(x, mask))
    assert torch.equal(y, x[mask.nonzero().flatten()])


def test_fake_kernel_gives_an_unbacked_size():
    with FakeTensorMode(shape_env=ShapeEnv()):
        x = torch.empty(10, 3, 4, dtype=torch.float16)
        y = torch.ops.torchtrt.masked_rows(x, torch.empty(10, dtype=torch.bool))
        assert y.dtype == torch.float16 and tuple(y.shape[1:]) == (3, 4)
        (symbol,) = free_unbacked_symbols(y.shape[0])
        value_range = y.shape[0].node.shape_env.var_to_range[symbol]
        assert (int(value_range.lower), int(value_range.upper)) == (0, 10)


def test_fake_kernel_without_a_shape_env_refuses_dynamic_output():
    with FakeTensorMode(), pytest.raises(DynamicOutputShapeException):
        torch.ops.torchtrt.masked_rows(torch.empty(4, 2), torch.empty(4, dtype=torch.bool))


@pytest.mark.parametrize(
    "x, mask, message",
    [
        (
            torch.zeros(4, 2),
            torch.ones(4, dtype=torch.int32),
            r"torchtrt.masked_rows: argument 'mask' must have dtype in \{bool\}, got int32",
        ),
        (
            torch.zeros(4, 2),
            torch.ones(3, dtype=torch.bool),
            r"torchtrt.masked_rows: argument 'mask' must have shape \(4,\) to match the first dimension of 'x', "
            r"got \(3,\)",
        ),
        (
            torch.zeros(4, 2),
            torch.ones(4, 1, dtype=torch.bool),
            r"argument 'mask' must have shape \(4,\) to match the first dimension of 'x', got \(4, 1\)",
        ),
        (
            torch.zeros(()),
            torch.ones(1, dtype=torch.bool),
            r"torchtrt.masked_rows: argument 'x' must have at least 1 dimension, got shape \(\)",
        ),
        (
            torch.zeros(4, 2, dtype=torch.float64),
            torch.ones(4, dtype=torch.bool),
            r"argument 'x' must have dtype in \{float32, float16, bfloat16, int32, int64\}, got float64",
        ),
    ],
    ids=["mask-dtype", "mask-length", "mask-rank", "x-rank", "x-dtype"],
)
def test_invalid_args_are_rejected_with_a_clear_message(x, mask, message):
    with pytest.raises(SpecError, match=message):
        torch.ops.torchtrt.masked_rows(x, mask)
    with FakeTensorMode(shape_env=ShapeEnv()) as mode, pytest.raises(SpecError, match=message):
        torch.ops.torchtrt.masked_rows(
            mode.from_tensor(x, static_shapes=True), mode.from_tensor(mask, static_shapes=True)
        )


def test_symbolic_length_mismatch_is_a_spec_error():
    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        x, mask = mode.from_tensor(torch.zeros(4, 2)), mode.from_tensor(torch.ones(3, dtype=torch.bool))
        with pytest.raises(SpecError, match=r"argument 'mask' must have shape \(.+,\) to match the first dimension"):
            torch.ops.torchtrt.masked_rows(x, mask)


# ---------------------------------------------------------------------------------------------- planning


class _Select(torch.nn.Module):
    def forward(self, x, mask):
        return torch.ops.torchtrt.masked_rows(x * 2, mask) + 1


def _op_nodes(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and "torchtrt.masked_rows" in str(n.target)]


def _check_call(call, x_arg, mask_arg):
    # No field: masked_rows has no scalar argument, and its shape rules are compiled into the plugin library.
    assert call.fields == []
    assert call.creator_key == SPEC.creator_key and call.shape_inputs == []
    assert call.tensor_inputs == [x_arg, mask_arg]
    assert call.input_casts == [None, torch.int32]  # the bool mask reaches the plugin as INT32
    assert call.num_outputs == 2 and call.num_op_outputs == 1  # the size tensor stays inside the engine
    assert call.requires_output_allocator


def test_plan_plain_arguments():
    x, m = torch.randn(4, 2), _mask(4, "all")
    _check_call(converters.plan(SPEC, (x, m), {}), x, m)
    _check_call(converters.plan(SPEC, (), {"mask": m, "x": x}), x, m)


@pytest.mark.parametrize("dynamic", [False, True])
def test_plan_from_exported_graph(dynamic):
    rows = torch.export.Dim("rows", min=2, max=4096)
    shapes = {"x": {0: rows}, "mask": {0: rows}} if dynamic else None
    x, mask = torch.randn(16, 8), _mask(16, "random")
    ep = torch.export.export(_Select(), (x, mask), dynamic_shapes=shapes)
    (node,) = _op_nodes(ep.graph_module)
    _check_call(converters.plan_node(node), node.args[0], node.args[1])
    assert converters.validate_node(node)
    (symbol,) = free_unbacked_symbols(node.meta["val"].shape[0])
    assert node.meta["val"].shape[1] == 8
    torch.testing.assert_close(ep.module()(x, mask), _Select()(x, mask))


def test_validator_rejects_unsupported_dtypes():
    ep = torch.export.export(_Select(), (torch.randn(4, 2), _mask(4, "all")))
    (node,) = _op_nodes(ep.graph_module)
    assert converters.validate_node(node)
    node.args[1].meta["val"] = torch.empty(4, dtype=torch.uint8, device="meta")
    assert not converters.validate_node(node)


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)
def test_compile_fullgraph_with_data_dependent_output():
    backend = GraphRecorder()

    model = _Select()
    compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=True)
    for rows, kind in ((16, "random"), (37, "all"), (9, "none")):
        x, mask = torch.randn(rows, 3), _mask(rows, kind)
        torch.testing.assert_close(compiled(x, mask), model(x, mask))
    assert len(backend.graphs) == 1
    (node,) = _op_nodes(backend.graphs[0])
    _check_call(converters.plan(SPEC, node.args, node.kwargs), node.args[0], node.args[1])


def test_generic_converter_and_public_api():
    entry = torchtrt_plugins.get("masked_rows")
    assert entry is masked_rows.ENTRY and entry.spec is SPEC and entry.declaration is masked_rows.MASKED_ROWS
    assert converters.make_converter(entry).__name__ == "convert_masked_rows"
