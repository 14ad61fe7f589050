"""Benchmark machinery shared by every ``bench_*.py`` script and by ``torchtrt-plugins bench``.

An op script only declares a :class:`Benchmark`: how to build the inputs of one case, which sizes and
dtypes to run, and its providers (name -> factory returning a zero-argument callable). This module runs them:
repeated runs (every provider of a case timed once per repeat, interleaved in an order rotated each repeat, the
spread taken across repeats), output checks against the reference, the helpers providers share (``torch.compile``
per shape, TensorRT engines, plugin enqueue through the harness) and the command line. Beside it, one concern each:
``timing`` (the ``do_bench``, ``graph`` and ``host`` timers, the copy of the same bytes memory-bound ops are judged
against, statistics), ``environment`` (what a result records of the machine, and what each provider needs to run
here) and ``results`` (the CSV, the list of what did not run and the printed tables). Their names are re-exported
here, so an op script imports this module alone. ``torch.compile`` providers are compiled per shape and must stay
compiled: a recompile or the recompile limit during a run is an error, never a silent fall back to eager.

A provider that cannot run here (no GPU, no triton, no TensorRT, no harness...) becomes a ``skipped``
result with its reason; one that raises becomes an ``error`` result; neither is dropped.
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib
import importlib.util
import inspect
import os
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from torchtrt_plugins.benchmarks.environment import (  # noqa: F401  (re-exported: the op scripts' one import)
    HARNESS_HOOK,
    Environment,
    Requirement,
    RunContext,
    environment,
    harness_hook,
    needs_cuda,
    needs_eager_kernel,
    needs_harness,
    needs_inductor,
    needs_sdk_build,
    needs_tensorrt,
    needs_torchvision,
    source_commit,
    tensorrt_version,
    unmet,
    vision,
)
from torchtrt_plugins.benchmarks.results import (  # noqa: F401
    ADDED_COLUMN_DEFAULTS,
    COLUMNS,
    DEFAULT_CSV,
    LEGACY_COLUMNS,
    NOT_RUN_COLUMNS,
    NOT_RUN_FILE,
    PLACEMENTS_COLUMNS,
    RECORD_CSV,
    REPEATS_COLUMNS,
    Result,
    format_bytes,
    format_not_run,
    format_shape,
    format_table,
    read_results,
    write_results,
)
from torchtrt_plugins.benchmarks.timing import (  # noqa: F401
    DEFAULT_TIMERS,
    GRAPH_CALLS,
    HOST_CALLS,
    L2_FLUSH_BYTES,
    QUANTILES,
    TIMERS,
    NotCapturable,
    Timing,
    _first_line,
    combine_repeats,
    copy_fn,
    copy_timing,
    gbps,
    pct_of_copy,
    percentile,
    summarize,
    time_cpu,
    time_cuda,
    time_cuda_events,
    time_cuda_graph,
    time_fn,
    time_host,
    timer_name,
    triton_reason,
)
from torchtrt_plugins.sdk import PreparedLaunch, plugin_inputs

COPY_PROVIDER = "copy"

DTYPE_NAMES = {
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
    "half": torch.float16,
    "fp32": torch.float32,
    "float32": torch.float32,
    "float": torch.float32,
    "int8": torch.int8,
    "int32": torch.int32,
    "int64": torch.int64,
}


class Skip(Exception):
    """Raised by a provider factory when this case cannot run here; the message says why."""


# ------------------------------------------------------------------------------------------ torch.compile


#: The backend of :func:`compile_inductor` (tests swap in "eager" to skip inductor's code generation).
INDUCTOR_BACKEND = "inductor"


class CompileFallback(RuntimeError):
    """torch.compile did not compile (no graph) or would recompile: the provider would be timing eager code."""


def _has_compiled_code(fn: Callable[..., Any]) -> bool:
    """Whether dynamo holds compiled code for ``fn``'s frame (a module's ``forward``); False when it runs eager.

    A second function or module sharing the code object may reuse the first one's graph: counting new graphs
    would call that a fall back, the cache entries on the code object do not."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    code = getattr(inspect.unwrap(getattr(target, "__func__", target)), "__code__", None)
    return code is None or bool(_debug_get_cache_entry_list(code))


def _dynamo_patch(*names: str) -> dict[str, bool]:
    """The dynamo config flags among ``names`` that this torch has, set to True."""
    config = torch._dynamo.config
    return {name: True for name in names if hasattr(config, name)}


@contextlib.contextmanager
def no_recompile():
    """While timing: a recompile raises (``error_on_recompile``) instead of compiling anew or, past the recompile
    limit, running eager (``fail_on_recompile_limit_hit``)."""
    with torch._dynamo.config.patch(**_dynamo_patch("error_on_recompile", "fail_on_recompile_limit_hit")):
        yield


# ------------------------------------------------------------------------------------------ benchmarks


@dataclass
class Case:
    """One input configuration. ``nbytes`` is what the op must move (None: not memory-bound, no GB/s)."""

    op: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    inputs: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    nbytes: int | None = None


@dataclass(frozen=True)
class Provider:
    """A way to run the op. ``factory(case)`` returns a zero-argument callable (it may raise Skip).

    A provider that times itself (the harness times ``enqueue`` alone) gives ``measure(case) -> Timing``
    instead; its output is checked by the harness tests, not here. ``nbytes(case)``, when given, is what this
    provider must move where it differs from ``case.nbytes`` (the plugin reads a cast input at its own size); its
    GB/s and % of copy use it, against the copy's time scaled to those bytes.
    """

    name: str
    factory: Callable[[Case], Callable[[], Any]] | None = None
    requires: tuple[Requirement, ...] = ()
    check: bool = True
    measure: Callable[[Case], Timing] | None = None
    nbytes: Callable[[Case], int | None] | None = None


def spec_tolerance(spec: Any) -> Callable[[torch.dtype], tuple[float, float]]:
    """A :class:`Benchmark`'s ``tolerance`` from the op's spec: its declared ``(atol, rtol)`` for each dtype."""

    def tolerance(dtype: torch.dtype) -> tuple[float, float]:
        tol = spec.tolerance(dtype)
        return tol.atol, tol.rtol

    return tolerance


@dataclass(frozen=True)
class Plan:
    sizes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...]


@dataclass
class Benchmark:
    """What an op script declares. ``expected(case)`` gives the reference output the providers are checked against."""

    name: str
    make_case: Callable[[tuple[int, ...], torch.dtype, torch.device], Case]
    providers: Sequence[Provider]
    full: Plan
    quick: Plan
    cpu: Plan
    cpu_quick: Plan
    expected: Callable[[Case], Any] | None = None
    tolerance: Callable[[torch.dtype], tuple[float, float]] = lambda dtype: (1e-5, 1e-5)

    def plan(self, device: torch.device, quick: bool) -> Plan:
        if device.type == "cpu":
            return self.cpu_quick if quick else self.cpu
        return self.quick if quick else self.full

    @property
    def provider_names(self) -> list[str]:
        return [p.name for p in self.providers]


def parse_shape(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.split("x"))


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def parse_dtypes(text: str | None) -> tuple[torch.dtype, ...] | None:
    """``"bf16,fp16"`` -> dtypes; None or empty -> None (use each benchmark's plan)."""
    if not text:
        return None
    dtypes = []
    for name in (part.strip().lower() for part in text.split(",") if part.strip()):
        if name not in DTYPE_NAMES:
            raise ValueError(f"unknown dtype {name!r}; use any of {sorted(DTYPE_NAMES)}")
        dtypes.append(DTYPE_NAMES[name])
    return tuple(dict.fromkeys(dtypes))


def resolve_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA GPU visible to torch")
    return device


def select_providers(benchmark: Benchmark, patterns: Sequence[str] | None) -> list[Provider]:
    if not patterns:
        return list(benchmark.providers)
    return [p for p in benchmark.providers if any(fnmatch.fnmatchcase(p.name, pat) for pat in patterns)]


# ------------------------------------------------------------------------------------------ helpers for providers


def compile_inductor(fn: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    """``torch.compile`` with inductor, static shapes, compiled for this case (shape) from a clean dynamo cache
    (``options``: more ``torch.compile`` arguments, e.g. ``fullgraph=True``).

    Dynamo caches per code object, so the same function compiled for many sizes would hit the recompile limit
    and silently fall back to eager; :func:`run` resets dynamo once per case (not here: a reset while another
    provider of the case holds a compiled function would make that one recompile while it is timed), the first
    call runs with the recompile limit as a hard failure, and it must produce at least one graph (else
    :class:`CompileFallback`). Timing runs under :func:`no_recompile`.
    """
    compiled = torch.compile(fn, backend=INDUCTOR_BACKEND, dynamic=False, **options)
    checked = []

    def call(*args: Any, **kwargs: Any) -> Any:
        if checked:
            return compiled(*args, **kwargs)
        with torch._dynamo.config.patch(**_dynamo_patch("fail_on_recompile_limit_hit")):
            out = compiled(*args, **kwargs)
        if not _has_compiled_code(fn):
            raise CompileFallback(f"torch.compile produced no graph for {getattr(fn, '__name__', fn)}: it runs eager")
        checked.append(True)
        return out

    return call


class FunctionModule(torch.nn.Module):
    """Wraps a function so Torch-TensorRT (which compiles modules) can take it."""

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


@contextlib.contextmanager
def our_lowering(enabled: bool):
    """Switch ``torchtrt_plugins.lowering`` on or off for a while.

    Torch-TensorRT runs our lowering pass once it is registered with it; a provider that measures
    TensorRT's own handling of a composite turns it off while the engine is built.
    """
    try:
        lowering = importlib.import_module("torchtrt_plugins.lowering")
    except ImportError:
        yield
        return
    lowering.set_enabled(enabled)
    try:
        yield
    finally:
        lowering.set_enabled(None)


def compile_tensorrt(module: torch.nn.Module, inputs: Sequence[torch.Tensor], lowering: bool = True) -> Callable:
    """An engine from ``torch_tensorrt.compile`` (dynamo IR), the input dtypes respected as given."""
    import torch_tensorrt

    module = module.eval()
    options = dict(ir="dynamo", inputs=list(inputs), min_block_size=1)
    with our_lowering(lowering):
        try:
            return torch_tensorrt.compile(module, use_explicit_typing=True, **options)
        except TypeError:  # releases before explicit typing: name the precision instead
            return torch_tensorrt.compile(module, enabled_precisions={inputs[0].dtype}, **options)


def tensorrt_engine(fn: Callable[..., Any], lowering: bool) -> Callable[[Case], Callable[[], Any]]:
    """A provider factory: ``fn`` over all of a case's inputs, compiled into a TensorRT engine per case."""

    def factory(case: Case):
        inputs = list(case.inputs)
        engine = compile_tensorrt(FunctionModule(fn), inputs, lowering)
        return lambda: engine(*inputs)

    return factory


def plugin_fields(spec: Any, case: Case) -> dict[str, Any]:
    """The plugin's fields for a case, by field name, from the op arguments in ``case.kwargs``."""
    return {f.name: case.kwargs.get(f.arg or f.name, f.default) for f in spec.fields}


def plugin_nbytes(entry: Any) -> Callable[[Case], int | None]:
    """Bytes the plugin moves: the case's, with each input the plugin takes cast (:func:`plugin_inputs`) counted at
    the plugin's element size (a bool mask read as int32 is 4 bytes a row, not 1)."""

    def nbytes(case: Case) -> int | None:
        if case.nbytes is None:
            return None
        tensors = [t for t in case.inputs if isinstance(t, torch.Tensor)]
        specs = list(entry.spec.inputs)
        extra = 0
        for spec, tensor in zip(specs, tensors, strict=False):
            dtype = getattr(spec, "plugin_dtype", None)
            if dtype is not None and dtype != tensor.dtype:
                extra += tensor.numel() * (torch.empty((), dtype=dtype).element_size() - tensor.element_size())
        return case.nbytes + extra

    return nbytes


def plugin_enqueue_providers(
    entry: Any, name: str = "plugin_enqueue", requires: tuple[Requirement, ...] = (), tactics: Sequence[int] = ()
) -> list[Provider]:
    """The op's TensorRT plugin run through the conformance harness, timing ``enqueue`` only.

    One provider for the plugin's own tactic choice and one per tactic in the spec. Inputs with a
    ``plugin_dtype`` are cast before the timing starts (see :func:`plugin_inputs`). An op declared with
    ``torchtrt_plugins.declare`` runs from its own plugin library (``entry.library``). ``entry`` may also be a
    function returning it, called only when the benchmark runs: then the plugin's own tactic choice is timed, and
    each of ``tactics`` (``<name>[tactic <value>]``).
    """
    resolve = (lambda: entry) if hasattr(entry, "spec") else entry

    def measure_for(tactic: int) -> Callable[[Case], Timing]:
        def measure(case: Case) -> Timing:
            from torchtrt_plugins import converters

            hook = harness_hook()
            if hook is None:
                raise Skip(needs_harness(RunContext(case.device)))
            op = resolve()
            tensors = plugin_inputs(op.spec, [t for t in case.inputs if isinstance(t, torch.Tensor)])
            iters = 20 if case.device.type == "cuda" and case.nbytes and case.nbytes > 2**28 else 100
            library = getattr(op, "library", None)
            if library is None:
                samples = hook(op.spec.name, tensors, tactic=tactic, iters=iters, fields=plugin_fields(op.spec, case))
            else:  # a declared op's plugin also takes the shape program the converter derives: the converter's call
                call = converters.plan(op.spec, case.inputs, case.kwargs)
                samples = hook(call, tensors, tactic=tactic, iters=iters, library=library.plugin_path())
            return summarize(samples)

        return measure

    requires = (needs_cuda, needs_harness, *requires)
    nbytes = plugin_nbytes(entry) if hasattr(entry, "spec") else None
    providers = [Provider(name, requires=requires, measure=measure_for(0), nbytes=nbytes)]
    if hasattr(entry, "spec"):
        providers += [
            Provider(f"{name}[{t.name}]", requires=requires, measure=measure_for(t.value), nbytes=nbytes)
            for t in entry.spec.tactics
        ]
    else:
        providers += [
            Provider(f"{name}[tactic {t}]", requires=requires, measure=measure_for(t), nbytes=nbytes) for t in tactics
        ]
    return providers


def torchvision_providers(op: str, tactics: Sequence[int] = ()) -> list[Provider]:
    """A torchvision op we declare (``torchtrt_plugins.vision``; ``op`` is ``nms``, ``roi_align`` or
    ``deform_conv2d``) against torchvision's own: ``torchvision`` (its eager op; the peer, so its output is not
    checked: its half kernels compute in half), ``torchtrt`` (our launcher as the plugin's ``enqueue`` calls it, on
    buffers made once: an :class:`sdk.PreparedLaunch`) and ``plugin_enqueue`` (the plugin, through the harness), each
    also as ``<provider>[tactic <value>]`` for each of the declaration's ``tactics`` (named here by value: the
    declaration is imported only when a benchmark runs; a value it does not declare fails the run). A case's inputs are
    the op's tensors, its kwargs the op's scalars by name."""

    def declaration() -> Any:
        return getattr(vision(), op.upper())

    def peer(case: Case) -> Callable[[], Any]:
        function = getattr(torch.ops.torchvision, op)
        return lambda: function(*case.inputs, **case.kwargs)

    def ours(tactic: int) -> Callable[[Case], Callable[[], Any]]:
        return lambda case: PreparedLaunch(declaration(), *case.inputs, tactic=tactic, **case.kwargs)

    return [
        Provider("torchvision", peer, (needs_torchvision,), check=False),
        Provider("torchtrt", ours(0), (needs_cuda, needs_sdk_build)),
        *(Provider(f"torchtrt[tactic {t}]", ours(t), (needs_cuda, needs_sdk_build)) for t in tactics),
        *plugin_enqueue_providers(declaration, requires=(needs_sdk_build,), tactics=tactics),
    ]


_notes: dict[str, None] = {}


def note(text: str) -> None:
    """Something the reader of the report should know (printed once, after the table)."""
    _notes[text] = None


def notes() -> list[str]:
    return list(_notes)


# ------------------------------------------------------------------------------------------ running


class Progress:
    """tqdm when installed, else a one-line counter on stderr."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.done, self.enabled = total, 0, enabled
        self._bar = None
        self._last_decile = -1
        if enabled and importlib.util.find_spec("tqdm") is not None:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="run", file=sys.stderr, dynamic_ncols=True)

    def update(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_description_str(label[:60])
            self._bar.update(1)
            return
        if sys.stderr.isatty():
            sys.stderr.write(f"\r[{self.done:>4}/{self.total}] {label[:70]:<70}")
            if self.done == self.total:
                sys.stderr.write("\n")
        else:
            decile = self.done * 10 // max(self.total, 1)
            if decile != self._last_decile:
                self._last_decile = decile
                sys.stderr.write(f"[{self.done:>4}/{self.total}] {label}\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def count_runs(
    benchmark: Benchmark,
    ctx: RunContext,
    dtypes: Sequence[torch.dtype] | None,
    providers,
    sizes: Sequence[tuple[int, ...]] | None = None,
) -> int:
    plan = benchmark.plan(ctx.device, ctx.quick)
    per_case = len(select_providers(benchmark, providers)) + 1  # + the copy
    shapes = [s for s in sizes if len(s) == len(plan.sizes[0])] if sizes else plan.sizes
    return len(shapes) * len(dtypes or plan.dtypes) * per_case


def _compare(benchmark: Benchmark, expected: Any, out: Any, dtype: torch.dtype) -> str | None:
    if expected is None or not isinstance(out, torch.Tensor) or not isinstance(expected, torch.Tensor):
        return None
    atol, rtol = benchmark.tolerance(dtype)
    try:
        torch.testing.assert_close(out.float(), expected.float(), atol=atol, rtol=rtol)
    except AssertionError as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        return "output differs from the reference: " + " ".join(lines[:3])
    return None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def run(
    benchmark: Benchmark,
    ctx: RunContext,
    dtypes: Sequence[torch.dtype] | None = None,
    providers: Sequence[str] | None = None,
    progress: Progress | None = None,
    sizes: Sequence[tuple[int, ...]] | None = None,
) -> list[Result]:
    """Run every (size, dtype, provider) of a benchmark; one Result each, plus the copy per case.

    ``sizes`` replaces the plan's sizes (shapes in the benchmark's own form, e.g. ``(rows, hidden)``).
    """
    plan = benchmark.plan(ctx.device, ctx.quick)
    chosen = select_providers(benchmark, providers)
    static = {p.name: unmet(p.requires, ctx) for p in chosen}
    results: list[Result] = []
    for shape in sizes or plan.sizes:
        for dtype in dtypes or plan.dtypes:
            results += _run_case(benchmark, ctx, shape, dtype, chosen, static, progress)
            if ctx.device.type == "cuda":
                torch.cuda.empty_cache()
    return results


def _measure_provider(provider: Provider, case: Case, timer: str) -> Callable[[], Timing]:
    """A provider that times itself (through the harness): ``measure`` does it; the graph timer cannot."""

    def measure() -> Timing:
        if timer == "graph":
            raise Skip("the harness times each enqueue with CUDA events; the graph timer does not apply")
        return provider.measure(case)

    return measure


def _run_case(
    benchmark: Benchmark,
    ctx: RunContext,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    chosen: Sequence[Provider],
    static: dict[str, str | None],
    progress: Progress | None,
) -> list[Result]:
    """Prepare every provider (build, first call, output check), then time them: once per repeat and timer, the
    providers interleaved (copy first), so that a drift of the machine spreads over all of them alike. With
    ``ctx.placements`` > 1 all of it again on each placement: the case's inputs and every provider's own buffers
    allocated anew with a free block of a random size (1-64 MB) before each, so that where the buffers lie in memory
    (which moved one kernel's time by up to 2% on the H200, as much as the gaps between providers) spreads over all
    of them alike; each provider's result is over the repeats of every placement."""
    label = f"{benchmark.name} {dtype_name(dtype)} {format_shape(shape)}"
    results: list[Result] = []

    def result(provider: str, status: str, reason: str, timer: str, **kw: Any) -> Result:
        where = (benchmark.name, provider, format_shape(shape), dtype_name(dtype), ctx.device.type)
        return Result(*where, status, reason, timer=timer, repeats=ctx.repeats, placements=ctx.placements, **kw)

    def record(provider: str, status: str, reason: str = "") -> None:
        results.extend(result(provider, status, reason, timer) for timer in ctx.timers)
        if progress is not None:
            progress.update(f"{label} {provider}")

    spacers: list[torch.Tensor] = []  # alive until the case is done, so that each placement differs
    rng = random.Random(f"{label} placements")

    def spacer() -> None:
        if ctx.placements > 1 and ctx.device.type == "cuda":
            spacers.append(torch.empty(rng.randint(1, 64) << 20, dtype=torch.uint8, device=ctx.device))

    # timer -> provider -> its timings so far, and (status, reason) for a provider that failed on some placement
    samples: dict[str, dict[str, list[Timing]]] = {timer: {} for timer in ctx.timers}
    failed: dict[str, dict[str, tuple[str, str]]] = {timer: {} for timer in ctx.timers}
    mismatches: dict[str, str] = {}
    own_nbytes: dict[str, int | None] = {}
    case = None
    for placement in range(ctx.placements):
        spacer()
        try:
            case = benchmark.make_case(shape, dtype, ctx.device)
            # Only where a provider runs: the reference may need what the skipped ones lack (e.g. torchvision).
            runs = any(not static[p.name] for p in chosen)
            expected = benchmark.expected(case) if benchmark.expected and runs else None
        except Exception as err:  # noqa: BLE001 - e.g. out of memory: every provider of the case errors
            results.clear()
            where = f" (placement {placement})" if placement else ""
            for name in [COPY_PROVIDER, *(p.name for p in chosen)]:
                record(name, "error", f"could not build the inputs{where}: {_first_line(err)}")
            return results
        # torch.compile per shape: a clean dynamo cache for this case, before any provider compiles.
        torch._dynamo.reset()
        first = placement == 0
        if first and not case.nbytes and progress is not None:
            progress.update(f"{label} (not memory-bound: no copy)")
        # What is skipped or fails is recorded on the first placement; on a later one it is left out.
        prepared = _prepare(benchmark, ctx, case, expected, chosen, static, record if first else _ignore, spacer)
        if first:
            ran = list(prepared)
        else:
            for name in [n for n in ran if n not in prepared]:
                for timer in ctx.timers:
                    failed[timer].setdefault(name, ("error", f"placement {placement}: could not be prepared"))
        for name, (_make, mismatch, nbytes) in prepared.items():
            if mismatch:
                mismatches.setdefault(name, mismatch)
            own_nbytes.setdefault(name, nbytes)
        for timer in ctx.timers:
            _time_rounds(ctx, prepared, timer, samples[timer], failed[timer])
    for timer in ctx.timers:
        results += _timed_results(case, samples[timer], failed[timer], mismatches, timer, result, own_nbytes)
    if progress is not None:
        for name in ran:
            progress.update(f"{label} {name}")
    # Providers in their declared order, the copy first, whatever order they finished in; timers in the given order.
    order = {name: i for i, name in enumerate([COPY_PROVIDER, *(p.name for p in chosen)])}
    results.sort(key=lambda r: (ctx.timers.index(r.timer), order.get(r.provider, len(order))))
    return results


# provider -> (timer -> a zero-argument timing, the mismatch found by the output check or "", its own bytes or None)
Prepared = dict[str, tuple[Callable[[str], Callable[[], Timing]], str, int | None]]


def _ignore(*_args: Any) -> None:
    pass


def _prepare(
    benchmark: Benchmark,
    ctx: RunContext,
    case: Case,
    expected: Any,
    chosen: Sequence[Provider],
    static: dict[str, str | None],
    record: Callable[..., None],
    spacer: Callable[[], None],
) -> Prepared:
    """The copy and every provider that runs, built and called once on `case` (`spacer()` before each); what is
    skipped or fails goes to `record(provider, status, reason)`."""
    prepared: Prepared = {}
    if case.nbytes:
        try:
            copy = copy_fn(case.nbytes, ctx.device)
            prepared[COPY_PROVIDER] = (lambda timer: lambda: time_fn(copy, ctx.device, ctx.quick, timer), "", None)
        except Exception as err:  # noqa: BLE001
            record(COPY_PROVIDER, "error", _first_line(err))
    for provider in chosen:
        if static[provider.name]:
            record(provider.name, "skipped", static[provider.name])
            continue
        try:
            spacer()
            nbytes = provider.nbytes(case) if provider.nbytes is not None else None
            if provider.measure is not None:
                prepared[provider.name] = (lambda timer, p=provider: _measure_provider(p, case, timer), "", nbytes)
                continue
            fn = provider.factory(case)
            out = fn()
            _sync(ctx.device)
            mismatch = _compare(benchmark, expected, out, dtype=case.dtype) if provider.check else None
            del out
            prepared[provider.name] = (
                lambda timer, fn=fn: lambda: time_fn(fn, ctx.device, ctx.quick, timer),
                mismatch or "",
                nbytes,
            )
        except Skip as err:
            record(provider.name, "skipped", str(err))
        except Exception as err:  # noqa: BLE001 - reported, the run goes on
            record(provider.name, "error", _first_line(err))
    return prepared


def _time_rounds(
    ctx: RunContext,
    prepared: Prepared,
    timer: str,
    samples: dict[str, list[Timing]],
    failed: dict[str, tuple[str, str]],
) -> None:
    """Every prepared provider not yet in ``failed`` timed with ``timer``, ``ctx.repeats`` times, interleaved, the
    order rotated by one each repeat (on the H100 a provider's time at 64-128 MB was seen to shift by up to 7% between
    rounds, with the state of the device, so no provider always runs in the same place), each timing appended to
    ``samples[provider]``; a provider that fails goes to ``failed`` as (status, reason)."""
    timings = {name: make(timer) for name, (make, _mismatch, _nbytes) in prepared.items()}
    with no_recompile():
        names = list(timings)
        for repeat in range(ctx.repeats):
            shift = repeat % len(names) if names else 0
            for name in names[shift:] + names[:shift]:
                if name in failed:
                    continue
                try:
                    samples.setdefault(name, []).append(timings[name]())
                except (Skip, NotCapturable) as err:
                    failed[name] = ("skipped", str(err))
                except Exception as err:  # noqa: BLE001 - e.g. a recompile during timing: reported
                    failed[name] = ("error", _first_line(err))


def _timed_results(
    case: Case,
    samples: dict[str, list[Timing]],
    failed: dict[str, tuple[str, str]],
    mismatches: dict[str, str],
    timer: str,
    result: Callable[..., Result],
    own_nbytes: dict[str, int | None],
) -> list[Result]:
    """One Result a provider, made by ``result(provider, status, reason, timer, **timing_fields)``; ``own_nbytes``:
    providers that move other bytes than the case's (their copy time scaled to them)."""
    copy_ms = None
    if samples.get(COPY_PROVIDER) and COPY_PROVIDER not in failed:
        copy_ms = combine_repeats(samples[COPY_PROVIDER]).median_ms
    results = []
    for name in dict.fromkeys([*samples, *failed]):
        if name in failed:
            results.append(result(name, *failed[name], timer))
            continue
        timing = combine_repeats(samples[name])
        mismatch = mismatches.get(name, "")
        status = "mismatch" if mismatch else "ok"
        nbytes, copy = case.nbytes, copy_ms
        if own_nbytes.get(name) and case.nbytes:
            nbytes = own_nbytes[name]
            copy = copy_ms * nbytes / case.nbytes if copy_ms is not None else None
        results.append(result(name, status, mismatch, timer, timing=timing, nbytes=nbytes, copy_ms=copy))
    return results


@dataclass
class Report:
    env: Environment
    results: list[Result]
    csv_path: Path
    record_path: Path | None = None

    @property
    def errors(self) -> list[Result]:
        return [r for r in self.results if r.status in ("error", "mismatch")]

    def text(self) -> str:
        parts = [self.env.describe(), "", format_table(self.results)]
        not_run = format_not_run(self.results)
        if not_run:
            parts += [not_run, ""]
        if notes():
            parts += ["Notes:", *(f"  {n}" for n in notes()), ""]
        parts.append(f"results: {self.csv_path}  (not run: {self.csv_path.with_name(NOT_RUN_FILE)})")
        if self.record_path is not None:
            parts.append(f"recorded in: {self.record_path}")
        return "\n".join(parts)


def run_suite(
    benchmarks: Sequence[Benchmark],
    *,
    device: str = "auto",
    quick: bool = False,
    dtypes: Sequence[torch.dtype] | None = None,
    providers: Sequence[str] | None = None,
    csv_path: os.PathLike | None = None,
    show_progress: bool = True,
    timers: Sequence[str] = ("do_bench",),
    repeats: int = 1,
    sizes: Sequence[tuple[int, ...]] | None = None,
    placements: int = 1,
    record_path: os.PathLike | None = None,
) -> Report:
    """Run benchmarks side by side in one process, append the CSV (and the record at ``record_path``, if given),
    return the report."""
    ctx = RunContext(resolve_device(device), quick, tuple(timers), repeats, placements)
    if providers:
        known = {name for b in benchmarks for name in b.provider_names}
        unknown = [pat for pat in providers if not any(fnmatch.fnmatchcase(n, pat) for n in known)]
        if unknown:
            raise ValueError(f"--providers {unknown} match no provider; known: {sorted(known)}")
    env = environment(ctx.device)
    progress = Progress(sum(count_runs(b, ctx, dtypes, providers, sizes) for b in benchmarks), enabled=show_progress)
    results: list[Result] = []
    try:
        for benchmark in benchmarks:
            wanted = [shape for shape in sizes or () if len(shape) == len(benchmark.plan(ctx.device, quick).sizes[0])]
            if sizes and not wanted:
                continue
            results += run(benchmark, ctx, dtypes, providers, progress, wanted or None)
    finally:
        progress.close()
    path = write_results(results, env, csv_path, record_path)
    return Report(env, results, path, Path(record_path) if record_path else None)


def parse_timers(text: str | None) -> tuple[str, ...]:
    """``"do_bench,graph"`` -> the timers, in order; None or empty -> DEFAULT_TIMERS (GPU time and host time)."""
    timers = tuple(dict.fromkeys(t.strip() for t in (text or ",".join(DEFAULT_TIMERS)).split(",") if t.strip()))
    unknown = [t for t in timers if t not in TIMERS]
    if unknown or not timers:
        raise ValueError(f"--timer: unknown {unknown or text!r}; use any of {list(TIMERS)}, comma-separated")
    return timers


def parse_sizes(text: str | None) -> tuple[tuple[int, ...], ...] | None:
    """``"1x4096,8x4096"`` -> shapes; None or empty -> None (each benchmark's plan)."""
    if not text:
        return None
    try:
        return tuple(parse_shape(part.strip()) for part in text.split(",") if part.strip())
    except ValueError as err:
        raise ValueError(f"--sizes: {text!r} is not a comma-separated list of shapes like 1x4096 ({err})") from err


def add_timing_arguments(parser: Any) -> None:
    """--timer, --repeats and --sizes, shared by the scripts and ``torchtrt-plugins bench``."""
    parser.add_argument(
        "--timer",
        default=",".join(DEFAULT_TIMERS),
        help="comma-separated, one row each: do_bench (GPU time per call, L2 flushed before each; it hides host "
        f"time), graph (GPU time per call of {GRAPH_CALLS} calls replayed in one CUDA graph), host (host wall "
        f"time per call, up to {HOST_CALLS} calls with no synchronization inside, fewer where they would pass 50 ms). "
        f"Default: {','.join(DEFAULT_TIMERS)}",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="time every provider this many times, interleaved; report the spread"
    )
    parser.add_argument(
        "--placements",
        type=int,
        default=1,
        help="build each case this many times, its inputs and each provider's buffers placed anew in memory (behind "
        "a free block of a random size), and time every provider --repeats times on each; results over all of them",
    )
    parser.add_argument(
        "--sizes",
        help="comma-separated shapes replacing the plans' sizes, e.g. 1x4096,8x4096 (benchmarks whose "
        "shapes have that many dimensions)",
    )


def add_record_argument(parser: Any) -> None:
    """--record, shared by the scripts and ``torchtrt-plugins bench``."""
    parser.add_argument(
        "--record",
        metavar="PATH",
        help=f"also append the timed rows to this CSV, the record kept across runs (e.g. {RECORD_CSV} of a source "
        "checkout; default: none)",
    )


def script_main(benchmark: Benchmark, argv: Sequence[str] | None = None) -> int:
    """``python -m torchtrt_plugins.benchmarks.bench_<op> [--quick] [--dtypes bf16,fp32] [--csv PATH]``."""
    import argparse

    parser = argparse.ArgumentParser(description=f"Benchmark {benchmark.name}: providers side by side.")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and dtypes")
    parser.add_argument("--dtypes", help="comma-separated, e.g. bf16,fp16,fp32 (default: the plan's)")
    parser.add_argument("--providers", help=f"comma-separated glob patterns among {benchmark.provider_names}")
    parser.add_argument("--device", default="auto", help="auto (default), cuda or cpu")
    parser.add_argument("--csv", default=str(DEFAULT_CSV), help=f"results CSV to append to (default {DEFAULT_CSV})")
    add_record_argument(parser)
    add_timing_arguments(parser)
    args = parser.parse_args(argv)
    try:
        report = run_suite(
            [benchmark],
            device=args.device,
            quick=args.quick,
            dtypes=parse_dtypes(args.dtypes),
            providers=[p for p in (args.providers or "").split(",") if p] or None,
            csv_path=args.csv,
            timers=parse_timers(args.timer),
            repeats=args.repeats,
            sizes=parse_sizes(args.sizes),
            placements=args.placements,
            record_path=args.record,
        )
    except ValueError as err:
        parser.error(str(err))
    print(report.text())
    return 0
