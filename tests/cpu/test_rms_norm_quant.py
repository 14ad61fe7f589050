"""rms_norm_fp8 / rms_norm_int8: declarations, derivation, the CPU kernel (the reference), bad input, converter plan and
ONNX export of the quantized output."""

from __future__ import annotations

import math

import pytest
import torch

import torchtrt_plugins  # noqa: F401
from torchtrt_plugins import _derive, registry
from torchtrt_plugins.converters import plan_node, validate_node
from torchtrt_plugins.ops import rms_norm_quant
from torchtrt_plugins.spec import SpecError

OPS = {"rms_norm_fp8": torch.float8_e4m3fn, "rms_norm_int8": torch.int8}


def _op(name):
    return getattr(torch.ops.torchtrt, name)


@pytest.mark.parametrize(("name", "plugin"), [("rms_norm_fp8", "RMSNormFP8"), ("rms_norm_int8", "RMSNormINT8")])
def test_declarations(name, plugin):
    spec = registry.get(name).spec
    assert spec.creator_key == (plugin, "1", "torchtrt")
    assert [t.name for t in spec.inputs] == ["x", "weight", "scale"]
    assert spec.input("scale").dtypes == (torch.float32,)
    assert [f.name for f in spec.fields] == ["eps", "weight_offset"]
    assert sorted(t.value for t in spec.tactics) == [1, 2, 3]


@pytest.mark.parametrize(("name", "code"), [("rms_norm_fp8", 6), ("rms_norm_int8", 2)])
def test_derived_output_type_is_the_quantized_one(name, code):
    """The shape programs give the plugin's output type as TensorRT's kFP8 (6) / kINT8 (2), for a scale of rank 0
    and of rank 1 alike (one program per accepted input ranks)."""
    declaration = registry.get(name).declaration
    programs = declaration.compiled_programs
    ranks = set()
    for tokens in programs:
        program = _derive.Program.parse(tokens)
        ranks.add(program.input_ranks[2])
        assert [dtype for dtype, _ in program.outputs] == [code]
    assert {0, 1} <= ranks


def test_reference_by_hand():
    x = torch.tensor([[3.0, -4.0]])  # rms = sqrt(12.5)
    w = torch.tensor([1.0, 2.0])
    y = x / math.sqrt(12.5 + 1e-6) * w  # 0.8485, -2.2627
    q = rms_norm_quant.reference_int8(x, w, torch.tensor(0.01))
    assert q.tolist() == [[round(float(y[0, 0]) / 0.01), -128]]  # 85, saturated
    f = rms_norm_quant.reference_fp8(x, w, torch.tensor(0.001))
    assert f.dtype == torch.float8_e4m3fn and f.float().tolist() == [[448.0, -448.0]]  # saturated, not NaN
    assert rms_norm_quant.reference_fp8(x, w, torch.tensor(1.0)).float().tolist() == [[0.875, -2.25]]


def test_int8_rounds_half_to_even():
    x = torch.ones(1, 4)  # rms_norm of ones is 1 (eps aside): the weight times 1
    w = torch.tensor([0.5, 1.5, 2.5, -2.5])
    q = rms_norm_quant.reference_int8(x, w, torch.tensor(1.0), 0.0)
    assert q.tolist() == [[0, 2, 2, -2]]


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("shape", "scale_shape"), [((3, 17), ()), ((2, 5, 33), (1,)), ((1, 4096), ())])
def test_cpu_op_is_the_reference(name, dtype, shape, scale_shape):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to(dtype)
    w = (1 + 0.1 * torch.randn(shape[-1], generator=g)).to(dtype)
    scale = torch.full(scale_shape, 0.02)
    y = _op(name)(x, w, scale, 1e-5, 0.25)
    assert y.dtype == OPS[name] and y.shape == x.shape
    expected = getattr(rms_norm_quant, f"reference_{'fp8' if name.endswith('fp8') else 'int8'}")(
        x, w, scale, 1e-5, 0.25
    )
    assert torch.equal(y.view(torch.int8), expected.view(torch.int8))


@pytest.mark.parametrize("name", OPS)
def test_fake_kernel(name):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        y = _op(name)(
            torch.empty(2, 3, 64, dtype=torch.bfloat16), torch.empty(64, dtype=torch.bfloat16), torch.empty(())
        )
    assert y.shape == (2, 3, 64) and y.dtype == OPS[name]


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("value", [0.0, -0.5, float("nan"), float("inf")])
def test_bad_scale_value_is_an_error_naming_op_and_argument(name, value):
    with pytest.raises(SpecError, match=rf"torchtrt\.{name}: argument 'scale' must be a finite float > 0, got"):
        _op(name)(torch.randn(2, 8), torch.ones(8), torch.tensor(value))


@pytest.mark.parametrize("name", OPS)
def test_bad_scale_dtype_and_shape(name):
    x, w = torch.randn(2, 8), torch.ones(8)
    with pytest.raises(SpecError, match=rf"{name}: argument 'scale' must have dtype in \{{float32\}}, got float16"):
        _op(name)(x, w, torch.tensor(1.0, dtype=torch.float16))
    with pytest.raises(SpecError, match=rf"{name}: argument 'scale' must hold one value .*got shape \(2,\)"):
        _op(name)(x, w, torch.ones(2))
    with pytest.raises(SpecError, match=rf"{name}: argument 'scale' must hold one value .*got shape \(1, 1\)"):
        _op(name)(x, w, torch.ones(1, 1))


@pytest.mark.parametrize("name", OPS)
def test_bad_x_weight_and_eps(name):
    with pytest.raises(SpecError, match=rf"{name}: argument 'x' must have dtype in \{{float32, float16, bfloat16\}}"):
        _op(name)(torch.ones(2, 4, dtype=torch.int32), torch.ones(4, dtype=torch.int32), torch.tensor(1.0))
    with pytest.raises(SpecError, match=rf"{name}: argument 'weight' must have shape \(8,\)"):
        _op(name)(torch.randn(2, 8), torch.ones(4), torch.tensor(1.0))
    with pytest.raises(SpecError, match=rf"{name}.*'eps'"):
        _op(name)(torch.randn(2, 8), torch.ones(8), torch.tensor(1.0), 0.0)


class _Quantized(torch.nn.Module):
    def __init__(self, name, hidden=16):
        super().__init__()
        self.op = _op(name)
        self.weight = torch.nn.Parameter(torch.randn(hidden))
        self.register_buffer("scale", torch.tensor(0.05))

    def forward(self, x):
        return self.op(x, self.weight, self.scale, 1e-5)


@pytest.mark.parametrize("name", OPS)
def test_plan_takes_the_scale_as_a_tensor_input(name):
    x = torch.randn(4, 3, 16)
    ep = torch.export.export(_Quantized(name), (x,), dynamic_shapes={"x": {0: torch.export.Dim("b", max=64)}})
    (node,) = [n for n in ep.graph_module.graph.nodes if n.op == "call_function" and name in str(n.target)]
    call = plan_node(node)
    assert call.creator_key == registry.get(name).spec.creator_key
    assert [t.name for t in call.tensor_inputs] == [a.name for a in node.args[:3]]
    assert [f.name for f in call.fields] == ["eps", "weight_offset"]
    assert node.meta["val"].dtype == OPS[name]
    assert validate_node(node)


@pytest.mark.parametrize(("name", "element"), [("rms_norm_fp8", "FLOAT8E4M3FN"), ("rms_norm_int8", "INT8")])
def test_onnx_node_outputs_the_quantized_type(name, element):
    onnx = pytest.importorskip("onnx", reason="needs onnx (pip install -e '.[test]')")
    pytest.importorskip("onnxscript", reason="the dynamo ONNX exporter needs onnxscript")
    import export_cases

    (case,) = [c for c in export_cases.cases() if c.op == name and c.variant == "static"]
    model = case.export("dynamo")
    (node,) = [n for n in model.graph.node if n.op_type == registry.get(name).spec.plugin_name]
    types = {v.name: v.type.tensor_type for v in [*model.graph.value_info, *model.graph.output, *model.graph.input]}
    assert types[node.output[0]].elem_type == getattr(onnx.TensorProto, element)
    initializers = {i.name: i for i in model.graph.initializer}
    scale = initializers[node.input[2]]  # the scale buffer: an initializer, the same one the consumer may use
    assert scale.data_type == onnx.TensorProto.FLOAT and onnx.numpy_helper.to_array(scale).item() == pytest.approx(0.02)
    attrs = {a.name for a in node.attribute}
    assert attrs == {"eps", "weight_offset", "plugin_version", "plugin_namespace"}


@pytest.mark.parametrize("name", OPS)
def test_check_op_without_a_gpu(name):
    """check_op's CPU half: eager vs reference, opcheck, torch.compile, the plan, the harness's build-phase checks
    (FP8/INT8 output formats included) and NVIDIA's registry where tensorrt_rtx is installed."""
    from torchtrt_plugins.testing import check_op

    x, w = torch.randn(33, 200).bfloat16(), (1 + 0.1 * torch.randn(200)).bfloat16()
    reference = rms_norm_quant.reference_fp8 if name.endswith("fp8") else rms_norm_quant.reference_int8
    samples = [(x, w, torch.tensor(0.02), 1e-5), (x[:1], w, torch.tensor([0.05]), 1e-6, 0.5)]
    report = check_op(_op(name), samples, reference=reference)
    assert {"eager", "opcheck", "compile", "plan"} <= set(report.passed), report
