"""The conformance harness without a GPU: the RMSNorm plugin against its op spec (creators, fields, output
shapes, format table, serialization, invalid fields, clone independence), the expression builder, the graph
runner's fallback, and every deliberately broken test plugin whose fault shows without a device."""

import json
import math

import fixtures
import pytest
import torch

import torchtrt_plugins
from torchtrt_plugins.converters import plan, plan_node
from torchtrt_plugins.testing import harness as H
from torchtrt_plugins.testing.runner import run_graph

SPEC = torchtrt_plugins.get("rms_norm").spec


@pytest.fixture(scope="module")
def broken(build):
    if build.broken_plugins is None:
        pytest.skip("the broken test plugins are built from a checkout's tests/harness_plugins; a wheel carries none")
    return build.broken_plugins


def rms(build, shape=(2, 3, 16), dtype=torch.float32, eps=1e-5, **kwargs):
    x = H.TensorArg(shape, dtype)
    w = H.TensorArg((shape[-1],), dtype)
    return H.run_call(plan(SPEC, (x, w, eps)), x, w, library=build.library, enqueue=False, **kwargs)


def scale(broken, name, value=1 / 3, shape=(4, 8), **kwargs):
    kwargs.setdefault("inputs", [H.TensorArg(shape, torch.float32)])
    return H.run_plugin(broken, name, fields=[("scale", "FLOAT32", value)], enqueue=False, **kwargs)


def test_harness_library_exports_only_its_c_api(build):
    assert build.harness.name == "libtorchtrt_plugins_harness.so" and build.harness.is_file()
    assert fixtures.broken_plugins(build).name == "libttp_broken_plugins.so" and build.broken_plugins.is_file()


def test_creator_matches_the_op_spec(build):
    result = rms(build)
    creator = result.creator(*SPEC.creator_key)
    assert (creator["name"], creator["version"], creator["namespace"]) == SPEC.creator_key
    assert creator["interface"] == "PLUGIN CREATOR_V3ONE"
    # The op's scalar arguments (its shape rules are compiled into the library), then its weight given as a field:
    # elements and dims, arrays of any length.
    assert [(f["name"], f["type"], f["length"]) for f in creator["fields"]] == [
        *((f.name, f.type, 1) for f in SPEC.fields),
        ("weight", "UNKNOWN", 0),  # any type its input takes
        ("weight_shape", "INT64", 0),
    ]


def test_rms_norm_weight_field_round_trips_through_serialization(build):
    """The weight as a field: createPlugin takes it in place of the network input, and the plan's fields
    (getFieldsToSerialize) give it back byte for byte, with its dims, to the runtime plugin."""
    weight = [0.5, 1.0, -2.0, 0.125]
    fields = [("eps", "FLOAT64", 1e-5), ("weight", "FLOAT32", weight), ("weight_shape", "INT64", [4])]
    result = H.run_plugin(
        build.library, SPEC.plugin_name, SPEC.plugin_version, fields=fields, inputs=[H.TensorArg((3, 4))], enqueue=False
    )
    result.assert_conformant()
    serialized = {f["name"]: (f["type"], f["data"]) for f in result.serialized_fields}
    assert serialized["weight"] == ("FLOAT32", weight) and serialized["weight_shape"] == ("INT64", [4])


def test_rms_norm_has_no_violations_and_reports_the_skipped_enqueue(build):
    result = rms(build)
    result.assert_conformant()
    assert result.enqueue_skipped
    assert result.output_types == ["FLOAT"]
    assert result.tactics == [t.value for t in SPEC.tactics]
    assert result.workspace_size == 0
    assert result.timing_cache_id and result.timing_cache_id.startswith(f"torchtrt::rms_norm_v{SPEC.plugin_version}")


def test_without_enqueue_request_the_reason_is_the_request(build):
    assert rms(build).enqueue_skipped == "enqueue=false in the request"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_without_a_gpu_the_execution_phase_is_skipped_with_the_reason(build):
    x = torch.randn(2, 8)
    w = torch.ones(8)
    result = H.run_call(plan(SPEC, (x, w, 1e-6)), x, w, library=build.library)
    assert not result.stopped and not result.violations
    assert "CUDA" in result.enqueue_skipped and result.runs == []


def test_output_shapes_for_min_opt_max_and_concrete(build):
    profile = [((1, 1, 64), (4, 8, 64), (16, 32, 64)), ((64,), (64,), (64,))]
    result = rms(build, shape=(3, 5, 64), profile=profile)
    assert result.output_shapes["symbolic"] == [["in0.d0", "in0.d1", "64"]]
    assert result.output_shapes["min"] == [[1, 1, 64]]
    assert result.output_shapes["opt"] == [[4, 8, 64]]
    assert result.output_shapes["max"] == [[16, 32, 64]]
    assert result.output_shapes["concrete"] == [[3, 5, 64]]
    assert result.size_tensors == []


def test_static_shapes_are_constants(build):
    result = rms(build, shape=(7, 3))
    assert result.output_shapes["symbolic"] == [["7", "3"]]
    assert all(result.output_shapes[k] == [[7, 3]] for k in ("min", "opt", "max", "concrete"))


def test_format_table_is_exactly_the_spec_types_in_linear(build):
    result = rms(build)
    expected = [tuple((name, "LINEAR") for _ in range(3)) for name in ("FLOAT", "HALF", "BF16")]
    assert result.formats == expected
    assert {dtype for dtype in SPEC.inputs[0].dtypes} == {torch.float32, torch.float16, torch.bfloat16}
    assert not result.raw["formats_truncated"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_configured_with_the_input_types(build, dtype):
    result = rms(build, dtype=dtype)
    name = {torch.float16: "HALF", torch.bfloat16: "BF16"}[dtype]
    assert result.configured == ((name, "LINEAR"),) * 3
    assert result.output_types == [name]


def test_unsupported_input_types_stop_the_run_with_the_reason(build):
    result = rms(build, dtype=torch.int32)
    assert result.stopped and "getOutputDataTypes" in result.stopped


def test_serialization_round_trip(build):
    result = rms(build, eps=1e-5)
    assert [(f["name"], f["type"], f["length"]) for f in result.serialized_fields] == [
        ("eps", "FLOAT64", 1),
        ("weight_offset", "FLOAT64", 1),
    ]
    assert result.serialized_fields[0]["data"][0] == pytest.approx(1e-5, rel=1e-7)
    assert result.runtime_fields == result.serialized_fields
    assert result.raw["serialized_bytes"] > 0
    assert "serialization" not in result.rules


INVALID_EPS = [
    pytest.param([("eps", "FLOAT32", -1.0)], "must be a float > 0", id="negative"),
    pytest.param([("eps", "FLOAT32", 0.0)], "must be a float > 0", id="zero"),
    pytest.param([("eps", "FLOAT32", math.nan)], "must be a float > 0", id="nan"),
    pytest.param([("eps", "FLOAT64", -1.0)], "must be a float > 0", id="negative-float64"),
    pytest.param([("eps", "FLOAT16", 1e-3)], "unsupported PluginFieldType", id="wrong-type"),
    pytest.param([("eps", "CHAR", "abc")], "exactly one value", id="string"),
    pytest.param([{"name": "eps", "type": "FLOAT32", "data": [1e-5, 1e-5]}], "exactly one value", id="two-values"),
    pytest.param([{"name": "eps", "type": "FLOAT32", "data": None, "length": 1}], "exactly one value", id="no-data"),
]


@pytest.mark.parametrize("fields, expected", INVALID_EPS)
def test_invalid_fields_are_rejected_with_a_log_line_naming_plugin_and_field(build, fields, expected):
    result = rms(build, invalid_fields=[fields])
    (outcome,) = result.invalid_fields
    assert outcome.rejected
    errors = [line.message for line in outcome.log if line.severity == "ERROR"]
    assert errors, "createPlugin rejected the fields without logging why"
    assert any("RMSNorm" in m and "eps" in m and expected in m for m in errors), errors
    assert not result.violations


def test_the_plugin_checks_the_fake_kernels_size_equalities(build):
    """The fake kernel's torch._check(weight.shape[0] == x.shape[-1]) travels in the shape program: the generic plugin
    refuses inputs that break it (a graph built by hand, not through the converter, which would refuse it first)."""
    x = H.TensorArg((2, 16))
    call = plan(SPEC, (x, H.TensorArg((16,)), 1e-5))
    result = H.run_call(call, x, H.TensorArg((8,)), library=build.library, enqueue=False)
    assert result.stopped and "configurePlugin" in result.stopped
    assert "input sizes break the op's fake kernel check 'weight'.shape[0] == 'x'.shape[1]" in result.log_text()


def test_clone_is_independent(build):
    result = rms(build)
    assert not {"clone", "clone-shares-state"} & result.rules


class Norm(torch.nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(hidden) + 0.5)

    def forward(self, x):
        return torch.ops.torchtrt.rms_norm(x, self.weight, 1e-5) * 2


def test_run_call_from_an_exported_fx_node(build):
    model = Norm().to(torch.bfloat16)
    gm = torch.export.export(model, (torch.randn(4, 32, dtype=torch.bfloat16),)).module()
    (node,) = [n for n in gm.graph.nodes if n.op == "call_function" and "rms_norm" in str(n.target)]
    call = plan_node(node)
    assert call.field_value("eps") == pytest.approx(1e-5)
    # No tensors given: the FX nodes' fake values give shapes and dtypes (build-phase checks only).
    result = H.run_call(call, library=build.library)
    result.assert_conformant()
    assert result.configured == (("BF16", "LINEAR"),) * 3
    assert result.output_shapes["concrete"] == [[4, 32]]


def test_graph_runner_falls_back_to_eager_without_enqueue(build):
    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(16, 16)
            self.weight = torch.nn.Parameter(torch.rand(16) + 0.5)

        def forward(self, x):
            return self.proj(torch.ops.torchtrt.rms_norm(x, self.weight, 1e-6)).relu()

    model = Tiny()
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(3, 16)
    out = run_graph(gm, x, library=build.library, enqueue=False)
    torch.testing.assert_close(out.outputs, model(x))
    assert list(out.fell_back) == ["rms_norm"] and not out.violations
    out.assert_conformant()


def test_expression_builder_evaluates_every_operation_and_shape_inputs(broken):
    result = H.run_plugin(
        broken,
        "DimOps",
        inputs=[H.TensorArg((3, 5))],
        profile=[((2, 5), (3, 5), (4, 6))],
        shape_inputs=[H.ShapeArg((9, 10), min=(6, 4), opt=(9, 10), max=(12, 12))],
        enqueue=False,
    )
    result.assert_conformant()
    shapes = result.output_shapes
    assert shapes["symbolic"][0] == [
        "(in0.d0 + in0.d1)",
        "(in0.d0 * in0.d1)",
        "max(in0.d0, shape0[0])",
        "min(in0.d1, shape0[1])",
        "(shape0[0] - in0.d0)",
    ]
    assert shapes["symbolic"][1][-1] == "7"

    def expected(d0, d1, s0, s1):
        return [
            [d0 + d1, d0 * d1, max(d0, s0), min(d1, s1), s0 - d0],
            [int(d0 == d1), int(d0 < s1), s1 // d0, -(-s1 // d0), 7],
        ]

    assert shapes["min"] == expected(2, 5, 6, 4)
    assert shapes["opt"] == expected(3, 5, 9, 10)
    assert shapes["max"] == expected(4, 6, 12, 12)
    assert shapes["concrete"] == expected(3, 5, 9, 10)


def test_size_tensors_are_declared_and_evaluated(broken):
    result = H.run_plugin(
        broken, "Positives", inputs=[H.TensorArg((4, 6))], profile=[((1, 6), (4, 6), (8, 6))], enqueue=False
    )
    result.assert_conformant()
    assert result.size_tensors == [
        {"output": 1, "opt": "ceildiv(((1 * in0.d0) * 6), 2)", "upper": "((1 * in0.d0) * 6)"}
    ]
    # min: a data-dependent extent may be 0; opt: the opt formula; max and concrete: the upper bound.
    assert [shapes[0] for shapes in (result.output_shapes[k] for k in ("min", "opt", "max", "concrete"))] == [
        [0],
        [12],
        [48],
        [24],
    ]
    assert result.output_shapes["concrete"][1] == []
    assert result.formats == [(("FLOAT", "LINEAR"), ("FLOAT", "LINEAR"), ("INT64", "LINEAR"))]


def test_optional_fields_default_and_round_trip(broken):
    result = H.run_plugin(broken, "Positives", inputs=[H.TensorArg((5,))], enqueue=False)
    assert result.serialized_fields == [{"name": "threshold", "type": "FLOAT32", "length": 1, "data": [0.0]}]


@pytest.mark.parametrize("name", ["Scale", "ScaleUsesResource"])
def test_correct_test_plugins_have_no_violations(broken, name):
    result = scale(broken, name, invalid_fields=[[("scale", "FLOAT32", -1.0)]])
    result.assert_conformant()
    if name == "ScaleUsesResource":
        assert result.raw["resource_acquires"] >= 1


# Every fault that shows without a device; the GPU ones are in tests/gpu/test_harness_gpu.py.
CPU_FAULTS = [
    ("ScaleThrowsInOutputShapes", "no-throw", "getOutputShapes"),
    ("ScaleReadsAbovePos", "supports-format-reads-above-pos", "supportsFormatCombination"),
    ("ScaleCloneSharesState", "clone-shares-state", "clone"),
    ("ScaleSerializeChangesField", "serialization", "getFieldsToSerialize"),
    ("ScaleAcceptsInvalidField", "invalid-fields-accepted", "createPlugin"),
    ("ScaleLeaksResource", "resource-leak", "releasePluginResource"),
]


@pytest.mark.parametrize("name, rule, method", CPU_FAULTS)
def test_broken_plugin_is_caught(broken, name, rule, method):
    result = scale(broken, name, invalid_fields=[[("scale", "FLOAT32", -1.0)]])
    matching = [v for v in result.violations if v.rule == rule]
    assert matching, result.summary()
    assert matching[0].method == method
    assert name in str(matching[0]) and f"[{rule}]" in str(matching[0])
    assert result.rules == {rule}, result.summary()


@pytest.mark.parametrize(
    "name, rule", [("PositivesSizeTensor1D", "size-tensor-rank"), ("PositivesSizeTensorFloat", "size-tensor-type")]
)
def test_broken_size_tensor_is_caught(broken, name, rule):
    result = H.run_plugin(broken, name, inputs=[H.TensorArg((4, 6))], enqueue=False)
    assert result.rules == {rule}, result.summary()


def test_escaping_exception_does_not_kill_the_process_and_the_next_run_is_clean(broken):
    first = scale(broken, "ScaleThrowsInOutputShapes")
    detail = first.violations[0].detail
    # The exception's message when the plugin shares the process's C++ runtime; a plugin linking its own
    # (static libstdc++) aborts instead, and prints the exception itself.
    assert "escaped" in detail and ("not implemented" in detail or "terminate" in detail)
    assert first.stopped
    scale(broken, "Scale").assert_conformant()


def test_unknown_creator_stops_with_the_available_ones(build):
    result = H.run_plugin(build.library, "NoSuchPlugin", inputs=[H.TensorArg((2,))], enqueue=False)
    assert result.stopped and "RMSNorm" in result.stopped


def test_bad_requests(build):
    result = H.run_plugin("/nonexistent/lib.so", "RMSNorm", inputs=[H.TensorArg((2,))], enqueue=False)
    assert "dlopen" in result.stopped
    with pytest.raises(H.HarnessError, match="input must be"):
        H.run_plugin(build.library, "RMSNorm", inputs=[object()], enqueue=False)


_RMS_REQUEST = '"library": "lib.so", "plugin": {"name": "RMSNorm", "version": "1", "namespace": "torchtrt"}'


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param('{"library": ', "the request is not valid JSON: ", id="not-json"),
        pytest.param("[1]", "request: the request must be an object, got an array", id="not-an-object"),
        pytest.param(
            '{"library": "lib.so", "plugin": {"name": "RMSNorm", "version": "1"}}',
            "request: 'plugin.namespace' is missing",
            id="missing",
        ),
        pytest.param(
            "{" + _RMS_REQUEST + ', "inputs": [{"dtype": "FLOAT", "dims": "2x3"}]}',
            "request: 'inputs[0].dims' must be an array, got a string",
            id="wrong-type",
        ),
        pytest.param(
            "{" + _RMS_REQUEST + ', "fields": [{"name": "eps", "type": "FLOAT32", "data": [1e-5, "small"]}]}',
            "request: 'fields[0].data[1]' must be a number",
            id="field-element",
        ),
        pytest.param(
            "{" + _RMS_REQUEST + ', "enqueue_syncs_host": 1}',
            "request: 'enqueue_syncs_host' must be a boolean, got an integer",
            id="option",
        ),
    ],
)
def test_a_malformed_request_gets_an_error_naming_the_member(build, text, expected):
    """The C API answers a request it cannot read with {"fatal": ...} naming the member and what it must be."""
    lib = H._harness(build.harness)
    reply = H._decode(lib, lib.ttp_harness_run(text.encode(), H._ALLOCATE(lambda *_: None), None))
    assert reply.keys() == {"fatal"} and expected in reply["fatal"], reply


def test_non_finite_field_values_travel_as_strict_json():
    """JSON has no NaN or infinity: fields carry them as the strings the harness reads (and reports) in their place."""
    entry = H.field_json(("value", "FLOAT64", [math.nan, -math.inf, 1.5]))
    back = json.loads(json.dumps(entry, allow_nan=False), object_hook=H._from_finite_json)
    assert math.isnan(back["data"][0]) and back["data"][1:] == [-math.inf, 1.5]
    assert H.field_json(("value", "FLOAT32", math.inf))["data"] == "Infinity"


# ------------------------------------------------------------------------------ NVIDIA's builder's call order

#: The order in which TensorRT-RTX's builder (1.5 to 1.7, on CPU) called a plugin's methods while building a plan
#: (issue 11): the harness's build phase must make these calls, in this order (other calls may come in between).
NVIDIA_BUILD_ORDER = (
    "createPlugin",
    "clone",
    "getOutputShapes",
    "supportsFormatCombination",
    "getTimingCacheID",
    "attachToContext",
    "configurePlugin",
    "getWorkspaceSize",
    "getNbTactics",
    "getValidTactics",
    "setTactic",
    "getFieldsToSerialize",
)


def _our_plugin_runs(build):
    from torchtrt_plugins.ops import masked_rows, pad_to

    x4 = H.TensorArg((2, 3, 13, 21), torch.float16)
    rows, mask = H.TensorArg((10, 4), torch.float32), H.TensorArg((10,), torch.int32)
    return {
        "RMSNorm": rms(build),
        "PadTo": H.run_call(plan(pad_to.SPEC, (x4, 16, 17, 0.0)), x4, library=build.library, enqueue=False),
        "MaskedRows": H.run_call(
            plan(masked_rows.SPEC, (rows, mask)), rows, mask, library=build.library, enqueue=False
        ),
    }


def _missing_from_order(calls: list[str], order: tuple[str, ...]) -> list[str]:
    """The entries of ``order`` that ``calls`` does not contain as a subsequence (empty when it does)."""
    position = 0
    for index, method in enumerate(order):
        try:
            position = calls.index(method, position) + 1
        except ValueError:
            return list(order[index:])
    return []


def test_build_phase_makes_nvidia_builders_calls_in_its_order(build):
    for plugin, result in _our_plugin_runs(build).items():
        result.assert_conformant()
        assert _missing_from_order(result.calls, NVIDIA_BUILD_ORDER) == [], (plugin, result.calls)
        # The builder works on a clone of the network's plugin, and attaches it before configuring it.
        assert result.calls.index("clone") < result.calls.index("getOutputShapes")
        assert result.calls.index("attachToContext") < result.calls.index("configurePlugin")


def test_get_valid_tactics_is_asked_even_without_tactics(build):
    """NVIDIA's builder calls getValidTactics(nullptr, 0) after getNbTactics() returned 0 (issue 11, defect 2)."""
    runs = _our_plugin_runs(build)
    assert runs["PadTo"].tactics == runs["MaskedRows"].tactics == []
    for result in runs.values():
        nb = result.calls.index("getNbTactics")
        assert result.calls[nb + 1] == "getValidTactics", result.calls


def test_run_call_passes_the_op_spec_host_sync_declaration(monkeypatch):
    seen = {}
    monkeypatch.setattr(H, "run_plugin", lambda *args, **kwargs: seen.update(kwargs))
    call = plan(torchtrt_plugins.get("rms_norm").spec, (torch.zeros(2, 8), torch.ones(8), 1e-6))
    H.run_call(call)
    assert seen["enqueue_syncs_host"] is False
    H.run_call(call, enqueue_syncs_host=True)
    assert seen["enqueue_syncs_host"] is True


def test_testing_ships_the_public_api_and_none_of_our_fixtures():
    """``torchtrt_plugins.testing`` is what an op's author calls; our fixtures live in tests/, which a wheel lacks."""
    import pkgutil

    import torchtrt_plugins.testing

    assert sorted(m.name for m in pkgutil.iter_modules(torchtrt_plugins.testing.__path__)) == [
        "check",
        "harness",
        "runner",
    ]


def test_the_package_and_its_benchmarks_import_without_tests_or_hypothesis():
    import subprocess
    import sys
    from pathlib import Path

    tests_dir = str(Path(__file__).resolve().parents[1])
    script = (
        "import sys\n"
        f"sys.path[:] = [p for p in sys.path if not p.startswith({tests_dir!r})]\n"
        "sys.modules['hypothesis'] = None\n"
        "import torchtrt_plugins.testing, torchtrt_plugins.benchmarks.bench_model\n"
        "files = {name: getattr(module, '__file__', None) or '' for name, module in sys.modules.items()}\n"
        f"leaked = [name for name, file in files.items() if file.startswith({tests_dir!r})]\n"
        "assert not leaked, leaked\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
