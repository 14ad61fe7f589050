"""``check_op``: test an op that has a plugin (ours or declared with ``torchtrt_plugins.declare``) in one call.

From the user's own pytest::

    from torchtrt_plugins.testing import check_op

    def test_scaled_add():
        report = check_op(torch.ops.myops.scaled_add, [(x, y, 2.0)], reference=my_reference)
        print(report)            # what ran, what was skipped and why

Each sample (a tuple of arguments, or ``(args, kwargs)``) goes through:

- ``eager``: the op against ``reference`` (on the sample's device, and on CUDA when a GPU is there); for a kernel
  written in Python (``kernels``), every tactic also against the same kernel launched from Python where Triton
  or CuPy is installed (reported as ``python kernel``);
- ``opcheck``: ``torch.library.opcheck``;
- ``compile``: ``torch.compile(fullgraph=True)`` against eager;
- ``plan``: the op traced symbolically (``make_fx``), the converter's validator and plan for its node, and the
  shape program evaluated at the sample's shapes against eager's output shapes;
- ``harness``: the plugin through the conformance harness (every rule; ``enqueue`` for every tactic, compared with
  eager, when a GPU is there);
- ``rtx``: where ``tensorrt_rtx`` imports, the plugin library in NVIDIA's registry: creators, ``create_plugin`` in
  both phases from the converter's fields, an out-of-range field rejected;
- ``trt``: where TensorRT and Torch-TensorRT import (and a GPU), ``torch_tensorrt.compile`` against eager.

Outputs are compared with the declaration's ``tolerances`` for their dtype (``spec.DEFAULT_TOLERANCES`` for a dtype
it leaves out). A check that cannot run here is skipped with its reason; a failing one raises ``AssertionError``
naming the op, the sample and the check.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from .. import _build, _derive
from .. import plan as planning
from .. import registry as op_registry
from .. import spec as spec_mod
from ..converters import _factory

if TYPE_CHECKING:
    from ..declaration import Declaration

CHECKS = ("eager", "opcheck", "compile", "plan", "harness", "rtx", "trt")


@dataclass
class CheckReport:
    op: str
    passed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"check_op {self.op}: passed {', '.join(self.passed) or 'nothing'}"]
        lines += [f"  skipped {name}: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines)


def _entry(op: Any) -> op_registry.OpEntry:
    entry = planning.entry_for_target(op)
    if entry is None and isinstance(op, str):
        entry = op_registry.get(op)
    if entry is None:
        raise ValueError(f"check_op: {op!r} is not an op with a plugin (declare it with torchtrt_plugins.declare)")
    return entry


def _overload(entry: op_registry.OpEntry) -> Any:
    return getattr(getattr(torch.ops, entry.spec.op_namespace), entry.spec.name).default


def _split(sample: Any) -> tuple[tuple, dict]:
    if isinstance(sample, tuple) and len(sample) == 2 and isinstance(sample[1], dict) and isinstance(sample[0], tuple):
        return sample[0], sample[1]
    return tuple(sample), {}


def _call_with(op: Any, kwargs: dict, *args: Any) -> Any:
    return op(*args, **kwargs)


def _to(value: Any, device: Any) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


def _outputs(value: Any) -> list[torch.Tensor]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _comparable(t: torch.Tensor) -> torch.Tensor:
    """FP8 compared as the values it holds: assert_close takes no tolerance for it (a step of e4m3 is 2^-3)."""
    return t.float() if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else t


def _assert_close(spec: spec_mod.OpSpec, actual: Any, expected: Any, what: str) -> None:
    for i, (a, e) in enumerate(zip(_outputs(actual), _outputs(expected), strict=True)):
        tolerance = spec.tolerance(e.dtype)
        assert a.shape == e.shape, (
            f"{spec.label}: {what}: output {i} has shape {tuple(a.shape)}, expected {tuple(e.shape)}"
        )
        torch.testing.assert_close(
            _comparable(a.cpu()),
            _comparable(e.cpu()),
            atol=tolerance.atol,
            rtol=tolerance.rtol,
            msg=lambda m, i=i: f"{spec.label}: {what}: output {i}: {m}",
        )


def _traced_node(fn: Callable, args: tuple, kwargs: dict, target: Any) -> torch.fx.Node:
    from torch.fx.experimental.proxy_tensor import make_fx

    graph = make_fx(lambda *a: fn(*a, **kwargs), tracing_mode="symbolic")(*args)
    for node in graph.graph.nodes:
        if node.op == "call_function" and node.target == target:
            return node
    raise AssertionError(f"{target}: not found in the traced graph {graph.graph}")


def _check_plan(entry: op_registry.OpEntry, op: Any, args: tuple, kwargs: dict, eager: Any) -> Any:
    spec = entry.spec
    node = _traced_node(op, args, kwargs, op)
    assert _factory.validate_node(node), (
        f"{spec.label}: the converter's validator rejects {node.format_node()}: {node.meta.get(_factory.REJECTED)}"
    )
    planning.plan_node(node)  # symbolic sizes: what a dynamic-shape engine gets
    call = planning.plan(spec, args, kwargs)
    assert len(call.tensor_inputs) == len(spec.inputs)
    declaration = entry.declaration
    if declaration is not None:
        program = declaration.derive_for_values(*args, **kwargs).program
        shapes = [tuple(t.shape) for t in call.tensor_inputs]
        outputs = _outputs(eager)
        sizes = None
        uppers = _derive.evaluate(program, shapes)[1]
        if uppers:
            # Each dynamic size takes its eager value: the dims of the outputs that use it.
            sizes = _sizes_from_eager(program, shapes, outputs)
            for k, (value, upper) in enumerate(zip(sizes, uppers, strict=True)):
                assert 0 <= value <= upper, f"{spec.label}: dynamic size {k} is {value}, above its upper bound {upper}"
        expected, _ = _derive.evaluate(program, shapes, sizes=sizes)
        actual = [tuple(o.shape) for o in outputs]
        assert expected == actual, f"{spec.label}: the shape program gives {expected}, eager gives {actual}"
        dtypes = _derive.output_dtypes(program, [t.dtype for t in call.tensor_inputs])
        assert dtypes == [o.dtype for o in outputs], f"{spec.label}: the shape program gives dtypes {dtypes}"
    return call


def _sizes_from_eager(program: Sequence[int], shapes: list, outputs: list[torch.Tensor]) -> list[int]:
    parsed = _derive.Program.parse(program)
    found: dict[int, int] = {}
    for (_, dims), out in zip(parsed.outputs, outputs, strict=True):
        for expr, actual in zip(dims, out.shape, strict=True):
            if len(expr) == 2 and expr[0] == _derive.SIZE:
                found[expr[1]] = int(actual)
    return [found.get(k, 0) for k in range(len(parsed.sizes))]


def _check_harness(entry: op_registry.OpEntry, call: Any, args: tuple, kwargs: dict, eager: Any, report: CheckReport):
    from .harness import run_call

    library = entry.library() if entry.library is not None else None
    tensors = [_to(t, "cuda") if torch.cuda.is_available() else t for t in call.tensor_inputs]
    result = run_call(call, *tensors, library=library)
    result.assert_conformant()
    if result.enqueue_skipped:
        report.skipped["harness enqueue"] = result.enqueue_skipped
        return
    spec = entry.spec
    for record in result.runs:
        outputs = record.outputs[: len(spec.outputs)]
        _assert_close(spec, outputs, eager, f"plugin enqueue ({record.phase}, tactic {record.tactic})")


def _unbuildable(err: _build.BuildError) -> str:
    """Why a check that needs the op's plugin library is skipped: the library is neither prebuilt nor buildable here
    (no TensorRT headers, no nvcc). A build that failed with everything it needs present is the op's failure: raised."""
    missing = _build.plugin_build_prerequisites()
    if not missing:
        raise err
    return "the plugin library is not prebuilt and cannot be built here: " + "; ".join(missing)


def _check_rtx(entry: op_registry.OpEntry, call: Any) -> None:
    trt = importlib.import_module("tensorrt_rtx")
    registry = trt.get_plugin_registry()
    for phase in (trt.TensorRTPhase.BUILD, trt.TensorRTPhase.RUNTIME):
        plugin = _factory.create_plugin(call, phase, trt, registry)
        assert plugin is not None, f"{entry.spec.label}: tensorrt_rtx's registry did not create {call.creator_key}"
    for fspec in entry.spec.fields:
        bad = None
        if fspec.max is not None and not fspec.shape_input:
            bad = fspec.max + (1 if not fspec.is_float else abs(fspec.max) + 1)
        elif fspec.min is not None and not fspec.shape_input:
            bad = fspec.min - (1 if not fspec.is_float else abs(fspec.min) + 1)
        if bad is None:
            continue
        fields = [planning.FieldValue(f.name, f.type, bad if f.name == fspec.name else f.value) for f in call.fields]
        bad_call = planning.PluginCall(**{**call.__dict__, "fields": fields})
        printed: list[str] = []
        with _stderr_into(printed):  # the rejection it must log: printed only where the check fails
            rejected = _factory.create_plugin(bad_call, trt.TensorRTPhase.BUILD, trt, registry)
        assert rejected is None, (
            f"{entry.spec.label}: createPlugin accepted field '{fspec.name}' = {bad}; it printed: {printed[0]!r}"
        )


@contextlib.contextmanager
def _stderr_into(printed: list[str]):
    """Redirects file descriptor 2 into ``printed`` (one string): where no TensorRT logger is installed, the plugin
    library prints its errors to stderr, and a rejection that a check provokes on purpose is no error of the user's."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            printed.append(sink.read().decode(errors="replace"))


def _check_trt(entry: op_registry.OpEntry, op: Any, args: tuple, kwargs: dict, eager: Any) -> None:
    import torch_tensorrt

    class Module(torch.nn.Module):
        def forward(self, *a):
            return op(*a, **kwargs)

    cuda_args = tuple(_to(a, "cuda") for a in args)
    tensors = [a for a in cuda_args if isinstance(a, torch.Tensor)]
    compiled = torch_tensorrt.compile(Module().eval().cuda(), ir="dynamo", inputs=tensors, min_block_size=1)
    _assert_close(entry.spec, compiled(*cuda_args), eager, "torch_tensorrt.compile")


def _check_python_kernels(declaration: Declaration, args: tuple, kwargs: dict) -> str | None:
    """Each tactic's compiled kernel (the eager CUDA op) against the same kernel launched from Python (Triton's
    launcher, CuPy): the reason it cannot run, or None."""
    from .. import sdk
    from ..kernels.launch import launch_from_python

    for tactic, (kernel, _) in sorted(declaration.aot_kernels.items()):
        missing = _missing("triton" if kernel.kind == "triton" else "cupy")
        if missing:
            return f"{missing}: kernel '{kernel.name}' cannot be launched from Python here"
        ours = sdk.launch(declaration, *args, tactic=tactic, **kwargs)
        outputs = [torch.empty_like(o) for o in _outputs(ours)]
        launch_from_python(declaration, args, outputs, tactic=tactic, kwargs=kwargs)
        _assert_close(declaration.spec, ours, outputs, f"tactic {tactic}: compiled kernel vs {kernel.kind} from Python")
    return None


def _missing(module: str) -> str | None:
    try:
        importlib.import_module(module)
    except Exception as err:  # noqa: BLE001 - any import failure means the tier cannot run
        return f"{module} is not importable ({type(err).__name__})"
    return None


def check_op(
    op: Any,
    sample_inputs: Sequence[Any],
    reference: Callable[..., Any] | None = None,
    *,
    checks: Sequence[str] = CHECKS,
    opcheck_utils: Sequence[str] | None = None,
) -> CheckReport:
    """Run every check on every sample; return what passed and what was skipped (and why). See the module doc."""
    entry = _entry(op)
    overload = _overload(entry)
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown:
        raise ValueError(f"check_op: unknown checks {unknown}; known: {list(CHECKS)}")
    report = CheckReport(entry.spec.qualname)
    gpu = torch.cuda.is_available()
    for index, sample in enumerate(sample_inputs):
        args, kwargs = _split(sample)
        where = f"sample {index}"
        eager = overload(*args, **kwargs)
        cuda_args = tuple(_to(a, "cuda") for a in args) if gpu else None
        if "eager" in checks:
            if reference is not None:
                _assert_close(entry.spec, eager, reference(*args, **kwargs), f"{where}: eager vs reference")
            if gpu:
                _assert_close(
                    entry.spec, overload(*cuda_args, **kwargs), eager, f"{where}: eager CUDA vs eager {args[0].device}"
                )
            else:
                report.skipped["eager CUDA"] = "no CUDA GPU visible to torch"
        declaration = entry.declaration
        if "eager" in checks and getattr(declaration, "aot_kernels", None):
            why = _check_python_kernels(declaration, cuda_args, kwargs) if gpu else "no CUDA GPU visible to torch"
            if why:
                report.skipped["python kernel"] = why
            elif "python kernel" not in report.passed:
                report.passed.append("python kernel")
        if "opcheck" in checks:
            utils = tuple(opcheck_utils) if opcheck_utils is not None else torch.library._OPCHECK_DEFAULT_UTILS
            for sample_args in [args] + ([cuda_args] if gpu else []):
                result = torch.library.opcheck(overload, sample_args, kwargs, test_utils=utils, raise_exception=False)
                failed = {k: v for k, v in result.items() if v != "SUCCESS"}
                assert not failed, f"{entry.spec.label}: {where}: opcheck failed: {failed}"
        if "compile" in checks:
            torch._dynamo.reset()
            with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
                compiled = torch.compile(functools.partial(_call_with, overload, kwargs), fullgraph=True, dynamic=True)
                _assert_close(entry.spec, compiled(*args), eager, f"{where}: torch.compile")
        call = (
            _check_plan(entry, overload, args, kwargs, eager)
            if "plan" in checks
            else planning.plan(entry.spec, args, kwargs)
        )
        if "harness" in checks:
            try:
                _check_harness(entry, call, args, kwargs, eager, report)
            except _build.BuildError as err:
                report.skipped["harness"] = _unbuildable(err)
        if "rtx" in checks:
            missing = _missing("tensorrt_rtx")
            if missing:
                report.skipped["rtx"] = missing
            else:
                try:
                    _check_rtx(entry, call)
                except _build.BuildError as err:
                    report.skipped["rtx"] = _unbuildable(err)
        if "trt" in checks:
            missing = "no CUDA GPU visible to torch" if not gpu else _missing("tensorrt") or _missing("torch_tensorrt")
            if missing:
                report.skipped["trt"] = missing
            else:
                _check_trt(entry, overload, args, kwargs, eager)
    report.passed = [c for c in checks if c not in report.skipped] + report.passed
    return report


__all__ = ["CHECKS", "CheckReport", "check_op"]
