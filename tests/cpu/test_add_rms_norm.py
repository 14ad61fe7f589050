"""add_rms_norm on the CPU: the mutating declaration, the reference against the unfused ops, its errors, the
functionalized converter plan, the lowering of the decoder block and the plugin's aliased output in the harness."""

import operator

import pytest
import torch
from models import DecoderBlock

import torchtrt_plugins
from torchtrt_plugins import SpecError, declare
from torchtrt_plugins.converters import _functionalized, plan, validate_node
from torchtrt_plugins.declare import DeclarationError
from torchtrt_plugins.lowering import add_rms_norm as add_rms_norm_pass
from torchtrt_plugins.lowering import rms_norm as rms_norm_pass
from torchtrt_plugins.ops import add_rms_norm
from torchtrt_plugins.testing import harness as H

SPEC = add_rms_norm.SPEC
AF2 = torch.ops.higher_order.auto_functionalized_v2


def unfused(x, residual, weight, eps):
    h = residual + x
    return torch.ops.torchtrt.rms_norm(h, weight, eps), h


def test_spec_declares_residual_mutated_and_aliased():
    assert SPEC.creator_key == ("AddRMSNorm", "1", "torchtrt")
    assert SPEC.mutated == ("residual",)
    assert [t.name for t in SPEC.inputs] == ["x", "residual", "weight"]
    assert SPEC.aliased_inputs == (1,) and SPEC.num_plugin_outputs == 2
    assert [f.name for f in SPEC.fields] == ["eps"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 8), (3, 5, 24), (7, 130)])
def test_op_is_exactly_the_residual_add_then_rms_norm(dtype, shape):
    g = torch.Generator().manual_seed(sum(shape))
    x, residual = (torch.randn(shape, generator=g).to(dtype) for _ in range(2))
    weight = torch.rand(shape[-1], generator=g).to(dtype) + 0.5
    expected, h = unfused(x, residual, weight, 1e-5)
    alias = residual
    y = torch.ops.torchtrt.add_rms_norm(x, residual, weight, 1e-5)
    assert alias is residual and torch.equal(residual, h)  # updated in place
    assert torch.equal(y, expected)


def test_opcheck():
    x, residual, weight = torch.randn(4, 16), torch.randn(4, 16), torch.rand(16)
    torch.library.opcheck(torch.ops.torchtrt.add_rms_norm.default, (x, residual, weight, 1e-6))


@pytest.mark.parametrize(
    ("residual", "match"),
    [
        (torch.zeros(4, 15), r"torchtrt\.add_rms_norm: argument 'residual' must have the shape of 'x'"),
        (torch.zeros(4, 16, dtype=torch.float16), r"argument 'residual' must have the same dtype as 'x'"),
    ],
)
def test_residual_of_another_shape_or_dtype_is_refused_by_name(residual, match):
    before = residual.clone()
    with pytest.raises(SpecError, match=match):
        torch.ops.torchtrt.add_rms_norm(torch.zeros(4, 16), residual, torch.ones(16), 1e-6)
    assert torch.equal(residual, before)


@pytest.mark.parametrize("eps", [0.0, float("nan")])
def test_eps_out_of_range_is_refused_by_name(eps):
    with pytest.raises(SpecError, match=r"torchtrt\.add_rms_norm: argument 'eps' must be a float > 0"):
        torch.ops.torchtrt.add_rms_norm(torch.zeros(2, 8), torch.zeros(2, 8), torch.ones(8), eps)


@pytest.fixture(scope="module")
def mutating_lib():
    lib = torch.library.Library("ttp_test_mutating", "FRAGMENT")
    lib.define("acc(Tensor x, Tensor(a!) y, float s=1.0) -> Tensor")
    lib.define("acc_list(Tensor x, Tensor(a!)[] ys) -> Tensor")
    lib.define("acc_view(Tensor(a!) x) -> Tensor(a!)")
    yield lib
    lib._destroy()


@pytest.mark.parametrize(
    ("op", "options", "match"),
    [
        ("acc", {"mutates": ("z",)}, r"mutates names 'z', which is no argument of"),
        ("acc", {"mutates": ("s",)}, r"mutates names 's', which is a float argument"),
        ("acc", {"mutates": ("x",)}, r"mutates names argument 'x', which the schema does not mark as mutated"),
        ("acc", {"mutates": ()}, r"the schema mutates \['y'\], which mutates=\[\] leaves out"),
        ("acc_list", {}, r"argument 'ys' is mutated but is not a tensor input"),
        ("acc_view", {}, r"return 0 aliases an argument"),
    ],
)
def test_mutation_declarations_that_cannot_be_a_plugin_are_refused_by_name(mutating_lib, op, options, match):
    with pytest.raises(DeclarationError, match=rf"ttp_test_mutating::{op}: .*{match}"):
        declare(f"ttp_test_mutating::{op}", **options)


def _functionalized_graph(dtype=torch.float32, shape=(2, 5, 16)):
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.rand(shape[-1]) + 0.5)

        def forward(self, x, h):
            h = h * 2
            return torch.ops.torchtrt.add_rms_norm(x, h, self.weight.to(dtype), 1e-5), h

    args = (torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype))
    return torch.export.export(Block(), args).run_decompositions().graph


def test_export_holds_the_op_functionalized_and_the_plan_adds_the_aliased_output():
    graph = _functionalized_graph()
    (node,) = [n for n in graph.nodes if n.target is AF2]
    entry, bound, after = _functionalized.unwrap(node.target, node.args, dict(node.kwargs))
    assert entry.spec is SPEC and after == ["residual"]
    call = plan(SPEC, (), bound)
    assert [t.name for t in call.tensor_inputs] == [bound["x"].name, bound["residual"].name, bound["weight"].name]
    assert (call.num_outputs, call.num_op_outputs, call.num_mutated) == (2, 1, 1)
    assert call.field_value("eps") == 1e-5


def test_a_mutated_view_or_another_op_is_not_unwrapped():
    kwargs = {"x": 1, "weight": 2, "eps": 1e-6, "_residual_base_index": 0, "_all_bases": [3], "_residual_size": (2,)}
    with pytest.raises(SpecError, match=r"argument 'residual' is updated in place as a view"):
        _functionalized.unwrap(AF2, (torch.ops.torchtrt.add_rms_norm.default,), kwargs)
    with pytest.raises(SpecError, match=r"not a declared mutating op"):
        _functionalized.unwrap(AF2, (torch.ops.aten.add_.Tensor,), {})


def test_the_mutating_op_itself_stays_in_pytorch():
    graph = torch.fx.Graph()
    x, r, w = (graph.placeholder(n) for n in "xrw")
    for node, val in zip((x, r, w), (torch.zeros(2, 8), torch.zeros(2, 8), torch.ones(8)), strict=True):
        node.meta["val"] = val
    node = graph.call_function(torch.ops.torchtrt.add_rms_norm.default, (x, r, w, 1e-6))
    assert validate_node(node) is False


def _block(dtype, hidden=64):
    torch.manual_seed(0)
    block = DecoderBlock(hidden, 2, 3 * hidden).to(dtype).eval()
    for module in block.modules():
        if hasattr(module, "variance_epsilon"):
            torch.nn.init.uniform_(module.weight, 0.5, 1.5)
    return block, torch.randn(2, 7, hidden, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_lowered_decoder_block_fuses_the_residual_add_and_matches_the_unfused_ops_exactly(dtype):
    block, x = _block(dtype)
    with torch.no_grad():
        unfused_gm = torch.export.export(block, (x,)).module()
        fused_gm = torch.export.export(block, (x,)).module()
    assert rms_norm_pass.run(unfused_gm) == 2
    unfused_gm.recompile()
    assert rms_norm_pass.run(fused_gm) == 2 and add_rms_norm_pass.run(fused_gm) == 1
    fused_gm.graph.lint()
    fused_gm.recompile()
    (node,) = [n for n in fused_gm.graph.nodes if n.target is AF2]
    (base,) = node.kwargs["_all_bases"]
    assert base.op == "call_function" and base.target is torch.ops.aten.linear.default  # not the block's input
    assert not [n for n in fused_gm.graph.nodes if n.target is torch.ops.aten.add.Tensor and n.users.keys() & {node}]
    with torch.no_grad():
        assert torch.equal(fused_gm(x), unfused_gm(x))


def test_lowering_reports_the_fusion_and_leaves_an_add_with_alpha():
    block, x = _block(torch.float32)
    with torch.no_grad():
        gm = torch.export.export(block, (x,)).module()
    _, report = torchtrt_plugins.lowering.lower_with_report(gm, residual_add=True)
    assert report == {
        "rms_norm": 2,
        "add_rms_norm": 1,
        "multi_scale_roi_align": 0,
        "multi_scale_deformable_attention": 0,
    }
    with torch.no_grad():
        gm = torch.export.export(block, (x,)).module()
    assert torchtrt_plugins.lowering.lower_with_report(gm)[1] == {
        "rms_norm": 2,
        "multi_scale_roi_align": 0,
        "multi_scale_deformable_attention": 0,
    }  # the default: ONNX-exportable

    class WithAlpha(torch.nn.Module):
        def forward(self, x, y, w):
            h = torch.add(x, y, alpha=2)
            return torch.ops.torchtrt.rms_norm(h, w, 1e-6), h

    gm = torch.export.export(WithAlpha(), (torch.randn(2, 8), torch.randn(2, 8), torch.ones(8))).module()
    assert add_rms_norm_pass.run(gm) == 0


def test_plugin_reports_the_residual_output_aliased_to_its_input(build):
    x, r, w = H.TensorArg((2, 3, 32)), H.TensorArg((2, 3, 32)), H.TensorArg((32,))
    result = H.run_call(plan(SPEC, (x, r, w, 1e-6)), x, r, w, library=build.library, enqueue=False)
    result.assert_conformant()
    assert result.output_types == ["FLOAT", "FLOAT"]
    assert result.aliased_inputs == [-1, 1]


def test_plugin_without_mutation_keeps_the_version_1_build_interface(build):
    x, w = H.TensorArg((2, 32)), H.TensorArg((32,))
    result = H.run_call(
        plan(torchtrt_plugins.get("rms_norm").spec, (x, w, 1e-6)), x, w, library=build.library, enqueue=False
    )
    assert result.aliased_inputs is None


def test_fake_of_the_lowered_wrapper_matches_the_graph():
    graph = _functionalized_graph(torch.bfloat16)
    (node,) = [n for n in graph.nodes if n.target is AF2]
    getitems = sorted((u for u in node.users if u.target is operator.getitem), key=lambda u: u.args[1])
    assert [tuple(u.meta["val"].shape) for u in getitems] == [(2, 5, 16), (2, 5, 16)]
