"""NVIDIA's ONNX parser imports our exported plugin nodes, and its builder builds a plan (TensorRT-RTX, on CPU).

Every export case (each op, dynamic dims included, with both exporters where the case allows) and the lowered
decoder block in fp32/fp16/bf16 are exported here, then parsed and built in one fresh process
(``onnx_parser_worker.py``): the 1.7.1 wheel lacks the unversioned ``libtensorrt_rtx.so`` that the parser
dlopens on meeting a plugin node (the process aborts without it), so that process starts with a folder
holding ``libtensorrt_rtx.so -> libtensorrt_rtx.so.1`` on LD_LIBRARY_PATH. The parser adds the plugins
itself (``FallbackPluginImporter``); nothing of ours builds the layers.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import declared_export_cases
import handwritten_models
import pytest

onnx = pytest.importorskip("onnx", reason="ONNX export needs onnx (pip install -e '.[test]')")
pytest.importorskip("onnxscript", reason="the dynamo ONNX exporter needs onnxscript (pip install -e '.[test]')")

import export_cases  # noqa: E402
import torch  # noqa: E402

from torchtrt_plugins import onnx as tonnx  # noqa: E402
from torchtrt_plugins import registry  # noqa: E402
from torchtrt_plugins import spec as spec_mod  # noqa: E402

#: The first TensorRT-RTX whose ONNX parser imports plugin nodes (1.5 and 1.6 reject them).
MIN_PARSER_VERSION = (1, 7, 1)

CASES = export_cases.cases()
OP_EXPORTS = [(c, "dynamo") for c in CASES] + [(c, "torchscript") for c in CASES if c.torchscript]
E2E_EXPORTS = [(c, "dynamo") for c in export_cases.end_to_end_cases()]
#: Ops declared with torchtrt_plugins.declare (examples/myops, torchvision's roi_align and nms): their own libraries.
DECLARED = declared_export_cases.cases()
DECLARED_EXPORTS = [(c, e) for c in DECLARED for e in ("dynamo", "torchscript") if e == "dynamo" or c.torchscript]
#: Plugin nodes written by hand, semantic fields only (the declared libraries' where those can be built).
HANDWRITTEN = [h for h in handwritten_models.models() if DECLARED or not h.declared]
#: Nodes made for NVIDIA's MultiscaleDeformableAttnPlugin_TRT, parsed with the others (their tests are below: a
#: second module importing the fixture would be a second fixture, and would parse every model again).
NVIDIA_STYLE = handwritten_models.nvidia_deformable_attention_models()


def _id(case: export_cases.ExportCase, exporter: str) -> str:
    return f"{case.id}-{exporter}"


#: A plugin with one field of every PluginFieldType we declare (the worker registers a creator recording them).
PROBE = spec_mod.OpSpec(
    name="field_probe",
    schema="(Tensor x) -> Tensor",
    plugin_name="TorchtrtFieldProbe",
    inputs=(),
    outputs=(),
    plugin_namespace="torchtrt_onnx_probe",
)
PROBE_VALUES = {f"field_{t.lower()}": (t, 65 if t == "CHAR" else 3) for t in spec_mod.FIELD_NUMPY_DTYPES}
#: An INT64 array, as a declared op's shape program travels.
PROBE_VALUES["field_int64_array"] = ("INT64", [7, -1, 2**31 - 1])


def _field_probe_model() -> onnx.ModelProto:
    """One plugin node whose attributes are what the exporter writes for each field type."""
    from onnx import TensorProto, helper, numpy_helper

    from torchtrt_plugins import plan as planning

    fields = [planning.FieldValue(name, t, value) for name, (t, value) in PROBE_VALUES.items()]
    call = planning.PluginCall(PROBE.name, *PROBE.creator_key, fields=fields, tensor_inputs=[])
    attributes = {
        k: numpy_helper.from_array(v) if hasattr(v, "dtype") else v
        for k, v in tonnx.attribute_values(PROBE, call).items()
    }
    node = helper.make_node(PROBE.plugin_name, ["x"], ["y"], domain=tonnx.domain(PROBE), **attributes)
    graph = helper.make_graph(
        [node],
        "field_probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(node.domain, 1)])


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:3])


def _rtx_libs_dir(trt: Any) -> Path:
    """The folder of ``libtensorrt_rtx.so.1``: the ``tensorrt_rtx_libs`` wheel, else next to the bindings."""
    spec = importlib.util.find_spec("tensorrt_rtx_libs")
    candidates = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    candidates.append(Path(trt.__file__).parent)
    for folder in candidates:
        if any(folder.glob("libtensorrt_rtx.so*")):
            return folder
    pytest.fail(f"libtensorrt_rtx.so* not found in {candidates}")


@pytest.fixture(scope="session")
def parser_reports(trt: Any, plugin_library: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Export every case, parse and build them all in one fresh process; {case id: report}."""
    if _version(trt.__version__) < MIN_PARSER_VERSION:
        pytest.skip(
            f"tensorrt_rtx {trt.__version__}: its ONNX parser rejects plugin nodes; 1.7.1 or later imports them"
        )
    folder = tmp_path_factory.mktemp("onnx_parser")
    libs = _rtx_libs_dir(trt)
    shim = folder / "lib"
    shim.mkdir()
    if not (libs / "libtensorrt_rtx.so").exists():
        (shim / "libtensorrt_rtx.so").symlink_to(sorted(libs.glob("libtensorrt_rtx.so.*"))[0])
    models, outputs = [], {}
    for case, exporter in OP_EXPORTS + E2E_EXPORTS + DECLARED_EXPORTS:
        path = folder / f"{_id(case, exporter)}.onnx".replace("::", ".")
        model = case.export(exporter)
        onnx.save(model, path)
        models.append({"id": _id(case, exporter), "path": str(path), "profile": case.profile()})
        outputs[_id(case, exporter)] = _plugin_output_dims(model)
    for case in HANDWRITTEN + NVIDIA_STYLE:
        path = folder / f"handwritten-{case.id}.onnx"
        onnx.save(case.model, path)
        models.append(
            {"id": f"handwritten-{case.id}", "path": str(path), "profile": case.profile, "aliased_io": case.aliased_io}
        )
    # torchtrt_plugins.onnx.export(weights_as_fields=True): rms_norm's fp32 weight as a FLOAT TENSOR attribute.
    path = folder / "exported-weight_field.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tonnx.export(WeightedNorm(), (torch.randn(3, 64),), path, weights_as_fields=True)
    models.append({"id": "exported-weight_field", "path": str(path), "profile": {"x": [[3, 64]] * 3}})
    probe = folder / "field_probe.onnx"
    onnx.save(_field_probe_model(), probe)
    job = folder / "job.json"
    job.write_text(
        json.dumps(
            {
                "library": str(plugin_library),
                "libraries": [str(library.plugin_path()) for library in declared_export_cases.libraries()]
                if DECLARED
                else [],
                "models": models,
                "field_probe": {"plugin": list(PROBE.creator_key), "fields": list(PROBE_VALUES), "model": str(probe)},
            }
        )
    )
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(shim), str(libs), env.get("LD_LIBRARY_PATH")) if p)
    script = Path(__file__).with_name("onnx_parser_worker.py")
    result = subprocess.run(
        [sys.executable, str(script), str(job)], capture_output=True, text=True, env=env, timeout=900
    )
    assert result.returncode == 0, f"onnx_parser_worker.py failed ({result.returncode}):\n{result.stderr[-4000:]}"
    report = json.loads(result.stdout.strip().splitlines()[-1])
    for model_id, dims in outputs.items():
        report["models"][model_id]["exported_output_dims"] = dims
    return {**report["models"], "field_probe": report["field_probe"]}


def _plugin_output_dims(model: onnx.ModelProto) -> list[list[int]]:
    """The first plugin node's first output as the exporter typed it: a size, or -1 for a symbolic one."""
    nodes = [n for n in model.graph.node if n.domain.startswith(tonnx.DOMAIN_PREFIX)]
    inferred = onnx.shape_inference.infer_shapes(model).graph
    types = {v.name: v.type.tensor_type for v in [*inferred.value_info, *inferred.output]}
    if not nodes or nodes[0].output[0] not in types:
        return []
    return [d.dim_value if d.HasField("dim_value") else -1 for d in types[nodes[0].output[0]].shape.dim]


@pytest.mark.parametrize(("case", "exporter"), OP_EXPORTS, ids=[_id(c, e) for c, e in OP_EXPORTS])
def test_parser_imports_and_builder_builds(parser_reports: dict, case: export_cases.ExportCase, exporter: str):
    report = parser_reports[_id(case, exporter)]
    spec = registry.get(case.op).spec
    assert report["parsed"], report["parser_errors"]
    assert report["parser_errors"] == []
    (layer,) = report["plugin_layers"]
    # Tensor inputs, then the shape inputs the node listed in tensorrt_plugin_shape_input_indices.
    assert len(layer["inputs"]) == len(spec.inputs) + len(case.symbolic_args)
    for tspec, tensor in zip(spec.inputs, layer["inputs"], strict=False):
        if tspec.plugin_dtype is not None:
            assert tensor["dtype"] == str(tspec.plugin_dtype).removeprefix("torch.").upper()
    assert len(layer["outputs"]) == spec.num_plugin_outputs
    if spec.requires_output_allocator:
        assert layer["outputs"][0]["shape"][0] == -1  # data-dependent
    assert report["plan_bytes"] > 0, report["errors"]
    assert report["errors"] == []


@pytest.mark.parametrize(("case", "exporter"), E2E_EXPORTS, ids=[_id(c, e) for c, e in E2E_EXPORTS])
def test_lowered_decoder_block_parses_and_builds(parser_reports: dict, case: export_cases.ExportCase, exporter: str):
    report = parser_reports[_id(case, exporter)]
    assert report["parsed"], report["parser_errors"]
    assert len(report["plugin_layers"]) == 2  # input_layernorm, post_attention_layernorm
    dtype = str(case.args[0].dtype).removeprefix("torch.")
    trt_dtype = {"float32": "FLOAT", "float16": "HALF", "bfloat16": "BF16"}[dtype]
    for layer in report["plugin_layers"]:
        assert [t["dtype"] for t in layer["inputs"]] == [trt_dtype, trt_dtype]
        assert layer["outputs"][0]["shape"][:2] == [-1, -1]
    assert report["plan_bytes"] > 0, report["errors"]
    assert report["errors"] == []


@pytest.mark.parametrize("field_type", list(spec_mod.FIELD_NUMPY_DTYPES))
def test_field_arrives_with_the_declared_type(parser_reports: dict, field_type: str):
    """What the parser hands a creator for each field type, as the exporter writes it (``parsed_as``)."""
    probe = parser_reports["field_probe"]
    name = f"field_{field_type.lower()}"
    assert name in probe["fields"], probe
    expected = tonnx.field_attribute(field_type).parsed_as
    size = 2 if field_type == "CHAR" else 1  # text: the character and its NUL
    assert probe["fields"][name] == [expected, size]


def test_int64_array_field_arrives_as_int32_array(parser_reports: dict):
    """A declared op's ``shape_program`` (INT64) goes as INTS and reaches createPlugin as a kINT32 array, which the
    SDK's generic plugin reads."""
    assert parser_reports["field_probe"]["fields"]["field_int64_array"] == ["INT32", 3]


@pytest.mark.parametrize(("case", "exporter"), DECLARED_EXPORTS, ids=[_id(c, e) for c, e in DECLARED_EXPORTS])
def test_declared_op_parses_and_builds(parser_reports: dict, case: export_cases.ExportCase, exporter: str):
    """The generic declared plugin, created by the parser from the exported fields (its shape program arrives as an
    INT32 array), gives the output shapes its fake kernel does, and the builder builds a plan with it."""
    report = parser_reports[_id(case, exporter)]
    spec = registry.get(case.op).spec
    assert report["parsed"], report["parser_errors"]
    assert report["parser_errors"] == []
    (layer,) = report["plugin_layers"]
    assert len(layer["inputs"]) == len(spec.inputs)
    planned = export_cases_call(case)
    assert len(layer["outputs"]) == planned.num_outputs
    shape = layer["outputs"][0]["shape"]
    if spec.requires_output_allocator:
        assert shape[0] == -1 and [o["shape"] for o in layer["outputs"][1:]] == [[]]  # data-dependent; size tensor
    expected = report["exported_output_dims"]
    if exporter == "dynamo":  # the TorchScript exporter names every plugin output dim
        assert shape == expected, (shape, expected)
    else:
        assert len(shape) == len(expected)
    assert report["plan_bytes"] > 0, report["errors"]
    assert report["errors"] == []


@pytest.mark.parametrize("case", HANDWRITTEN, ids=[h.id for h in HANDWRITTEN])
def test_handwritten_node_with_semantic_fields_parses_and_builds(
    parser_reports: dict, case: handwritten_models.Handwritten
):
    """A plugin node as users write it (plugin name, version, namespace and the op's scalar arguments, nothing
    derived by torchtrt_plugins): NVIDIA's parser creates the plugin, its compiled shape rules give the outputs'
    shapes, and the builder builds a plan."""
    report = parser_reports[f"handwritten-{case.id}"]
    assert report["parsed"], (report["parser_errors"], report["errors"])
    (layer,) = report["plugin_layers"]
    assert [o["shape"] for o in layer["outputs"]] == case.outputs
    assert report["plan_bytes"] > 0, report["errors"]
    assert report["errors"] == []


class WeightedNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 2.0, 64))

    def forward(self, x):
        return torch.ops.torchtrt.rms_norm(x, self.weight, 1e-6)


def test_exported_weight_field_parses_and_builds(parser_reports: dict):
    """The parser hands the FLOAT TENSOR attribute to createPlugin as the kFLOAT32 weight field (and INTS as kINT32
    dims): the plugin layer has x as its only input and the builder builds a plan."""
    report = parser_reports["exported-weight_field"]
    assert report["parsed"], (report["parser_errors"], report["errors"])
    (layer,) = report["plugin_layers"]
    assert len(layer["inputs"]) == 1
    assert report["plan_bytes"] > 0 and report["errors"] == [], report["errors"]


def export_cases_call(case: export_cases.ExportCase):
    """The converter's plan of the case's op in torch.export's graph."""
    from torchtrt_plugins import plan as planning

    program = torch.export.export(case.module, case.args, dynamic_shapes=case.dynamic_shapes())
    (node,) = [n for n in program.graph.nodes if planning.entry_for_target(n.target) is not None]
    return planning.plan(planning.entry_for_target(node.target).spec, node.args, node.kwargs)


def test_declared_ops_are_covered():
    declared_export_cases.assert_covered(DECLARED)


@pytest.mark.parametrize(("op_type", "dtype"), [("RMSNormFP8", "FP8"), ("RMSNormINT8", "INT8")])
def test_quantized_output_reaches_the_dequantize_as_the_plugins_own_type(parser_reports: dict, op_type, dtype):
    """The plugin's output is FP8 / INT8 itself (getOutputDataTypes), consumed by DequantizeLinear with the shared
    scale initializer: no cast between them, as an explicitly quantized network needs."""
    report = parser_reports[f"handwritten-{op_type}-dequantized"]
    (layer,) = report["plugin_layers"]
    assert layer["outputs"][0]["dtype"] == dtype
    assert report["plan_bytes"] > 0 and report["errors"] == []


NVIDIA_MSDA = {case.id.split("-", 1)[1]: case for case in NVIDIA_STYLE}


def test_renamed_nvidia_msda_node_with_our_namespace_parses_and_builds(parser_reports: dict):
    """multi_scale_deformable_attention: a node made for NVIDIA's MultiscaleDeformableAttnPlugin_TRT builds with our
    plugin through TensorRT-RTX's ONNX parser and builder once its op type is renamed and our namespace named
    (plugin_namespace="torchtrt": docs/onnx.md)."""
    report = parser_reports["handwritten-nvidia_msda-with_namespace"]
    assert report["parsed"], (report["parser_errors"], report["errors"])
    (layer,) = report["plugin_layers"]
    # Ours is (B, Q, H * D); NVIDIA's plugin gives (B, Q, H, D).
    assert [o["shape"] for o in layer["outputs"]] == NVIDIA_MSDA["with_namespace"].outputs == [[-1, -1, 256]]
    assert [i["dtype"] for i in layer["inputs"]][1:3] == ["INT32", "INT32"]
    assert report["plan_bytes"] > 0, report["errors"]
    assert report["errors"] == []


def test_renamed_nvidia_msda_node_without_a_namespace_finds_no_creator(parser_reports: dict):
    """NVIDIA's node carries no plugin_namespace; the parser then asks the registry for namespace "" and ours is
    registered under "torchtrt": renaming the op type alone is not enough (docs/onnx.md says so)."""
    report = parser_reports["handwritten-nvidia_msda-op_type_only"]
    assert not report["parsed"]
    assert any("Plugin not found" in e for e in report["parser_errors"]), report
