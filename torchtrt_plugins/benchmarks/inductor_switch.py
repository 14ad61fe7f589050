"""Models with ops no converter takes, timed with and without the Inductor plugins' switch (issue 48;
docs/inductor_plugins.md): eagerly, as their converted graph with the switch off and on, and under torch.compile.

For each case, in one process, the time per call of

- ``eager``: the module as written;
- ``converted``: its exported graph as Torch-TensorRT would partition it with the switch off (our lowering applied):
  the segments no converter takes run in PyTorch, the rest as the converted graph runs it (declared ops on their eager
  kernels, the other ops PyTorch's: no engine runs on our machines);
- ``converted+inductor``: the same graph with the switch on: each segment is one generated op
  (``inductor_plugins.replace_segments``), run through its eager op, which launches the cubins its plugin does;
- ``torch.compile``: Inductor on the eager module, the peer.

Which ops have no converter is each model's ``no_converter``, what Torch-TensorRT 2.13 with us leaves in PyTorch
(the tt tier checks it: ``tests/tt/test_inductor_plugins_tt.py``, ``test_inductor_plugins_zoo_tt.py``), standing in
for its converter registry, which cannot be imported where the GPU is. Graphs are exported and converted on the CPU,
as the cpu and gpu tiers do it, then moved to the device.

Timers: ``do_bench`` (GPU time per call, L2 flushed before each; it hides host time) and ``host`` (wall time per
call). Every output is compared with eager's first (``zoo_timing.ATOL``/``RTOL``); one that differs is recorded as a
mismatch, not timed. Rows go to a results CSV in the record format (``results.COLUMNS``): op
``inductor_switch/<model>``, shape the first input's. Without a GPU the times are the CPU's wall clock, and
``converted+inductor`` is converted and checked but not timed (a generated op's CPU kernel is its segment in PyTorch).

    python -m torchtrt_plugins.benchmarks.inductor_switch [--models LongTail,GroundingDinoModel] [--csv PATH]
        [--record PATH] [--quick] [--device auto|cuda|cpu]
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from torchtrt_plugins.benchmarks.common import compile_inductor, no_recompile, resolve_device
from torchtrt_plugins.benchmarks.environment import RunContext, environment, needs_inductor, needs_sdk_build
from torchtrt_plugins.benchmarks.results import Result, format_not_run, format_shape, format_table, write_results
from torchtrt_plugins.benchmarks.timing import _first_line
from torchtrt_plugins.benchmarks.zoo_timing import Call, command_line, time_providers

#: Where the rows go without --csv.
DEFAULT_CSV = Path("bench_results") / "inductor_switch.csv"
PROVIDERS = ("eager", "converted", "converted+inductor", "torch.compile")
TIMERS = ("do_bench", "host")
OP_PREFIX = "inductor_switch/"
#: What the run says first where there is no GPU.
NO_GPU = (
    "no CUDA GPU here: the times are CPU wall clock, and converted+inductor is converted and checked against eager "
    "but not timed (on CPU a generated op runs its segment in PyTorch, not Inductor's kernels)"
)
ON_CPU = "needs a CUDA GPU: on CPU a generated op runs its segment in PyTorch, not Inductor's kernels"
QUICK_ZOO_COMPILE = "not run with --quick: torch.compile of a whole zoo model (Inductor compiling every kernel)"

Exported = tuple[torch.export.ExportedProgram, torch.nn.Module, tuple[torch.Tensor, ...]]


@dataclass(frozen=True)
class SwitchModel:
    name: str
    #: ``export(size) -> (exported program, eager module, inputs)``, all on the CPU; ``size`` one of ``sizes``.
    export: Callable[[tuple[int, ...] | None], Exported]
    #: The call targets Torch-TensorRT 2.13 with us has no converter for in this model's graph.
    no_converter: frozenset[str]
    #: One case each (None: the model's own inputs).
    sizes: tuple[tuple[int, ...] | None, ...] = (None,)
    #: Why the model cannot be built here (e.g. a library it comes from is missing), or None.
    missing: Callable[[], str | None] = lambda: None
    #: A zoo model: ``--quick`` leaves out its torch.compile.
    zoo: bool = False


def _long_tail(size: tuple[int, ...] | None) -> Exported:
    from torchtrt_plugins.benchmarks.models import LongTail

    model = LongTail().eval()
    x = torch.randn(*size, generator=torch.Generator().manual_seed(0))
    return torch.export.export(model, (x,)), model, (x,)


def _zoo_export(name: str) -> Callable[[tuple[int, ...] | None], Exported]:
    def export(size: tuple[int, ...] | None) -> Exported:
        from torchtrt_plugins import zoo

        return zoo.export(name)

    return export


def _zoo_missing() -> str | None:
    # Asked before anything imports torchtrt_plugins.zoo: without torchvision, torchtrt_plugins.vision would declare
    # its two ops on a library of its own.
    missing = [name for name in ("torchvision", "transformers") if importlib.util.find_spec(name) is None]
    return f"needs {' and '.join(missing)} (the zoo's model classes)" if missing else None


MODELS: dict[str, SwitchModel] = {
    model.name: model
    for model in (
        # 4x16: the tiers' input (launch-bound); 256x1024: 1 MiB in. The bucket boundaries stay >= 2.8e-5 from every
        # value at seed 0 (measured on CPU), far above fp32 rounding (< 1e-6 here), so no bucket flips with it.
        SwitchModel(
            "LongTail",
            _long_tail,
            frozenset({"aten.special_erfcx.default", "aten.logcumsumexp.default", "aten.bucketize.Tensor"}),
            sizes=((4, 16), (256, 1024)),
        ),
        # With our ATen fallback converters off (converters.aten_fallbacks.disabled()): with them on it is one engine
        # without the switch, and the switch has nothing to do.
        SwitchModel(
            "GroundingDinoModel",
            _zoo_export("GroundingDinoModel"),
            frozenset({"aten.isin.Tensor_Tensor", "aten.cummax.default", "aten.cummin.default"}),
            missing=_zoo_missing,
            zoo=True,
        ),
    )
}


def _targets(graph: torch.fx.GraphModule) -> list[str]:
    return [str(node.target) for node in graph.graph.nodes if node.op == "call_function"]


def generated_ops(graph: torch.fx.GraphModule) -> list[str]:
    """The generated ops ``graph`` calls."""
    from torchtrt_plugins.inductor_plugins.generated_op import NAMESPACE

    return [target for target in _targets(graph) if target.startswith(f"{NAMESPACE}.")]


def convert(
    model: SwitchModel, program: torch.export.ExportedProgram
) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule, dict]:
    """``(converted, converted with the switch on, its report)`` of ``program`` (``replace_segments``' report:
    the generated ops' names and the refused groups with their reasons)."""
    from torchtrt_plugins import inductor_plugins, lowering

    converted, switched = lowering.lower(program.module()), lowering.lower(program.module())
    report = inductor_plugins.replace_segments(switched, lambda node: str(node.target) not in model.no_converter)
    return converted, switched, report


def to_device(graph: torch.fx.GraphModule, device: torch.device) -> torch.fx.GraphModule:
    """A copy of ``graph`` (exported on the CPU) on ``device``: its tensors (weights, buffers, lifted constants), and
    the device its nodes name (factory calls, export's metadata checks)."""
    from torchtrt_plugins.inductor_plugins.segments import on_device

    return on_device(graph, device).to(device)


def _no_grad(fn: Callable[..., object], *inputs: torch.Tensor) -> Callable[[], object]:
    def call() -> object:
        with torch.no_grad():
            return fn(*inputs)

    return call


def _not_run(op: str, shape: str, device: torch.device, status: str, reason: str) -> list[Result]:
    return [Result(op, p, shape, "fp32", device.type, status, reason, timer=t) for p in PROVIDERS for t in TIMERS]


def _switched_call(switched, report: dict, inputs, ctx: RunContext) -> Call:
    if not report["replaced"]:
        refused = "; ".join(f"{', '.join(r.nodes)}: {r.reason}" for r in report["refused"]) or "no segment found"
        return Call(None, ("error", f"the switch generated no op ({refused})"))
    if ctx.device.type != "cuda":
        return Call(_no_grad(switched, *inputs), ("skipped", ON_CPU))
    if reason := needs_sdk_build(ctx):  # the generated ops' launcher libraries are built here
        return Call(None, ("skipped", reason))
    return Call(_no_grad(switched, *inputs))


def _compiled_call(model: SwitchModel, module: torch.nn.Module, inputs, ctx: RunContext) -> Call:
    reason = needs_inductor(ctx) or (QUICK_ZOO_COMPILE if model.zoo and ctx.quick else None)
    if reason:
        return Call(None, ("skipped", reason))
    torch._dynamo.reset()
    compiled = _no_grad(compile_inductor(module), *inputs)
    try:
        compiled()  # compiles: outside the timing, where a recompile is an error
    except Exception as err:  # noqa: BLE001 - recorded, the run goes on
        return Call(None, ("error", f"torch.compile: {_first_line(err)}"))
    return Call(compiled)


def time_case(model: SwitchModel, size: tuple[int, ...] | None, ctx: RunContext, log=print) -> list[Result]:
    """The rows of one case of ``model``: every provider by every timer, or why it did not run."""
    op, device = OP_PREFIX + model.name, ctx.device
    shape = format_shape(size) if size else ""
    if reason := model.missing():
        return _not_run(op, shape, device, "skipped", reason)
    begin = time.perf_counter()
    try:
        program, module, inputs = model.export(size)
        converted, switched, report = convert(model, program)
    except Exception as err:  # noqa: BLE001 - recorded, the run goes on
        return _not_run(op, shape, device, "error", f"could not export and convert: {_first_line(err)}")
    shape = format_shape(inputs[0].shape)
    refused = "".join(f"; refused {', '.join(r.nodes)}: {r.reason}" for r in report["refused"])
    converting = time.perf_counter() - begin
    log(f"{op} {shape}: generated ops: {len(report['replaced'])}{refused} (export and convert: {converting:.1f} s)")
    module, inputs = module.to(device), tuple(t.to(device) for t in inputs)
    converted, switched = to_device(converted, device), to_device(switched, device)
    calls = {
        "eager": _no_grad(module, *inputs),
        "converted": _no_grad(converted, *inputs),
        "converted+inductor": _switched_call(switched, report, inputs, ctx),
        "torch.compile": _compiled_call(model, module, inputs, ctx),
    }
    with no_recompile():
        return time_providers(op, shape, calls, device, TIMERS, ctx.quick)


def run(
    names: Sequence[str] | None = None,
    *,
    device: str | torch.device = "auto",
    csv_path: str | Path = DEFAULT_CSV,
    record: str | Path | None = None,
    quick: bool = False,
    log: Callable[[str], None] = print,
) -> list[Result]:
    """Time every case of the models ``names`` (default: all of ``MODELS``), append the rows to ``csv_path`` (and
    ``record``), print the table and what did not run; returns the rows."""
    unknown = [name for name in names or () if name not in MODELS]
    if unknown:
        raise ValueError(f"inductor_switch: unknown models {unknown}; the benchmark has {list(MODELS)}")
    ctx = RunContext(resolve_device(device) if isinstance(device, str) else device, quick)
    if ctx.device.type != "cuda":
        log(NO_GPU)
    results = []
    for name in names or list(MODELS):
        for size in MODELS[name].sizes:
            begin = time.perf_counter()
            rows = time_case(MODELS[name], size, ctx, log)
            results += rows
            statuses = dict.fromkeys(f"{r.provider} {r.status}" for r in rows if r.status != "ok")
            log(f"{rows[0].op} {rows[0].shape}: {', '.join(statuses) or 'ok'} ({time.perf_counter() - begin:.1f} s)")
            if ctx.device.type == "cuda":
                torch.cuda.empty_cache()
    path = write_results(results, environment(ctx.device), csv_path, record)
    log("")
    log(format_table(results))
    mismatches = [f"  {r.op} {r.shape} {r.provider}: {r.reason}" for r in results if r.status == "mismatch"]
    if mismatches:
        log("\n".join(["Mismatches (not timed):", *dict.fromkeys(mismatches)]))
    log(format_not_run(results))
    log(f"rows: {path}")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    quick = "shorter timing; no torch.compile of zoo models"
    return command_line(argv, run, __doc__, str(list(MODELS)), device="auto", csv=DEFAULT_CSV, quick=quick)


if __name__ == "__main__":
    sys.exit(main())
