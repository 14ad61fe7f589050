"""Inductor plugins without Torch-TensorRT (``torchtrt_plugins.inductor_plugins``): segment discovery and its refusal
reasons, ATen-call nodes kept out, the generated declaration and its numerics in PyTorch, the recorded launch
sequence, and the generated C++ compiled with nvcc for sm_90. ``convertible`` stands in for Torch-TensorRT's
converter registry (the tt tier asks the real one)."""

from __future__ import annotations

import pytest
import torch
from inductor_cases import (
    BATCH_MAX,
    BATCH_MIN,
    BOOL_EDGES_UNSUPPORTED,
    UNSUPPORTED,
    BoolEdges,
    Unsupported,
    WithIntermediates,
    batch_dim,
    exported,
    replaced_bool_edges,
    replaced_dynamic_unsupported,
    replaced_unsupported,
)

from torchtrt_plugins import inductor_plugins
from torchtrt_plugins.inductor_plugins import generated_op, inductor_code, segments


def _targets(gm: torch.fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


@pytest.fixture(scope="module")
def replaced():
    return replaced_unsupported()


def test_one_segment_becomes_one_generated_op(replaced):
    gm, report, _ = replaced
    assert len(report["replaced"]) == 1 and report["refused"] == []
    targets = _targets(gm)
    assert not UNSUPPORTED & set(targets)
    assert sum(t.startswith("ttp_inductor.segment_") for t in targets) == 1
    assert "aten.mm.default" in targets


def test_the_graph_with_the_generated_op_equals_the_model(replaced):
    gm, _, (x, y) = replaced
    model = Unsupported().eval()
    torch.testing.assert_close(gm(x, y), model(x, y))


def test_the_generated_declaration_is_a_declaration_like_any_other(replaced):
    import torchtrt_plugins as ttp

    _, report, (x, _) = replaced
    declaration = generated_op._DECLARED[report["replaced"][0]]
    assert ttp.get(declaration.qualname).declaration is declaration
    assert str(declaration.schema).endswith("(Tensor input0, Tensor input1) -> (Tensor, Tensor)")
    assert [s.dtypes for s in declaration.spec.inputs] == [(torch.float32,), (torch.float32,)]
    weight = Unsupported().weight.detach()
    with torch._subclasses.FakeTensorMode() as mode:
        fakes = declaration.overload(mode.from_tensor(x), mode.from_tensor(weight))
    assert [(f.shape, f.dtype) for f in fakes] == [((8, 32), torch.float32), ((8, 32), torch.int64)]
    with pytest.raises(ValueError, match=r"ttp_inductor::segment_\w+: input0 must be of rank 2"):
        with torch._subclasses.FakeTensorMode() as mode:
            declaration.overload(mode.from_tensor(torch.randn(8)), mode.from_tensor(weight))


def test_the_launch_sequence_points_each_argument_at_an_input_an_output_or_the_workspace(replaced):
    _, report, _ = replaced
    compiled = generated_op._DECLARED[report["replaced"][0]].compiled_segment
    assert compiled.launches and len(compiled.kernels) == len(set(compiled.names))
    pointers = [a for launch in compiled.launches for a in launch.args if isinstance(a, inductor_code.Pointer)]
    assert {(p.where, p.index) for p in pointers if p.where != "workspace"} >= {
        ("input", 0),
        ("input", 1),
        ("output", 0),
        ("output", 1),
    }
    for kernel in compiled.kernels:
        # Triton targets sm_90a on sm_90: exact images, its cubin and its PTX
        assert [(i.arch, i.exact, i.kind) for i in kernel.images] == [(90, True, "cubin"), (90, True, "ptx")]
        assert kernel.images[0].data[:4] == b"\x7fELF"
        assert (
            b".target sm_90a" in kernel.images[1].data
            and b".entry " + kernel.function.encode() in kernel.images[1].data
        )


def test_intermediates_get_aligned_workspace_offsets():
    gm = torch.fx.experimental.proxy_tensor.make_fx(WithIntermediates())(torch.randn(16, 64))
    compiled = inductor_code.compile_segment(gm, [torch.empty(16, 64, device="meta")], [(90, False)])
    pointers = [a for launch in compiled.launches for a in launch.args if getattr(a, "where", "") == "workspace"]
    offsets = compiled.workspace_offsets()
    assert pointers and {p.index for p in pointers} == set(range(len(compiled.intermediates)))
    assert all(o % inductor_code.ALIGNMENT == 0 for o in offsets)
    assert compiled.workspace == offsets[-1] + inductor_code.aligned(compiled.intermediates[-1])
    assert compiled.intermediates == [16 * 64 * 4, 64 * 4]  # the cumsum, the column sum


def test_compiles_after_torch_cached_that_this_machine_has_no_triton_gpu():
    # torch caches has_triton(): False once asked here without a GPU (any earlier test in the worker), and Inductor then
    # refused the fake device with TritonMissing (CI).
    from torch.utils._triton import has_triton

    assert not has_triton()
    gm = torch.fx.experimental.proxy_tensor.make_fx(torch.special.erfcx)(torch.randn(8))
    compiled = inductor_code.compile_segment(gm, [torch.empty(8, device="meta")], [(90, False)])
    assert compiled.launches and not has_triton()


def test_matmul_is_kept_out_because_inductor_calls_aten_for_it():
    class MatmulBetween(torch.nn.Module):
        def forward(self, x, w):
            return torch.special.erfcx(x @ w) * 2

    gm = exported(MatmulBetween(), torch.randn(4, 8), torch.randn(8, 16))
    found = segments.find_segments(gm, lambda n: False, inductor_plugins._calls_aten)
    assert [r.nodes for r in found.refused] == [["mm"]]
    assert "extern_kernels.mm" in found.refused[0].reason
    assert [[n.name for n in s.nodes] for s in found.segments] == [["special_erfcx", "mul"]]


def test_bool_tensors_cross_the_plugin_boundary_as_int8():
    gm, report, inputs = replaced_bool_edges()
    assert len(report["replaced"]) == 2 and report["refused"] == [], report
    targets = _targets(gm)
    assert not BOOL_EDGES_UNSUPPORTED & set(targets)
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and str(n.target).startswith("ttp_inductor.")]
    for call in calls:
        values = call.meta["val"] if isinstance(call.meta["val"], tuple) else (call.meta["val"],)
        dtypes = [a.meta["val"].dtype for a in call.all_input_nodes] + [v.dtype for v in values]
        assert torch.bool not in dtypes and torch.int8 in dtypes, (call.name, dtypes)
    casts = [n.kwargs["dtype"] for n in gm.graph.nodes if n.target is torch.ops.aten._to_copy.default]
    assert sorted(map(str, casts)) == ["torch.bool", "torch.int8"]
    torch.testing.assert_close(gm(*inputs), BoolEdges().eval()(*inputs))


@pytest.fixture(scope="module")
def replaced_dynamic():
    return replaced_dynamic_unsupported()


def test_a_symbolic_batch_is_one_generated_op_reading_it_at_run_time(replaced_dynamic):
    gm, report, (x, y) = replaced_dynamic
    assert len(report["replaced"]) == 1 and report["refused"] == [], report
    declaration = generated_op._DECLARED[report["replaced"][0]]
    compiled = declaration.compiled_segment
    s0 = inductor_code.symbol("s0")
    assert compiled.symbols == [inductor_code.SizeSymbol("s0", 0, 0, BATCH_MIN, BATCH_MAX)]
    assert compiled.input_shapes == [(s0, 32), (32,)] and compiled.output_shapes == [(s0, 32), (s0, 32)]
    assert any(s0 in getattr(g, "free_symbols", ()) for launch in compiled.launches for g in launch.grid)
    source = declaration.library.sources[0].read_text()
    # The batch read off input 0 at run time: in the grid and the size argument, checked against its range.
    assert "static_cast<uint64_t>(args.inputs[0].dims[0])" in source
    assert "static_cast<int32_t>(args.inputs[0].dims[0])" in source
    assert f"args.inputs[0].dims[0] >= {BATCH_MIN} && args.inputs[0].dims[0] <= {BATCH_MAX}" in source
    assert "args.outputs[0].dims[0] == args.inputs[0].dims[0]" in source
    model = Unsupported().eval()
    for batch in (3, 40):
        xb = torch.randn(batch, 32)
        torch.testing.assert_close(gm(xb, y), model(xb, y))


def test_the_output_shapes_are_the_plugins_shape_expressions_of_the_batch(replaced_dynamic):
    from torchtrt_plugins import _derive

    _, report, _ = replaced_dynamic
    declaration = generated_op._DECLARED[report["replaced"][0]]
    (program,) = [_derive.Program.parse(p) for p in declaration.compiled_programs]
    batch = (_derive.DIM, 0, 0)
    assert [dims for _, dims in program.outputs] == [(batch, (_derive.CONST, 32))] * 2
    assert _derive.evaluate(declaration.compiled_programs[0], [(17, 32), (32,)])[0] == [(17, 32), (17, 32)]


def test_the_plugin_gives_its_output_shapes_as_expressions_over_a_profile(replaced_dynamic):
    from torchtrt_plugins.testing import sdk_build_unavailable
    from torchtrt_plugins.testing.harness import run_plugin

    if reason := sdk_build_unavailable():
        pytest.skip(reason)
    _, report, _ = replaced_dynamic
    declaration = generated_op._DECLARED[report["replaced"][0]]
    weight = Unsupported().weight.detach()
    profile = [((BATCH_MIN, 32), (8, 32), (BATCH_MAX, 32)), None]
    result = run_plugin(
        declaration.library.plugin_path(),
        *declaration.spec.creator_key,
        inputs=[torch.randn(3, 32), weight],
        profile=profile,
        enqueue=False,
    )
    result.assert_conformant()
    assert result.output_shapes["symbolic"] == [["in0.d0", "32"]] * 2
    assert [result.output_shapes[p] for p in ("min", "max", "concrete")] == [
        [[BATCH_MIN, 32]] * 2,
        [[BATCH_MAX, 32]] * 2,
        [[3, 32]] * 2,
    ]
    assert result.workspace_size == 0  # its kernel writes the outputs only


def test_intermediates_over_a_symbolic_batch_are_sized_by_the_workspace_function():
    gm = exported(WithIntermediates(), torch.randn(16, 64), dynamic_shapes=({0: batch_dim()},))
    report = inductor_plugins.replace_segments(gm, lambda n: False)
    declaration = generated_op._DECLARED[report["replaced"][0]] if report["replaced"] else None
    assert declaration is not None, report["refused"]
    compiled = declaration.compiled_segment
    s0 = inductor_code.symbol("s0")
    assert s0 in compiled.intermediates[0].free_symbols  # the cumsum: s0 * 64 floats
    at = {s0: 50}
    assert [int(b.subs(at)) if not isinstance(b, int) else b for b in compiled.intermediates][0] == 50 * 64 * 4
    source = declaration.library.sources[0].read_text()
    assert "size_t workspaceLayout(::ttp::sdk::LaunchArgs const& args, size_t* offsets)" in source
    assert "args.inputs[0].dims[0]" in source.split("size_t workspaceLayout")[1].split("return size;")[0]


def test_the_plugin_asks_for_the_workspace_of_the_profiles_maximum():
    from torchtrt_plugins.testing import sdk_build_unavailable
    from torchtrt_plugins.testing.harness import run_plugin

    if reason := sdk_build_unavailable():
        pytest.skip(reason)
    gm = exported(WithIntermediates(), torch.randn(16, 64), dynamic_shapes=({0: batch_dim()},))
    report = inductor_plugins.replace_segments(gm, lambda n: False)
    declaration = generated_op._DECLARED[report["replaced"][0]]
    compiled = declaration.compiled_segment
    profile = [((BATCH_MIN, 64), (8, 64), (BATCH_MAX, 64))]
    result = run_plugin(
        declaration.library.plugin_path(),
        *declaration.spec.creator_key,
        inputs=[((8, 64), torch.float32)],
        profile=profile,
        enqueue=False,
    )
    result.assert_conformant()
    at_max = compiled.workspace.subs({inductor_code.symbol("s0"): BATCH_MAX})
    assert result.workspace_size == int(at_max) == BATCH_MAX * 64 * 4 + 64 * 4


def test_data_dependent_sizes_are_refused_with_the_reason():
    class Nonzero(torch.nn.Module):
        def forward(self, x):
            return torch.special.erfcx(x[x > 0]) * 2

    gm = exported(Nonzero(), torch.randn(8, 32))
    found = segments.find_segments(gm, lambda n: False, lambda n: None)
    assert not any("index" in str(n.target) for s in found.segments for n in s.nodes)
    reasons = [r.reason for r in found.refused]
    assert any(
        "gives data-dependent sizes" in r and "output shapes are expressions of its input sizes" in r for r in reasons
    ), reasons


def test_a_group_taking_a_size_from_outside_is_refused_naming_it():
    class Flattens(torch.nn.Module):
        def forward(self, x):
            return torch.special.erfcx(x).reshape(x.shape[0], -1)

    gm = exported(Flattens(), torch.randn(8, 4, 4), dynamic_shapes=({0: batch_dim()},))
    found = segments.find_segments(gm, lambda n: False, inductor_plugins._calls_aten)
    reasons = [r.reason for r in found.refused]
    assert any(r.startswith("it takes sym_size") and "a SymInt, not a tensor" in r for r in reasons), reasons
    assert not any("ATen" in r for r in reasons), reasons


def test_mutation_and_non_tensor_results_are_refused():
    def mutating(x):
        y = x * 2
        y.add_(1)
        return y

    gm = torch.fx.experimental.proxy_tensor.make_fx(mutating)(torch.randn(4))
    found = segments.find_segments(gm, lambda n: str(n.target) != "aten.add_.Tensor", lambda n: None)
    assert [r.reason for r in found.refused] == ["aten.add_.Tensor mutates its inputs"]


def test_a_kernel_that_writes_into_an_input_is_refused():
    def updates_its_input(x):
        x.add_(1)  # Inductor's kernel stores into the input's buffer
        return x * 2

    gm = torch.fx.experimental.proxy_tensor.make_fx(updates_its_input)(torch.randn(8))
    with pytest.raises(inductor_code.Refused, match=r"writes into input 0 .*a plugin's inputs are read-only"):
        inductor_code.compile_segment(gm, [torch.empty(8, device="meta")], [(90, False)])


def test_a_node_inductor_cannot_lower_stays_out_with_the_policy_as_its_reason(monkeypatch):
    from torch._inductor import lowering

    def erfcx(x):
        return torch.special.erfcx(x) * 2

    gm = torch.fx.experimental.proxy_tensor.make_fx(erfcx)(torch.randn(8))
    (node,) = [n for n in gm.graph.nodes if n.target is torch.ops.aten.special_erfcx.default]
    # Inductor hands an op it has no lowering for to ATen (a fallback kernel).
    monkeypatch.setitem(
        lowering.lowerings,
        torch.ops.aten.special_erfcx.default,
        lowering.fallback_handler(torch.ops.aten.special_erfcx.default, add_to_fallback_set=False),
    )
    monkeypatch.setattr(inductor_plugins, "_ATEN_CALLS", {})
    found = segments.find_segments(gm, lambda n: False, inductor_plugins._calls_aten)
    (refusal,) = [r for r in found.refused if r.nodes == [node.name]]
    assert refusal.reason.startswith("Inductor hands it to ATen (") and "runs Triton kernels only" in refusal.reason
    assert [[n.name for n in s.nodes] for s in found.segments] == [["mul"]]


def test_a_group_that_feeds_itself_through_the_rest_is_refused():
    def around(x):
        a = torch.special.erfcx(x)
        b = a.relu()  # convertible: outside the group, between two of its nodes
        return torch.special.erfcx(b) * a

    gm = torch.fx.experimental.proxy_tensor.make_fx(around)(torch.randn(4))
    found = segments.find_segments(gm, lambda n: str(n.target) == "aten.relu.default", lambda n: None)
    assert [r.reason for r in found.refused] == ["a node outside it depends on it and feeds it"]


def test_the_switch_is_off_by_default(monkeypatch):
    monkeypatch.delenv(inductor_plugins.ENV_VAR, raising=False)
    monkeypatch.setattr(inductor_plugins, "_enabled", None)
    assert not inductor_plugins.is_enabled()
    gm = exported(Unsupported(), torch.randn(8, 32), torch.randn(32, 8))
    before = _targets(gm)
    assert inductor_plugins.torch_tensorrt_pass(gm) is gm and _targets(gm) == before
    monkeypatch.setenv(inductor_plugins.ENV_VAR, "1")
    assert inductor_plugins.is_enabled()


def test_the_generated_launcher_compiles_with_nvcc_for_sm_90(replaced):
    from torchtrt_plugins import _build
    from torchtrt_plugins.testing import sdk_build_unavailable

    if reason := sdk_build_unavailable():
        pytest.skip(reason)
    _, report, _ = replaced
    declaration = generated_op._DECLARED[report["replaced"][0]]
    source = declaration.library.sources[0].read_text()
    assert "launchCubin(kKernel0" in source and "other than the ones it was generated for" in source
    # Registered, so the plugin loads every kernel in onShapeChange, before its first enqueue (graph capture).
    assert "::ttp::sdk::CubinKernelRegistration const kKernel0_registration{kKernel0};" in source
    try:
        built = declaration.library.build()
    except _build.BuildError as err:
        pytest.fail(f"the generated launcher must compile wherever nvcc and the TensorRT headers are: {err}")
    assert built.plugins.is_file() and built.launchers.is_file()
    assert built.plugins in inductor_plugins.plugin_libraries()


def test_check_op_passes_the_generated_op_where_no_gpu_is(replaced):
    from torchtrt_plugins.testing import check_op, sdk_build_unavailable

    if reason := sdk_build_unavailable():
        pytest.skip(reason)
    _, report, (x, _) = replaced
    declaration = generated_op._DECLARED[report["replaced"][0]]
    sample = (x, Unsupported().weight.detach())
    result = check_op(declaration.overload, [sample], reference=declaration.reference, checks=("plan", "harness"))
    assert {"plan", "harness"} <= set(result.passed), result
