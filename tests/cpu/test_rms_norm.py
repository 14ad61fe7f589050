"""rms_norm on the CPU: spec, reference, fake kernel, converter plan and validator."""

import pytest
import torch
from fixtures import GraphRecorder
from torch._subclasses.fake_tensor import FakeTensorMode

import torchtrt_plugins
from torchtrt_plugins import SpecError
from torchtrt_plugins.converters import plan, plan_node, validate_node
from torchtrt_plugins.ops import rms_norm

SPEC = rms_norm.SPEC


def test_spec_names_are_ours():
    assert SPEC.qualname == "torchtrt::rms_norm"
    assert SPEC.creator_key == ("RMSNorm", "3", "torchtrt")
    assert SPEC.plugin_namespace not in ("tensorrt", "torch_tensorrt", "")
    assert [f.name for f in SPEC.fields] == ["eps", "weight_offset"]
    assert SPEC.field_by_name("eps").type == "FLOAT64"
    assert [t.value for t in SPEC.tactics] == [1, 2, 3]


def test_schema_registered_from_spec():
    schema = torch.ops.torchtrt.rms_norm.default._schema
    assert str(schema) == f"torchtrt::rms_norm{SPEC.schema}".replace("1e-06", "9.9999999999999995e-07")


def test_reference_matches_hand_computed():
    x = torch.tensor([[3.0, 4.0], [1.0, -1.0]])
    w = torch.tensor([1.0, 2.0])
    eps = 0.5
    # row 0: mean(x^2) = 12.5 -> rsqrt(13) ; row 1: mean = 1 -> rsqrt(1.5)
    expected = torch.tensor(
        [[3 / 13**0.5, 8 / 13**0.5], [1 / 1.5**0.5, -2 / 1.5**0.5]],
    )
    torch.testing.assert_close(rms_norm.reference(x, w, eps), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, 5, 33), (0, 8), (4, 0)])
def test_cpu_op_is_reference(dtype, shape):
    x = torch.randn(shape).to(dtype)
    w = torch.randn(shape[-1]).to(dtype)
    y = torch.ops.torchtrt.rms_norm(x, w, 1e-5)
    assert y.dtype == dtype and y.shape == x.shape
    torch.testing.assert_close(y, rms_norm.reference(x, w, 1e-5), atol=0, rtol=0)


def test_reference_rounds_once():
    x = torch.randn(16, 64, dtype=torch.bfloat16)
    w = torch.randn(64, dtype=torch.bfloat16)
    exact = (x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()).to(torch.bfloat16)
    tol = SPEC.tolerance(torch.bfloat16)
    torch.testing.assert_close(rms_norm.reference(x, w), exact, atol=tol.atol, rtol=tol.rtol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_weight_offset_is_added_in_fp32(dtype):
    """Gemma's ``x * (1 + w)``: the sum formed in fp32, one rounding; ``1 + w`` formed in fp16/bf16 first rounds
    twice and lands elsewhere for some elements."""
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(0)).to(dtype)
    w = (0.3 * torch.randn(256, generator=torch.Generator().manual_seed(1))).to(dtype)
    normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
    gemma = (normed * (1.0 + w.float())).to(dtype)
    y = torch.ops.torchtrt.rms_norm(x, w, 1e-6, 1.0)
    torch.testing.assert_close(y, gemma, atol=0, rtol=0)
    assert not torch.equal(torch.ops.torchtrt.rms_norm(x, (1.0 + w.float()).to(dtype), 1e-6), gemma)


@pytest.mark.parametrize("offset", [float("nan"), float("inf"), "1"])
def test_invalid_weight_offset_is_rejected_with_a_clear_message(offset):
    with pytest.raises(SpecError, match=r"torchtrt.rms_norm: argument 'weight_offset' must be a float, got"):
        rms_norm.check_args(torch.randn(2, 4), torch.randn(4), 1e-6, offset)


def test_fake_kernel_shapes_and_checks():
    with FakeTensorMode():
        x = torch.empty(2, 3, 4096, dtype=torch.bfloat16)
        w = torch.empty(4096, dtype=torch.bfloat16)
        y = torch.ops.torchtrt.rms_norm(x, w)
        assert y.shape == (2, 3, 4096) and y.dtype == torch.bfloat16
        with pytest.raises(SpecError, match=r"rms_norm: argument 'weight' must have shape \(4096,\)"):
            torch.ops.torchtrt.rms_norm(x, torch.empty(8, dtype=torch.bfloat16))
    # Dtypes are the declaration's, checked by the eager op and the converter's validator (not the fake kernel).
    with pytest.raises(SpecError, match="argument 'weight' must have the same dtype as 'x'"):
        torch.ops.torchtrt.rms_norm(torch.randn(2, 8), torch.randn(8, dtype=torch.float16))


@pytest.mark.parametrize("eps", [0.0, -1e-6, float("nan"), float("inf")])
def test_invalid_eps_is_rejected_with_a_clear_message(eps):
    x, w = torch.randn(2, 4), torch.randn(4)
    with pytest.raises(SpecError, match=r"torchtrt.rms_norm: argument 'eps' must be a float > 0"):
        torch.ops.torchtrt.rms_norm(x, w, eps)


def test_int_dtype_is_rejected():
    with pytest.raises(SpecError, match=r"argument 'x' must have dtype in \{float32, float16, bfloat16\}, got int32"):
        torch.ops.torchtrt.rms_norm(torch.ones(2, 4, dtype=torch.int32), torch.ones(4, dtype=torch.int32))


class _Model(torch.nn.Module):
    def __init__(self, hidden=16, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        return torch.ops.torchtrt.rms_norm(x, self.weight, self.eps) * 2


def _op_nodes(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and "torchtrt.rms_norm" in str(n.target)]


@pytest.mark.parametrize("dynamic", [False, True])
def test_plan_from_exported_graph(dynamic):
    x = torch.randn(4, 3, 16)
    shapes = {"x": {0: torch.export.Dim("batch", min=1, max=64)}} if dynamic else None
    ep = torch.export.export(_Model(eps=1e-5), (x,), dynamic_shapes=shapes)
    (node,) = _op_nodes(ep.graph_module)
    call = plan_node(node)
    assert call.creator_key == SPEC.creator_key
    assert call.fields[0].name == "eps" and call.fields[0].type == "FLOAT64"
    assert call.field_value("eps") == pytest.approx(1e-5)
    assert call.shape_inputs == []
    assert [t.name for t in call.tensor_inputs] == [a.name for a in node.args[:2]]
    assert validate_node(node)
    if dynamic:
        assert isinstance(node.meta["val"].shape[0], torch.SymInt)


def test_plan_defaults_and_numpy_field():
    call = plan(SPEC, (torch.randn(2, 4), torch.randn(4)), {})
    assert call.field_value("eps") == pytest.approx(1e-6)
    array = call.fields[0].numpy()
    assert array.dtype.name == "float64" and array.shape == (1,)


def test_plan_carries_the_weight_offset_field():
    call = plan(SPEC, (torch.randn(2, 4), torch.randn(4), 1e-6), {"weight_offset": 1.0})
    assert [(f.name, f.type, f.value) for f in call.fields[:2]] == [
        ("eps", "FLOAT64", 1e-6),
        ("weight_offset", "FLOAT64", 1.0),
    ]
    assert plan(SPEC, (torch.randn(2, 4), torch.randn(4)), {}).field_value("weight_offset") == 0.0


def test_plan_rejects_invalid_eps():
    with pytest.raises(SpecError, match="argument 'eps' must be a float > 0, got -1"):
        plan(SPEC, (torch.randn(2, 4), torch.randn(4), -1.0), {})


def test_validator_rejects_unsupported_dtype():
    ep = torch.export.export(_Model(), (torch.randn(2, 16),))
    (node,) = _op_nodes(ep.graph_module)
    assert validate_node(node)
    node.meta["val"] = torch.empty(2, 16, dtype=torch.float64, device="meta")
    node.args[0].meta["val"] = torch.empty(2, 16, dtype=torch.float64, device="meta")
    assert not validate_node(node)


def test_compile_keeps_op_in_graph():
    backend = GraphRecorder()

    model = _Model()
    x = torch.randn(3, 16)
    out = torch.compile(model, backend=backend, fullgraph=True)(x)
    torch.testing.assert_close(out, model(x))
    assert any("torchtrt.rms_norm" in s for s in backend.targets)


def test_public_api():
    assert torchtrt_plugins.get("rms_norm").spec is SPEC
    assert "rms_norm" in [e.spec.name for e in torchtrt_plugins.all_ops()]


def test_entry_for_target_accepts_overloads_and_packets():
    from torchtrt_plugins.converters import entry_for_target

    assert entry_for_target(torch.ops.torchtrt.rms_norm.default).spec is SPEC
    assert entry_for_target(torch.ops.torchtrt.rms_norm).spec is SPEC  # what symbolic_trace records
    assert entry_for_target(torch.ops.aten.add.Tensor) is None
