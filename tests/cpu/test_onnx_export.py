"""ONNX export of every op as a TensorRT plugin node: the structure TensorRT's ONNX parser needs.

The cases come from ``tests/export_cases.py`` (every registered op has some); each is exported
with the dynamo exporter and, where the case allows, the TorchScript one. What the node must look like is
restated here from the parser's own rules (onnx-tensorrt ``FallbackPluginImporter``/``loadFields``), not read
from the module under test: op_type = plugin name, string attributes plugin_version/plugin_namespace, one
attribute per field of the type the parser turns into the field's PluginFieldType, tensor inputs in plugin order
(then shape inputs, listed in ``tensorrt_plugin_shape_input_indices``), one output per plugin output.
"""

from __future__ import annotations

import warnings

import declared_export_cases
import numpy as np
import pytest
import torch

onnx = pytest.importorskip("onnx", reason="cpu tier ONNX export tests need onnx (pip install -e '.[test]')")
pytest.importorskip("onnxscript", reason="the dynamo ONNX exporter needs onnxscript (pip install -e '.[test]')")

import export_cases  # noqa: E402

import torchtrt_plugins  # noqa: E402
from torchtrt_plugins import onnx as tonnx  # noqa: E402
from torchtrt_plugins import plan as planning  # noqa: E402
from torchtrt_plugins import registry  # noqa: E402
from torchtrt_plugins import spec as spec_mod  # noqa: E402

A = onnx.AttributeProto
#: PluginFieldType -> (ONNX attribute type, tensor element type) that the parser's loadFields turns back into it
#: (an INT attribute becomes kINT32: the parser has no kINT64 path, TensorRT-RTX rejects INT16 tensors, and our
#: plugins read any integer type).
PARSER_ATTRIBUTE = {
    "FLOAT32": (A.FLOAT, None),
    "FLOAT64": (A.TENSOR, onnx.TensorProto.DOUBLE),
    "FLOAT16": (A.TENSOR, onnx.TensorProto.FLOAT16),
    "INT8": (A.TENSOR, onnx.TensorProto.INT8),
    "INT16": (A.INT, None),
    "INT32": (A.INT, None),
    "INT64": (A.INT, None),
    "CHAR": (A.STRING, None),
}
ONNX_DTYPE = {
    torch.float32: onnx.TensorProto.FLOAT,
    torch.float16: onnx.TensorProto.FLOAT16,
    torch.bfloat16: onnx.TensorProto.BFLOAT16,
    torch.int8: onnx.TensorProto.INT8,
    torch.int32: onnx.TensorProto.INT32,
    torch.int64: onnx.TensorProto.INT64,
    torch.bool: onnx.TensorProto.BOOL,
}

CASES = export_cases.cases()
#: Ops declared with torchtrt_plugins.declare by other packages (examples/myops, torchtrt_plugins.vision).
DECLARED = declared_export_cases.cases()
EXPORTS = [(c, e) for c in CASES + DECLARED for e in ("dynamo", "torchscript") if e == "dynamo" or c.torchscript]


_exported: dict[str, onnx.ModelProto] = {}


@pytest.fixture(params=EXPORTS, ids=[f"{c.id}-{e}" for c, e in EXPORTS])
def exported(request) -> tuple[export_cases.ExportCase, str, onnx.ModelProto]:
    case, exporter = request.param
    key = f"{case.id}-{exporter}"
    if key not in _exported:
        _exported[key] = case.export(exporter)
    return case, exporter, _exported[key]


def planned_call(case: export_cases.ExportCase) -> tuple[registry.OpEntry, planning.PluginCall, torch.fx.Node]:
    """The converter's plan of the op's node in torch.export's graph: the expected fields and inputs."""
    program = torch.export.export(case.module, case.args, dynamic_shapes=case.dynamic_shapes())
    nodes = [n for n in program.graph.nodes if planning.entry_for_target(n.target) is not None]
    assert len(nodes) == 1, nodes
    entry = planning.entry_for_target(nodes[0].target)
    return entry, planning.plan(entry.spec, nodes[0].args, nodes[0].kwargs), nodes[0]


def value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto.Tensor]:
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    types = {v.name: v.type.tensor_type for v in [*graph.input, *graph.value_info, *graph.output]}
    for init in graph.initializer:
        types[init.name] = onnx.helper.make_tensor_type_proto(init.data_type, list(init.dims)).tensor_type
    return types


def plugin_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.domain.startswith(tonnx.DOMAIN_PREFIX)]


def test_every_op_has_a_case():
    # add_rms_norm: none yet (torch's dynamo exporter fails on its functionalized node; export_cases says why).
    assert {c.op for c in CASES} == {e.spec.name for e in registry.all_ops()} - {"add_rms_norm"}


def test_plugin_node(exported):
    case, exporter, model = exported
    entry, call, _ = planned_call(case)
    spec = entry.spec
    onnx.checker.check_model(model)
    (node,) = plugin_nodes(model)
    assert node.op_type == spec.plugin_name
    assert node.domain == tonnx.domain(spec) and node.domain != ""
    assert {o.domain: o.version for o in model.opset_import}[node.domain] == tonnx.DOMAIN_VERSION
    # The parser dispatches on op_type alone: it must not name a standard op.
    assert not onnx.defs.has(node.op_type)

    attrs = {a.name: a for a in node.attribute}
    assert attrs["plugin_version"].type == A.STRING and attrs["plugin_version"].s.decode() == spec.plugin_version
    assert attrs["plugin_namespace"].type == A.STRING and attrs["plugin_namespace"].s.decode() == spec.plugin_namespace
    symbolic = set(case.symbolic_args)
    # Every field of the planned call: the op's scalar arguments, nothing derived (the rules are in the library).
    assert [v.name for v in call.fields] == [f.name for f in spec.fields]
    for value in call.fields:
        attr = attrs[value.name]
        kind, element = PARSER_ATTRIBUTE[value.type]
        many = isinstance(value.value, list)
        assert attr.type == (A.INTS if many and kind == A.INT else kind), (value.name, attr)
        got = onnx.helper.get_attribute_value(attr)
        if element is not None:
            assert attr.t.data_type == element
            got = onnx.numpy_helper.to_array(attr.t).reshape(-1).tolist()
            got = got[0] if len(got) == 1 else got
        assert got == pytest.approx(value.value, rel=1e-6), value.name
    fields = {v.name for v in call.fields}
    extra = set(attrs) - fields - {"plugin_version", "plugin_namespace", tonnx.SHAPE_INPUT_INDICES}
    assert not extra

    # Tensor inputs in plugin order (dtype the plugin takes, rank), then shape inputs: 1-element int64 tensors.
    n_tensor = len(spec.inputs)
    assert len(node.input) == n_tensor + len(symbolic)
    types = value_types(model)
    producers = {o: n for n in model.graph.node for o in n.output}
    for tspec, name, planned in zip(spec.inputs, node.input, call.tensor_inputs, strict=False):
        fake = planned.meta["val"]
        want = tspec.plugin_dtype or fake.dtype
        assert types[name].elem_type == ONNX_DTYPE[want], (tspec.name, types[name])
        assert len(types[name].shape.dim) == fake.dim(), tspec.name
        if tspec.plugin_dtype is not None:
            cast = producers[name]
            assert cast.op_type == "Cast" and cast.attribute[0].i == ONNX_DTYPE[tspec.plugin_dtype]
    if symbolic:
        assert list(attrs[tonnx.SHAPE_INPUT_INDICES].ints) == list(range(n_tensor, n_tensor + len(symbolic)))
        for name in node.input[n_tensor:]:
            assert types[name].elem_type == onnx.TensorProto.INT64
            assert [d.dim_value for d in types[name].shape.dim] == [1]
    else:
        assert tonnx.SHAPE_INPUT_INDICES not in attrs

    # Every plugin output is named (the parser requires as many as the plugin has); the op's own outputs follow
    # the fake kernel, a data-dependent size as a symbolic dim of its own.
    assert len(node.output) == call.num_outputs and all(node.output)
    y = types[node.output[0]]
    input_dims = {d.dim_param for v in model.graph.input for d in v.type.tensor_type.shape.dim if d.dim_param}
    if spec.requires_output_allocator:
        assert y.shape.dim[0].dim_param and y.shape.dim[0].dim_param not in input_dims, y
    if exporter == "dynamo":
        _, _, fx_node = planned_call(case)
        val = fx_node.meta["val"]
        for name, fake in zip(node.output, val if isinstance(val, (tuple, list)) else (val,), strict=False):
            for dim, size in zip(types[name].shape.dim, fake.shape, strict=True):
                if isinstance(size, int):
                    assert dim.dim_value == size, name
                else:
                    assert dim.dim_param, types[name]


def test_one_call_export_helper(tmp_path):
    case = CASES[0]
    path = tmp_path / "model.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tonnx.export(case.module, case.args, path)
        tonnx.export(case.module, case.args, tmp_path / "ts.onnx", dynamo=False, input_names=case.input_names)
    for file in (path, tmp_path / "ts.onnx"):
        model = onnx.load(file)
        assert [n.op_type for n in plugin_nodes(model)] == [torchtrt_plugins.get(case.op).spec.plugin_name]


def test_translation_table_covers_every_overload():
    """Declared ops included (DECLARED imported them): ``translation_table()`` and ``export`` take every op."""
    table = tonnx.translation_table()
    assert {c.op for c in DECLARED} <= {e.spec.qualname for e in registry.registered_ops()}
    for entry in registry.registered_ops():
        packet = tonnx.torch_op(entry.spec)
        assert {getattr(packet, o) for o in packet.overloads()} <= set(table)


# ---------------------------------------------------------------------------- a user-declared op


@pytest.fixture(scope="module")
def user_op():
    """An op with a spec written by hand (not registered), with a field of every type: more types than a declaration
    makes (FLOAT64, INT64, INT32), which a hand-written node or another exporter may give. Its entry carries the op's
    declaration, as every entry does; exporting a spec that is not registered as it is derives nothing."""
    lib = torch.library.Library(spec_mod.NAMESPACE, "FRAGMENT")
    name = "onnx_export_test_scale"
    schema = "(Tensor x, float f32, float f64, float f16, int i8, int i16, int i32, int i64) -> Tensor"
    lib.define(f"{name}{schema}")
    lib.impl(name, lambda x, *args: x.clone(), "CompositeExplicitAutograd")
    torch.library.register_fake(f"{spec_mod.NAMESPACE}::{name}", lambda x, *args: torch.empty_like(x), lib=lib)
    types = {"f32": "FLOAT32", "f64": "FLOAT64", "f16": "FLOAT16", "i8": "INT8", "i16": "INT16", "i32": "INT32"}
    types["i64"] = "INT64"
    spec = spec_mod.OpSpec(
        name=name,
        schema=schema,
        plugin_name="OnnxExportTestScale",
        inputs=(spec_mod.TensorSpec("x", (torch.float32,)),),
        outputs=(spec_mod.TensorSpec("y", (torch.float32,)),),
        fields=tuple(spec_mod.FieldSpec(arg, t, arg=arg) for arg, t in types.items()),
        plugin_namespace="user_ns",
    )
    declaration = torchtrt_plugins.Declaration(f"{spec_mod.NAMESPACE}::{name}")
    entry = registry.OpEntry(
        spec, reference=lambda x, *a: x, fake=lambda x, *a: torch.empty_like(x), declaration=declaration
    )
    yield entry
    lib._destroy()


class UserOpModel(torch.nn.Module):
    def __init__(self, i64: int = 2**31 - 1):
        super().__init__()
        self.i64 = i64

    def forward(self, x):
        return torch.ops.torchtrt.onnx_export_test_scale(x, 0.5, 0.25, 1.5, -3, 300, -70000, self.i64)


def test_user_op_exports_every_field_type(user_op):
    table = tonnx.translation_table([user_op])
    program = torch.onnx.export(UserOpModel().eval(), (torch.randn(2, 3),), dynamo=True, custom_translation_table=table)
    (node,) = plugin_nodes(program.model_proto)
    assert node.op_type == "OnnxExportTestScale" and node.domain == f"{tonnx.DOMAIN_PREFIX}.user_ns"
    attrs = {a.name: a for a in node.attribute}
    assert attrs["plugin_namespace"].s == b"user_ns"
    expected = {"f32": 0.5, "f64": 0.25, "f16": 1.5, "i8": -3, "i16": 300, "i32": -70000, "i64": 2**31 - 1}
    for fspec in user_op.spec.fields:
        kind, element = PARSER_ATTRIBUTE[fspec.type]
        attr = attrs[fspec.name]
        assert attr.type == kind, fspec.name
        if element is None:
            assert onnx.helper.get_attribute_value(attr) == expected[fspec.name]
        else:
            assert attr.t.data_type == element
            assert onnx.numpy_helper.to_array(attr.t).tolist() == [expected[fspec.name]]


def test_int64_field_beyond_32_bits_is_an_export_error(user_op):
    with pytest.raises(Exception) as info:
        torch.onnx.export(
            UserOpModel(i64=2**31).eval(),
            (torch.randn(2, 3),),
            dynamo=True,
            custom_translation_table=tonnx.translation_table([user_op]),
        )
    chain = []
    err = info.value
    while err is not None:
        chain.append(err)
        err = err.__cause__
    (ours,) = [e for e in chain if isinstance(e, tonnx.OnnxExportError)]
    message = str(ours)
    assert message.startswith("torchtrt.onnx_export_test_scale: argument 'i64' must fit in 32 bits"), message
    assert str(2**31) in message and "kINT32" in message


def test_symbolic_value_for_a_field_that_is_not_a_shape_input_is_an_export_error():
    from onnxscript import ir

    translate = tonnx.translation_table()[torch.ops.torchtrt.pad_to.default]
    x = ir.Value(name="x", shape=ir.Shape([1, 2, 3, 4]), type=ir.TensorType(ir.DataType.FLOAT))
    with pytest.raises(spec_mod.SpecError, match=r"torchtrt.pad_to: argument 'value' must be a constant"):
        translate(x, 3, 4, ir.Value(name="value"))


def test_plugin_named_like_a_standard_op_is_an_export_error():
    spec = torchtrt_plugins.get("rms_norm").spec
    call = planning.PluginCall("rms_norm", "Pad", "1", spec_mod.NAMESPACE, [], [])
    with pytest.raises(tonnx.OnnxExportError, match=r"torchtrt::rms_norm: plugin name 'Pad' is also a standard ONNX"):
        tonnx.attribute_values(spec, call)


def test_field_attribute_table_matches_the_parser():
    for field_type, (kind, element) in PARSER_ATTRIBUTE.items():
        encoding = tonnx.field_attribute(field_type)
        assert getattr(A, encoding.kind) == kind
        if element is not None:
            assert onnx.helper.np_dtype_to_tensor_dtype(np.dtype(encoding.tensor_dtype)) == element


@pytest.mark.parametrize("case", export_cases.end_to_end_cases(), ids=lambda c: c.id)
def test_lowered_decoder_block_exports_two_rms_norm_nodes(case: export_cases.ExportCase):
    model = case.export("dynamo")
    onnx.checker.check_model(model)
    nodes = plugin_nodes(model)
    spec = torchtrt_plugins.get("rms_norm").spec
    assert [n.op_type for n in nodes] == [spec.plugin_name] * 2
    types = value_types(model)
    for node in nodes:
        (eps,) = [a for a in node.attribute if a.name == "eps"]
        # A FLOAT64 field travels as a DOUBLE tensor attribute, which the parser turns into a kFLOAT64 field.
        assert onnx.numpy_helper.to_array(eps.t).tolist() == [pytest.approx(1e-6)]
        assert [types[i].elem_type for i in node.input] == [ONNX_DTYPE[case.args[0].dtype]] * 2
    # The rest of the block stays ordinary ONNX.
    assert {"MatMul", "Softmax"} <= {n.op_type for n in model.graph.node}


# ---------------------------------------------------------------------------- declared ops (torchtrt_plugins.declare)


@pytest.mark.parametrize("case", DECLARED, ids=lambda c: c.id)
def test_declared_op_exports_with_the_one_call_helper(case: export_cases.ExportCase, tmp_path):
    """``torchtrt_plugins.onnx.export`` with no table of ours: the declared op becomes its plugin node."""
    spec = registry.get(case.op).spec
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tonnx.export(case.module, case.args, tmp_path / "model.onnx", dynamic_shapes=case.dynamic_shapes())
    (node,) = plugin_nodes(onnx.load(tmp_path / "model.onnx"))
    assert (node.op_type, node.domain) == (spec.plugin_name, f"{tonnx.DOMAIN_PREFIX}.{spec.plugin_namespace}")


def test_integer_field_beyond_32_bits_is_an_export_error():
    spec = registry.get("torchtrt::pad_to").spec
    call = planning.PluginCall(
        spec.name,
        *spec.creator_key,
        fields=[planning.FieldValue("height", "INT64", 2**40), planning.FieldValue("width", "INT64", 3)],
        tensor_inputs=[],
    )
    with pytest.raises(tonnx.OnnxExportError, match=r"torchtrt\.pad_to: argument 'height' must fit in 32 bits"):
        tonnx.attribute_values(spec, call)


class RoiAlignPooledLike(torch.nn.Module):
    def forward(self, x, rois, like):
        return torch.ops.torchvision.roi_align(x, rois, 0.5, like.shape[0], 2, 2, True)


def test_declared_symbolic_size_argument_exports_as_a_shape_input():
    """A SymInt argument symbolic in the graph becomes a shape input; its field holds the marker INT32_MIN, which
    survives the parser's kINT32 integer attributes."""
    declared_export_cases.require()
    rois = torch.tensor([[0.0, 1.0, 1.0, 5.0, 5.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            RoiAlignPooledLike().eval(),
            (torch.randn(1, 3, 8, 8), rois, torch.zeros(3)),
            dynamo=True,
            dynamic_shapes={"x": None, "rois": None, "like": {0: torch.export.Dim("pooled")}},
            custom_translation_table=tonnx.translation_table(),
        )
    (node,) = plugin_nodes(program.model_proto)
    attrs = {a.name: a for a in node.attribute}
    assert attrs["pooled_height"].type == A.INT and attrs["pooled_height"].i == -(2**31)
    assert attrs["pooled_width"].i == 2 and list(attrs[tonnx.SHAPE_INPUT_INDICES].ints) == [2]


def test_declared_ops_are_covered():
    declared_export_cases.assert_covered(DECLARED)


def test_torchscript_symbolics_win_over_another_packages():
    """torchvision registers ONNX symbolics for its ops at opsets 11 and 16; ours must still make the plugin node."""
    case = next(c for c in CASES if c.op == "rms_norm")
    try:
        for opset in (11, 16):
            torch.onnx.register_custom_op_symbolic("torchtrt::rms_norm", lambda g, x, *_: g.op("Identity", x), opset)
        assert [n.op_type for n in plugin_nodes(case.export("torchscript"))] == ["RMSNorm"]
    finally:
        for opset in (11, 16):
            torch.onnx.unregister_custom_op_symbolic("torchtrt::rms_norm", opset)
        tonnx.register_torchscript_symbolics()


class WeightedNorm(torch.nn.Module):
    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 2.0, 64).to(dtype))

    def forward(self, x):
        return torch.ops.torchtrt.rms_norm(x, self.weight, 1e-6)


@pytest.mark.parametrize("dynamo", [True, False], ids=["dynamo", "torchscript"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_export_gives_the_weight_as_a_field_when_asked(tmp_path, dynamo, dtype):
    """rms_norm's weight (an initializer) becomes the node's TENSOR attribute `weight` of its element type and INTS
    `weight_shape`, as test_onnx_parser.py's hand-written node carries it; the node takes x only."""
    module, path = WeightedNorm(dtype), tmp_path / "model.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tonnx.export(module, (torch.randn(3, 64, dtype=dtype),), path, dynamo=dynamo, weights_as_fields=True)
    model = onnx.load(path)
    (node,) = plugin_nodes(model)
    assert len(node.input) == 1
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    weight = attributes["weight"]
    assert weight.data_type == ONNX_DTYPE[dtype]
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(weight), module.weight.detach().numpy())
    assert attributes["weight_shape"] == [64]
    assert not any(t.dims == [64] for t in model.graph.initializer)


def test_weights_to_fields_refuses_an_element_type_the_parser_rejects():
    from onnx import TensorProto, helper

    node = helper.make_node("RMSNorm", ["x", "w"], ["y"], plugin_version="3", plugin_namespace="torchtrt")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor("w", TensorProto.INT64, [4], [1, 2, 3, 4])],
    )
    with pytest.raises(tonnx.OnnxExportError, match=r"torchtrt.rms_norm: argument 'weight' as a weight field has"):
        tonnx.weights_to_fields(helper.make_model(graph))
