"""The Inductor switch's benchmark (``benchmarks.inductor_switch``) on CPU: its command line, its models, the
conversion with the switch on (each segment one generated op, equal to the model; the zoo model's in
``test_inductor_switch_zoo.py``), graphs moved to another device whole, the providers checked against eager before
they are timed, and on CPU the times it can take and what it says it cannot run. On the GPU:
``bash scripts/gpu_check.sh inductor-bench``."""

from __future__ import annotations

from csv import DictReader

import pytest
import torch

from torchtrt_plugins.benchmarks import inductor_switch, results
from torchtrt_plugins.benchmarks.environment import RunContext
from torchtrt_plugins.benchmarks.zoo_timing import Call, time_providers


def _targets(graph: torch.fx.GraphModule) -> set[str]:
    return {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}


def check_conversion(name: str, size, generated: int) -> None:
    """The switch on ``MODELS[name]``'s case ``size``: every no-converter target in the converted graph, none left
    with the switch on, ``generated`` generated ops, and both graphs equal to the model."""
    model = inductor_switch.MODELS[name]
    program, module, inputs = model.export(size)
    converted, switched, report = inductor_switch.convert(model, program)
    assert model.no_converter <= _targets(converted), "a no-converter target the graph does not call"
    assert not model.no_converter & _targets(switched), report["refused"]
    assert len(report["replaced"]) == generated and report["refused"] == []
    assert len(inductor_switch.generated_ops(switched)) == generated
    with torch.no_grad():
        expected = module(*inputs)
        for graph in (converted, switched):
            got = torch.utils._pytree.tree_leaves(graph(*inputs))
            assert len(got) == len(torch.utils._pytree.tree_leaves(expected))
            for g, e in zip(got, torch.utils._pytree.tree_leaves(expected)):
                torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4, equal_nan=True)


def test_the_long_tail_segment_becomes_one_generated_op():
    check_conversion("LongTail", inductor_switch.MODELS["LongTail"].sizes[0], generated=1)


class _Constant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.full((3,), 2.0))

    def forward(self, x):
        return (x + torch.tensor([1.0, 2.0, 3.0])) * self.scale + torch.ones(3)


def test_a_graph_moves_to_a_device_with_its_lifted_constants_and_factory_calls():
    # A constant export lifts stays a plain attribute of the module (GroundingDino has two), which Module.to leaves
    # where it is; a factory call names the device it was exported on.
    graph = torch.export.export(_Constant(), (torch.zeros(3),)).module()
    moved = inductor_switch.to_device(graph, torch.device("meta"))
    tensors = [_attr(moved, n.target) for n in _get_attrs(moved)]
    assert tensors and {t.device.type for t in tensors} == {"meta"}
    assert all(n.kwargs["device"].type == "meta" for n in moved.graph.nodes if "device" in n.kwargs)
    out = torch.utils._pytree.tree_leaves(moved(torch.zeros(3, device="meta")))
    assert [t.device.type for t in out] == ["meta"]
    assert {_attr(graph, n.target).device.type for n in _get_attrs(graph)} == {"cpu"}  # the original stays


def _get_attrs(graph: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in graph.graph.nodes if n.op == "get_attr"]


def _attr(module: torch.nn.Module, target: str) -> torch.Tensor:
    for name in target.split("."):
        module = getattr(module, name)
    return module


def test_providers_are_checked_against_eager_before_they_are_timed():
    x = torch.ones(4)
    calls = {
        "eager": lambda: x * 2,
        "same": lambda: (x * 2,),
        "differs": lambda: x * 3,
        "raises": lambda: 1 / 0,
        "checked, not timed": Call(lambda: x * 3, ("skipped", "needs a CUDA GPU")),
        "not run": Call(None, ("skipped", "needs a CUDA GPU")),
    }
    rows = time_providers("op", "4", calls, torch.device("cpu"), timers=("do_bench",), quick=True)
    assert [(r.provider, r.status, r.timed) for r in rows] == [
        ("eager", "ok", True),
        ("same", "ok", True),
        ("differs", "mismatch", False),
        ("raises", "error", False),
        ("checked, not timed", "mismatch", False),
        ("not run", "skipped", False),
    ]
    assert rows[3].reason.startswith("ZeroDivisionError") and rows[5].reason == "needs a CUDA GPU"


def test_a_model_that_cannot_be_built_here_is_skipped_with_its_reason():
    model = inductor_switch.SwitchModel("Missing", None, frozenset(), missing=lambda: "needs a library")
    rows = inductor_switch.time_case(model, None, RunContext(torch.device("cpu"), quick=True), log=lambda _: None)
    assert {(r.provider, r.timer) for r in rows} == {
        (p, t) for p in inductor_switch.PROVIDERS for t in inductor_switch.TIMERS
    }
    assert {(r.status, r.reason) for r in rows} == {("skipped", "needs a library")}


def test_on_cpu_it_times_what_the_cpu_can_and_says_what_it_cannot(tmp_path, capsys):
    csv = tmp_path / "inductor_switch.csv"
    argv = ["--models", "LongTail", "--quick", "--device", "cpu", "--csv", str(csv)]
    assert inductor_switch.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith(inductor_switch.NO_GPU)
    shapes = [results.format_shape(s) for s in inductor_switch.MODELS["LongTail"].sizes]
    assert all(f"inductor_switch/LongTail {s}: generated ops: 1 (" in out for s in shapes)
    rows = results.read_results(csv)
    assert inductor_switch.TIMERS == ("do_bench", "host")
    assert sorted((r["op"], r["provider"], r["shape"], r["timer"]) for r in rows) == sorted(
        ("inductor_switch/LongTail", p, s, t)
        for p in ("eager", "converted")
        for s in shapes
        for t in inductor_switch.TIMERS
    )
    assert all(float(r["median_ms"]) > 0 and r["gpu"].startswith("cpu: ") for r in rows)
    with open(csv.with_name(results.NOT_RUN_FILE), newline="") as handle:
        not_run = {(r["provider"], r["status"], r["reason"]) for r in DictReader(handle)}
    assert {(provider, status) for provider, status, _ in not_run} == {
        ("converted+inductor", "skipped"),
        ("torch.compile", "skipped"),
    }
    assert ("converted+inductor", "skipped", inductor_switch.ON_CPU) in not_run
    assert inductor_switch.ON_CPU in out and "not run on CPU with --quick" in out  # the list of what did not run


def test_unknown_models_are_named(capsys):
    with pytest.raises(ValueError, match=r"unknown models \['yolo'\]; the benchmark has \['LongTail'"):
        inductor_switch.run(["yolo"], device="cpu")
    with pytest.raises(SystemExit) as exit:
        inductor_switch.main(["--models", "LongTail,yolo", "--device", "cpu"])
    assert exit.value.code == 2 and "unknown models ['yolo']" in capsys.readouterr().err
