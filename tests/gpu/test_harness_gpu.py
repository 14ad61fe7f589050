"""The conformance harness with a GPU: the RMSNorm plugin's full lifecycle for every tactic against eager
``torch.ops.torchtrt.rms_norm`` (dtypes, odd shapes, dynamic dims, serialization round trip, zero violations),
every deliberately broken test plugin whose fault needs a device, the graph runner, and ``bench_enqueue``."""

import props
import pytest
import torch
from fixtures import rms_norm_eager, rms_norm_inputs

import torchtrt_plugins
from torchtrt_plugins.converters import plan
from torchtrt_plugins.ops import rms_norm
from torchtrt_plugins.testing import bench_enqueue
from torchtrt_plugins.testing import harness as H
from torchtrt_plugins.testing.runner import run_graph

SPEC = torchtrt_plugins.get("rms_norm").spec
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(1, 1), (3, 7), (5, 123, 123), (8, 4096), (2, 16384)]
TACTICS = [0] + [t.value for t in SPEC.tactics]


def _check_against_eager(result, x, w, eps, weight_offset=0.0):
    tol = SPEC.tolerance(x.dtype)
    for phase in ("build", "runtime"):
        for tactic in TACTICS:
            (y,) = result.outputs(tactic, phase)
            assert y.shape == x.shape and y.dtype == x.dtype and y.is_cuda
            eager = rms_norm_eager(x, w, eps, tactic, weight_offset)
            torch.testing.assert_close(y, eager, atol=tol.atol, rtol=tol.rtol)
            reference = rms_norm.reference(x, w, eps, weight_offset)
            torch.testing.assert_close(y, reference, atol=tol.atol, rtol=tol.rtol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rms_norm_every_tactic_matches_eager(build, shape, dtype):
    x, w = rms_norm_inputs(shape, dtype)
    result = H.run_call(plan(SPEC, (x, w, 1e-6)), x, w, library=build.library)
    result.assert_conformant()
    assert result.enqueue_skipped is None
    assert sorted((r.phase, r.tactic) for r in result.runs) == sorted(
        (p, t) for p in ("build", "runtime") for t in TACTICS
    )
    _check_against_eager(result, x, w, 1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hidden", [128, 1024, 4096])
def test_rms_norm_tactic_3_forms_through_the_plugin(build, hidden, dtype):
    """Every tactic's enqueue where tactic 3 has forms of its own: short rows (128, 1024) in many rows, and rows of a
    compiled length (4096) whose x exceeds the L2, at an odd row count."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = (l2 // (hidden * dtype.itemsize) + 1) | 1 if hidden == 4096 else 9001
    x, w = rms_norm_inputs((rows, hidden), dtype, seed=hidden)
    result = H.run_call(plan(SPEC, (x, w, 1e-6)), x, w, library=build.library)
    result.assert_conformant()
    assert 3 in {r.tactic for r in result.runs}
    _check_against_eager(result, x, w, 1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_rms_norm_weight_offset_field_reaches_every_tactic(build, dtype):
    """The plugin's ``weight_offset`` field (Gemma's ``1 + w``, issue 25): the same outputs as eager."""
    x, w = rms_norm_inputs((9, 2048), dtype, seed=3)
    w = w - 1
    result = H.run_call(plan(SPEC, (x, w, 1e-6, 1.0)), x, w, library=build.library)
    result.assert_conformant()
    _check_against_eager(result, x, w, 1e-6, weight_offset=1.0)


def test_rms_norm_dynamic_dims(build):
    x, w = rms_norm_inputs((6, 10, 256), torch.float16, seed=1)
    profile = [((1, 1, 256), (4, 8, 256), (16, 32, 256)), None]
    result = H.run_call(plan(SPEC, (x, w, 1e-5)), x, w, library=build.library, profile=profile)
    result.assert_conformant()
    assert result.output_shapes["symbolic"] == [["in0.d0", "in0.d1", "256"]]
    assert result.output_shapes["max"] == [[16, 32, 256]] and result.output_shapes["concrete"] == [[6, 10, 256]]
    _check_against_eager(result, x, w, 1e-5)


def test_rms_norm_serialization_round_trip_reproduces_outputs(build):
    x, w = rms_norm_inputs((33, 1000), torch.bfloat16, seed=2)
    result = H.run_call(plan(SPEC, (x, w, 1e-3)), x, w, library=build.library)
    result.assert_conformant()
    assert result.runtime_fields == result.serialized_fields
    for tactic in TACTICS:
        assert torch.equal(result.output(tactic, "build"), result.output(tactic, "runtime"))


def test_rms_norm_inputs_are_not_touched(build):
    x, w = rms_norm_inputs((4, 64), torch.float32, seed=3)
    x0, w0 = x.clone(), w.clone()
    H.run_call(plan(SPEC, (x, w, 1e-6)), x, w, library=build.library).assert_conformant()
    assert torch.equal(x, x0) and torch.equal(w, w0)


def scale(build, name, x, value=0.5, **kwargs):
    return H.run_plugin(build.broken_plugins, name, fields=[("scale", "FLOAT32", value)], inputs=[x], **kwargs)


@pytest.mark.parametrize("name", ["Scale", "ScaleUsesResource"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_correct_test_plugins(build, name, dtype):
    x = torch.randn(3, 257, device="cuda").to(dtype)
    result = scale(build, name, x)
    result.assert_conformant()
    for record in result.runs:
        torch.testing.assert_close(record.outputs[0], x * 0.5)
    if name == "ScaleUsesResource":
        # one attachToContext during the build (as NVIDIA's builder does), then one per tactic at run time (the
        # test plugin's own tactics, not rms_norm's)
        assert result.raw["resource_acquires"] == 1 + len({r.tactic for r in result.runs})


def test_data_dependent_outputs_are_trimmed_to_the_size_tensor(build):
    x = torch.randn(7, 9, device="cuda")
    result = H.run_plugin(build.broken_plugins, "Positives", fields=[("threshold", "FLOAT32", 0.25)], inputs=[x])
    result.assert_conformant()
    expected = x.reshape(-1)[x.reshape(-1) > 0.25]
    for record in result.runs:
        values, count = record.outputs
        assert record.size_tensor_values == {1: expected.numel()}
        assert count.shape == () and count.dtype == torch.int64 and int(count) == expected.numel()
        assert torch.equal(values, expected)


# Faults that need a device. CPU-visible ones are in tests/cpu/test_harness.py.
GPU_FAULTS = [
    ("ScaleCloneAllocates", "clone-allocates", "clone"),
    ("ScaleWritesPastOutput", "buffer-overrun", "enqueue"),
    ("ScaleModifiesInput", "input-modified", "enqueue"),
    ("ScaleUsesDefaultStream", "stream", "enqueue"),
]


@pytest.mark.parametrize("name, rule, method", GPU_FAULTS)
def test_broken_plugin_is_caught(build, name, rule, method):
    x = torch.randn(5, 300, device="cuda")
    x0 = x.clone()
    result = scale(build, name, x)
    assert result.rules == {rule}, result.summary()
    assert all(v.method == method for v in result.violations)
    assert torch.equal(x, x0), "the harness must hand the plugin copies of the caller's inputs"


def test_broken_plugins_do_not_poison_later_runs(build):
    x = torch.randn(5, 300, device="cuda")
    for name, _, _ in GPU_FAULTS:
        scale(build, name, x)
    scale(build, "Scale", x).assert_conformant()


class TinyModel(torch.nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.up = torch.nn.Linear(hidden, hidden)
        self.norm_weight = torch.nn.Parameter(1 + 0.1 * torch.randn(hidden))
        self.down = torch.nn.Linear(hidden, 8)

    def forward(self, x):
        h = torch.relu(self.up(x))
        return self.down(torch.ops.torchtrt.rms_norm(h, self.norm_weight, 1e-6))


@pytest.mark.parametrize("tactic", TACTICS)
def test_graph_runner_matches_eager(build, tactic):
    model = TinyModel().cuda()
    x = torch.randn(4, 5, 64, device="cuda")
    gm = torch.export.export(model, (x,)).module()
    out = run_graph(gm, x, library=build.library, tactic=tactic)
    assert list(out.results) and not out.fell_back
    out.assert_conformant()
    torch.testing.assert_close(out.outputs, model(x), atol=1e-5, rtol=1e-5)


def test_graph_runner_on_a_symbolically_traced_module(build):
    model = TinyModel().cuda().half()
    x = torch.randn(3, 64, device="cuda", dtype=torch.float16)
    out = run_graph(torch.fx.symbolic_trace(model), x, library=build.library)
    out.assert_conformant()
    torch.testing.assert_close(out.outputs, model(x), atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("tactic", TACTICS)
def test_bench_enqueue(build, tactic):
    x, w = rms_norm_inputs((64, 1024), torch.bfloat16)
    times = bench_enqueue("rms_norm", [x, w], tactic=tactic, iters=20, warmup=3, fields={"eps": 1e-5})
    assert len(times) == 20 and all(t > 0 for t in times)
    times = bench_enqueue(plan(SPEC, (x, w, 1e-5)), [x, w], tactic=tactic, iters=5)
    assert len(times) == 5


# ------------------------------------------------------------------------------------------ CUDA graph capture


def test_enqueue_that_waits_for_the_host_cannot_be_captured(build):
    x = torch.randn(5, 300, device="cuda")
    result = scale(build, "ScaleSyncsHost", x, tactics=[1], gate_timeout_s=0.3)
    assert result.rules == {"enqueue-blocks", "graph-capture"}, result.summary()
    assert "enqueue_syncs_host" in next(v for v in result.violations if v.rule == "graph-capture").detail


def test_first_enqueue_that_cannot_be_captured_is_reported_when_asked(build):
    x = torch.randn(5, 300, device="cuda")
    result = scale(build, "ScaleSyncsHost", x, tactics=[1], gate_timeout_s=0.3, capture_first_enqueue=True)
    assert "first-enqueue-capture" in result.rules, result.summary()


def test_declared_host_sync_is_accepted_and_checked(build):
    x = torch.randn(5, 300, device="cuda")
    result = scale(build, "ScaleSyncsHost", x, tactics=[1], gate_timeout_s=0.3, enqueue_syncs_host=True)
    result.assert_conformant()
    torch.testing.assert_close(result.run(1).outputs[0], x * 0.5)


def test_stale_host_sync_declaration_is_a_violation(build):
    x = torch.randn(5, 300, device="cuda")
    result = scale(build, "Scale", x, tactics=[1], enqueue_syncs_host=True)
    assert result.rules == {"host-sync-declaration"}, result.summary()


def test_no_op_declares_a_host_sync():
    # Every plugin of this project enqueues without reading back (masked_rows sizes its output through a size
    # tensor): each one's harness run above requires its enqueue to capture in a CUDA graph and replay exactly.
    assert [e.spec.name for e in torchtrt_plugins.all_ops() if e.spec.enqueue_syncs_host] == []


@pytest.mark.parametrize("op", sorted(e.spec.name for e in torchtrt_plugins.all_ops()))
def test_every_plugin_enqueue_is_captured_and_replayed(build, op):
    case = props.examples("cuda")[op]
    call = plan(torchtrt_plugins.get(op).spec, case.args, case.kwargs)
    result = H.run_call(call, *[a for a in case.args if isinstance(a, torch.Tensor)], library=build.library)
    result.assert_conformant()  # includes the graph-capture and graph-replay rules
    assert result.enqueue_skipped is None
