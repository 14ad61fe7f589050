"""The SDK: a declared-op library built with torchtrt_plugins.sdk (tests/sdk_ops), driven through the harness
without a GPU: exports, dependencies, fields, shapes from the shape program (vs. Python), size tensors, tactics,
workspace, and createPlugin rejecting bad fields and malformed programs with a message naming op and field."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import subprocess  # noqa: E402

import pytest  # noqa: E402
import sdk_ops  # noqa: E402
import torch  # noqa: E402

from torchtrt_plugins import _derive, converters, sdk  # noqa: E402
from torchtrt_plugins.spec import SpecError  # noqa: E402
from torchtrt_plugins.testing import ShapeArg, TensorArg, run_call, run_plugin  # noqa: E402


@pytest.fixture(scope="module")
def library():
    from torchtrt_plugins import _build

    try:
        return sdk_ops.LIBRARY.build()
    except _build.BuildError as err:
        pytest.fail(f"the SDK must build a declared-op library wherever nvcc and the TensorRT headers are: {err}")


def _exports(path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()[-2] in ("T", "D", "B")}


def test_plugin_library_exports_and_links_only_what_it_must(library):
    assert _exports(library.plugins) == {"getCreators", "setLoggerFinder"}
    assert _exports(library.launchers) == {
        "ttp_sdk_eager_op",
        "ttp_sdk_launch",
        "ttp_sdk_workspace",
        "ttp_sdk_launcher",
        "ttp_sdk_workspace_function",
        "ttp_sdk_last_error",
        "ttp_sdk_resource_tables",
    }
    needed = subprocess.run(["readelf", "-d", str(library.plugins)], capture_output=True, text=True).stdout
    assert "libcudart" in needed
    assert "nvinfer" not in needed and "torch" not in needed and "c10" not in needed


def test_creator_fields_are_the_schema_scalars(library):
    result = run_call(
        sdk_ops.shapes_call(), TensorArg((6, 5)), TensorArg((5,)), library=library.plugins, shape_inputs=[9]
    )
    result.assert_conformant()
    creator = result.creator("Shapes", namespace="sdk_test")
    assert [(f["name"], f["type"]) for f in creator["fields"]] == [
        ("n", "INT64"),
        ("k", "INT64"),
        ("flag", "INT32"),
        ("scale", "FLOAT64"),
        ("w", "UNKNOWN"),  # weight_fields=("w",): its elements (any type its input takes) and dims
        ("w_shape", "INT64"),
    ]
    assert result.tactics == [3, 7]
    assert result.output_types == ["FLOAT", "INT32"]
    assert result.timing_cache_id.startswith("sdk_test::shapes_v1")


@pytest.mark.parametrize("k", [1, 3, 16])
def test_output_shapes_match_the_python_evaluation(library, k):
    """The C++ plugin's IExprBuilder expressions, at min/opt/max and concrete, equal the program evaluated in Python
    (which tests/cpu/test_declare.py checks against the fake kernel)."""
    call = sdk_ops.shapes_call(k)
    points = {"min": ((1, 5), 1), "opt": ((6, 5), 4), "max": ((30, 5), 20), "concrete": ((6, 5), 9)}
    result = run_call(
        call,
        TensorArg((6, 5)),
        TensorArg((5,)),
        library=library.plugins,
        shape_inputs=[ShapeArg((9,), min=(1,), opt=(4,), max=(20,))],
        profile=[((1, 5), (6, 5), (30, 5)), ((5,), (5,), (5,))],
    )
    result.assert_conformant()
    n = object()  # symbolic: a shape input, as in the call
    program = sdk_ops.SHAPES.derive_for_values(torch.zeros(6, 5), torch.zeros(5), n, k, is_symbolic=lambda v: v is n)
    program = program.program
    for point, (x_shape, n) in points.items():
        expected, _ = _derive.evaluate(program, [x_shape, (5,)], [[n]])
        assert [tuple(s) for s in result.output_shapes[point]] == expected, point
    assert result.workspace_size == 30 * 5 * 4  # the declared workspace function at the profile's max


def test_data_dependent_size_is_a_size_tensor(library):
    call = converters.plan(sdk_ops.NONZERO_COUNT.spec, (torch.zeros(4, 3),))
    result = run_call(call, TensorArg((4, 3)), library=library.plugins, profile=[((1, 3), (4, 3), (8, 3))])
    result.assert_conformant()
    assert result.size_tensors == [{"output": 1, "opt": str(1 << 19), "upper": str(1 << 20)}]
    assert result.output_types == ["FLOAT", "INT64"]
    assert result.output_shapes["max"][0] == [1 << 20, 3]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda f: f + [("alhpa", "FLOAT64", 1.0)],
            r"unknown field 'alhpa' \(expected one of: n, k, flag, scale, w, w_shape\)",
        ),
        (
            lambda f: [x if x[0] != "k" else ("k", "INT64", 0) for x in f],
            r"field 'k' must be an integer >= 1 and <= 16, got 0",
        ),
        # What plans from before the shape rules were compiled in hold.
        (lambda f: f + [("shape_program", "INT64", [1, 2, 3])], r"unknown field 'shape_program'"),
    ],
    ids=["misspelled", "out-of-range", "legacy-program"],
)
def test_create_plugin_rejects_bad_fields_naming_op_and_field(library, change, message):
    call = sdk_ops.shapes_call()
    fields = [(f.name, f.type, f.value) for f in call.fields]
    bad = change(fields)
    result = run_plugin(
        library.plugins,
        "Shapes",
        namespace="sdk_test",
        fields=fields,
        inputs=[TensorArg((6, 5)), TensorArg((5,))],
        shape_inputs=[9],
        invalid_fields=[bad],
    )
    result.assert_conformant()
    (invalid,) = result.invalid_fields
    assert invalid.rejected
    text = "\n".join(line.message for line in invalid.log)
    assert "sdk_test::shapes (plugin sdk_test::Shapes) createPlugin" in text
    assert pytest.importorskip("re").search(message, text), text


def test_every_rank_the_fake_kernel_accepts_and_no_other(library):
    """One plugin serves every rank its fake kernel accepts (x.shape[1] needs two dims or more)."""
    call = converters.plan(sdk_ops.NONZERO_COUNT.spec, (torch.zeros(4, 3),))
    result = run_call(call, TensorArg((4, 3, 2)), library=library.plugins, profile=[((1, 3, 2), (4, 3, 2), (8, 3, 2))])
    result.assert_conformant()
    assert result.output_shapes["max"][0] == [1 << 20, 3]
    result = run_call(call, TensorArg((4,)), library=library.plugins)
    accepted = ", ".join(f"({r})" for r in range(2, 9))
    expected = f"inputs (x) have ranks (1); the op's fake kernel accepts {accepted}"
    assert any(expected in line.message for line in result.log), result.log_text()


def test_eager_path_fills_dropped_defaults_and_keys_calls_by_signature():
    """The dispatcher leaves trailing defaults out of a Python kernel's arguments: the eager path restores them
    without a full bind, and caches per (shapes, dtypes, device, scalars, tactic)."""
    from torchtrt_plugins.ops import rms_norm

    declaration = rms_norm.RMS_NORM
    x, w = torch.randn(4, 8), torch.randn(8)
    assert sdk.runtime._arguments(declaration, (x, w), {})[2] == 1e-6
    assert sdk.runtime._arguments(declaration, (x,), {"weight": w, "eps": 1e-5})[1:] == (w, 1e-5, 0.0)
    key = sdk.runtime._signature(declaration, (x, w, 1e-6, 0.0), 2)
    assert key[1:] == (2, x.shape, x.dtype, -1, w.shape, w.dtype, -1, 1e-6, 0.0)
    assert sdk.runtime._signature(declaration, (x, w, 1e-5, 0.0), 2) != key
    assert sdk.runtime._signature(declaration, (x, w, 1e-6, 1.0), 2) != key


def test_data_dependent_eager_output_keeps_no_large_upper_bound_buffer():
    from torchtrt_plugins.ops import masked_rows

    derived = masked_rows.MASKED_ROWS.derive_for_values(torch.randn(8, 3), torch.ones(8, dtype=torch.bool))
    outputs = _derive.Program.parse(derived.program).outputs
    (sized,) = [[(d, e) for d, e in enumerate(dims) if _derive.uses_size(e)] for _, dims in outputs]
    small = sdk.runtime._trim(torch.zeros(100, 3), [(100, 3), (100,)], [7], sized)
    assert small.shape == (7, 3) and small._base is not None  # a view: the waste is small
    big = sdk.runtime._trim(torch.zeros(1 << 20, 4), [((1 << 20), 4), ((1 << 20),)], [5], sized)
    assert big.shape == (5, 4) and big._base is None  # a copy: the 16 MiB upper bound is released


@pytest.fixture
def structs_on_cpu(monkeypatch):
    """The launch structs from CPU tensors: everything a prepared launch does but the launch itself needs no GPU."""
    monkeypatch.setattr(sdk.runtime, "_cuda_device", lambda declaration, tensors: tensors[0].device)


def _struct(struct):
    return struct.data, struct.dtype, tuple(struct.dims[: struct.rank])


def _structs(tensors):
    return [(t.data_ptr() if t.numel() else None, sdk.KERNEL_DTYPES[t.dtype], tuple(t.shape)) for t in tensors]


def test_prepared_launch_points_the_launch_structs_at_buffers_made_once(library, structs_on_cpu):
    """sdk.PreparedLaunch (the benchmarks' launcher as the plugin's enqueue calls it) is launch's _Plan with its structs
    pointing at buffers of its own: contiguous inputs, outputs at their shapes filled with -1, the workspace."""
    x, w = torch.randn(5, 6).t(), torch.randn(5)
    prepared = sdk.PreparedLaunch(sdk_ops.SHAPES, x, w, 9, 3, scale=2.0, tactic=7)
    first, second = sdk_ops.shapes_sizes((6, 5), (5,), 9, 3)
    assert [(tuple(o.shape), o.dtype) for o in prepared.outputs] == [(first, torch.float32), (second, torch.int32)]
    assert all(bool((o == -1).all()) for o in prepared.outputs) and prepared.sizes == []
    assert prepared.inputs[0].is_contiguous() and torch.equal(prepared.inputs[0], x)
    plan = prepared._plan
    args = plan.args
    assert (args.nbInputs, args.nbOutputs, args.nbScalars, args.tactic, args.phase) == (2, 2, 4, 7, 0)
    assert [_struct(plan.in_structs[i]) for i in range(2)] == _structs(prepared.inputs)
    assert [_struct(plan.out_structs[i]) for i in range(2)] == _structs(prepared.outputs)
    assert list(plan.scalars) == [9.0, 3.0, 0.0, 2.0]
    assert (args.workspace, args.workspaceSize) == (prepared.workspace.data_ptr(), 6 * 5 * 4)
    assert plan.launcher_name == "sdk_test::zeros"


def test_prepared_launch_keeps_data_dependent_sizes_in_size_tensors(library, structs_on_cpu):
    prepared = sdk.PreparedLaunch(sdk_ops.NONZERO_COUNT, torch.randn(4, 3))
    assert [tuple(o.shape) for o in prepared.outputs] == [(1 << 20, 3)]  # the upper bound
    (size,) = prepared.sizes
    assert (size.shape, size.dtype) == ((), torch.int64)
    plan = prepared._plan
    assert plan.args.nbOutputs == 2
    assert [_struct(plan.out_structs[i]) for i in range(2)] == _structs([*prepared.outputs, size])


def test_prepared_launch_passes_a_bool_input_as_the_plugin_takes_it(structs_on_cpu):
    from torchtrt_plugins import _build
    from torchtrt_plugins.ops import masked_rows

    reason = _build.plugin_library_unavailable()
    if reason:
        pytest.skip(reason)
    x, mask = torch.randn(8, 3), torch.tensor([1, 0, 1, 1, 0, 0, 1, 0], dtype=torch.bool)
    prepared = sdk.PreparedLaunch(masked_rows.MASKED_ROWS, x, mask)
    assert prepared.inputs[1].dtype == torch.int32 and torch.equal(prepared.inputs[1], mask.int())
    assert _struct(prepared._plan.in_structs[1]) == _structs(prepared.inputs)[1]
    assert [tuple(o.shape) for o in prepared.outputs] == [(8, 3)] and len(prepared.sizes) == 1


def test_prepared_launch_reports_the_launcher_status_with_op_and_tactic(library, structs_on_cpu, monkeypatch):
    # Only the current device and stream queries are stood in (a CPU torch has none); sdk_test::failing touches no
    # memory, so the launcher really runs and its status comes back through sdk's own error path.
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 0, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: None, raising=False)
    prepared = sdk.PreparedLaunch(sdk_ops.BROKEN, torch.zeros(4))
    message = r"^sdk_test\.broken: launcher 'sdk_test::failing' \(tactic 0\) returned cudaErrorInvalidValue \(1\)$"
    with pytest.raises(RuntimeError, match=message):
        prepared()


def test_prepared_launch_passes_a_null_workspace_when_the_op_declares_none(library, structs_on_cpu):
    """ttp_sdk.h: the workspace is null when its size is 0 (before: a 1-byte buffer's address)."""
    prepared = sdk.PreparedLaunch(sdk_ops.BROKEN, torch.zeros(4))
    assert (prepared._plan.args.workspace, prepared._plan.args.workspaceSize) == (None, 0)


def test_prepared_launch_takes_cuda_tensors_only(library):
    with pytest.raises(SpecError, match=r"sdk_test\.shapes: argument 'x' must be a CUDA tensor on cpu"):
        sdk.PreparedLaunch(sdk_ops.SHAPES, torch.zeros(6, 5), torch.zeros(5), 9, 3)
