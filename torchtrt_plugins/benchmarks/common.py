"""Benchmark machinery shared by every ``bench_*.py`` script and by ``torchtrt-plugins bench``.

An op script only declares a :class:`Benchmark`: how to build the inputs of one case, which sizes and
dtypes to run, and its providers (name -> factory returning a zero-argument callable). Everything
else lives here, once: timing (``triton.testing.do_bench`` when triton imports, else CUDA events; a
wall clock on CPU; or, with ``timer="graph"``, the time per call of ``GRAPH_CALLS`` calls captured in one
CUDA graph and replayed: GPU time without host overhead, what an engine pays), repeated runs (every
provider of a case timed once per repeat, interleaved in an order rotated each repeat, the spread taken across
repeats), the device-to-device copy of the same byte count that memory-bound ops are judged against, output checks
against the reference, CSV rows with the environment, the printed table and the list of what could
not run and why. ``torch.compile`` providers are compiled per shape and must stay compiled: a
recompile or the recompile limit during a run is an error, never a silent fall back to eager.

A provider that cannot run here (no GPU, no triton, no TensorRT, no harness...) becomes a ``skipped``
result with its reason; one that raises becomes an ``error`` result; neither is dropped.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import fnmatch
import importlib
import importlib.util
import inspect
import math
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from torchtrt_plugins import _compat
from torchtrt_plugins.sdk import PreparedLaunch, plugin_inputs

#: Columns of the results CSV, in order.
COLUMNS = (
    "op",
    "provider",
    "shape",
    "dtype",
    "median_ms",
    "p20_ms",
    "p80_ms",
    "gbps",
    "pct_of_copy",
    "gpu",
    "torch",
    "cuda",
    "tensorrt",
    "timestamp",
    "timer",
    "repeats",
)
#: Results CSVs written before the timer and repeats columns: read as do_bench, one repeat.
LEGACY_COLUMNS = COLUMNS[:-2]
#: Columns of the file listing what did not run (next to the results CSV).
NOT_RUN_COLUMNS = ("op", "provider", "shape", "dtype", "device", "status", "reason", "timestamp")
NOT_RUN_FILE = "skipped.csv"
DEFAULT_CSV = Path("bench_results") / "results.csv"
QUANTILES = (0.5, 0.2, 0.8)
COPY_PROVIDER = "copy"
#: triton's do_bench flushes a 256 MB buffer before each rep so L2 never holds the inputs; so do we.
L2_FLUSH_BYTES = 256 * 1024 * 1024
#: Timers: "do_bench" (GPU time per call, L2 flushed before each call: the flush kernel hides the host's launch
#: time, so this is not host-inclusive), "graph" (GPU time per call of calls replayed from one CUDA graph) and "host"
#: (host wall time per call, no synchronization inside the loop: what an eager caller pays on the CPU).
TIMERS = ("do_bench", "graph", "host")
#: The timers of a run that names none: GPU time and host time, side by side.
DEFAULT_TIMERS = ("do_bench", "host")
#: Calls per host-timer sample: few enough that the GPU's launch queue never fills (the host would then wait for
#: the GPU and time the GPU's work instead).
HOST_CALLS = 200
#: Calls captured in one CUDA graph by the graph timer; the time reported is the replay's over this.
GRAPH_CALLS = 20

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


# ------------------------------------------------------------------------------------------ statistics


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) with linear interpolation between order statistics (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float


def summarize(samples_ms: Sequence[float]) -> Timing:
    median, p20, p80 = (percentile(samples_ms, q) for q in QUANTILES)
    return Timing(median, p20, p80)


def gbps(nbytes: int | None, ms: float | None) -> float | None:
    """Bytes moved per second, in GB/s (1e9 bytes)."""
    if nbytes is None or ms is None or ms <= 0:
        return None
    return nbytes / (ms * 1e-3) / 1e9


def pct_of_copy(op_ms: float | None, copy_ms: float | None) -> float | None:
    """Achieved bandwidth as % of a device-to-device copy moving the same number of bytes."""
    if op_ms is None or copy_ms is None or op_ms <= 0:
        return None
    return 100.0 * copy_ms / op_ms


# ------------------------------------------------------------------------------------------ timing


def triton_reason() -> str | None:
    """None when ``triton`` imports, else why not (inductor needs it for GPU kernels; do_bench lives there)."""
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed (pip install triton)"
    return None


def timer_name(device: torch.device) -> str:
    if device.type == "cpu":
        return "wall clock (time.perf_counter)"
    return "triton.testing.do_bench" if triton_reason() is None else "CUDA events"


def _rep_counts(estimate_ms: float, warmup_ms: float, rep_ms: float) -> tuple[int, int]:
    estimate_ms = max(estimate_ms, 1e-6)
    return max(1, int(warmup_ms / estimate_ms)), min(1000, max(5, int(rep_ms / estimate_ms)))


def time_cuda_events(fn: Callable[[], Any], warmup_ms: float = 25, rep_ms: float = 100) -> Timing:
    """Per-call CUDA event timing after warm-up, with L2 flushed before each call (as do_bench does)."""
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    warmup, reps = _rep_counts(start.elapsed_time(end) / 5, warmup_ms, rep_ms)
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for begin, finish in zip(starts, ends, strict=True):
        flush.zero_()
        begin.record()
        fn()
        finish.record()
    torch.cuda.synchronize()
    return summarize([begin.elapsed_time(finish) for begin, finish in zip(starts, ends, strict=True)])


def time_cuda(fn: Callable[[], Any], warmup_ms: float = 25, rep_ms: float = 100) -> Timing:
    if triton_reason() is None:
        from triton.testing import do_bench

        median, p20, p80 = do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=list(QUANTILES))
        return Timing(float(median), float(p20), float(p80))
    return time_cuda_events(fn, warmup_ms, rep_ms)


class NotCapturable(Exception):
    """The provider cannot be captured in a CUDA graph (it synchronizes with the host, say)."""


def time_cuda_graph(
    fn: Callable[[], Any], calls: int = GRAPH_CALLS, warmup_ms: float = 25, rep_ms: float = 100
) -> Timing:
    """Time per call of ``calls`` calls captured in one CUDA graph, over replays (L2 flushed before each)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # torch.cuda.graph wants the warm-up on a side stream
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
    except Exception as err:  # noqa: BLE001 - e.g. a host synchronization inside fn
        torch.cuda.synchronize()
        raise NotCapturable(f"not capturable in a CUDA graph: {_first_line(err)}") from err
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    warmup, reps = _rep_counts(start.elapsed_time(end), warmup_ms, rep_ms)
    for _ in range(min(warmup, 10)):
        graph.replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for begin, finish in zip(starts, ends, strict=True):
        flush.zero_()
        begin.record()
        graph.replay()
        finish.record()
    torch.cuda.synchronize()
    samples = [begin.elapsed_time(finish) / calls for begin, finish in zip(starts, ends, strict=True)]
    del graph
    return summarize(samples)


def time_cpu(fn: Callable[[], Any], warmup_ms: float = 10, rep_ms: float = 50) -> Timing:
    fn()
    begin = time.perf_counter()
    fn()
    warmup, reps = _rep_counts((time.perf_counter() - begin) * 1e3, warmup_ms, rep_ms)
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        begin = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - begin) * 1e3)
    return summarize(samples)


def time_host(fn: Callable[[], Any], device: torch.device, samples: int = 15, calls: int = HOST_CALLS) -> Timing:
    """Host wall time per call: ``calls`` calls back to back with no synchronization inside, the device drained
    before each sample and after it (outside the timed span); median and p20/p80 over ``samples``."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(20):
        fn()
    sync()
    out = []
    for _ in range(samples):
        sync()
        begin = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - begin) * 1e3 / calls)
        sync()
    return summarize(out)


def time_fn(fn: Callable[[], Any], device: torch.device, quick: bool = False, timer: str = "do_bench") -> Timing:
    if timer == "host":
        return time_host(fn, device, samples=7 if quick else 15)
    if device.type == "cuda":
        rep_ms = 50 if quick else 100
        return time_cuda_graph(fn, rep_ms=rep_ms) if timer == "graph" else time_cuda(fn, rep_ms=rep_ms)
    if timer == "graph":
        raise NotCapturable("the graph timer needs a CUDA GPU (this run is on CPU)")
    return time_cpu(fn, rep_ms=25 if quick else 50)


def copy_fn(nbytes: int, device: torch.device) -> Callable[[], Any]:
    """A device-to-device copy that moves ``nbytes`` in all (reads nbytes/2, writes nbytes/2)."""
    half = max(1, nbytes // 2)
    src = torch.empty(half, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def copy_timing(nbytes: int, device: torch.device, quick: bool = False, timer: str = "do_bench") -> Timing:
    """Time of a device-to-device copy that moves ``nbytes`` in all (reads nbytes/2, writes nbytes/2)."""
    return time_fn(copy_fn(nbytes, device), device, quick, timer)


def combine_repeats(timings: Sequence[Timing]) -> Timing:
    """One run: its own median and p20/p80. Several: the median of the runs' medians, and p20/p80 across them
    (the spread between repeated runs, which is what a difference between providers must exceed)."""
    if not timings:
        raise ValueError("combine_repeats of no timings")
    if len(timings) == 1:
        return timings[0]
    return summarize([t.median_ms for t in timings])


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


# ------------------------------------------------------------------------------------------ environment


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def tensorrt_version() -> str:
    trt = _compat.tensorrt()
    if trt is None:
        return "none"
    version = getattr(trt, "__version__", "?")
    return version if trt.__name__ == "tensorrt" else f"{trt.__name__} {version}"


@dataclass(frozen=True)
class Environment:
    device: str
    gpu: str
    torch: str
    cuda: str
    tensorrt: str
    timestamp: str

    def describe(self) -> str:
        return (
            f"device={self.device}  gpu={self.gpu}  torch={self.torch}  cuda={self.cuda}  "
            f"tensorrt={self.tensorrt}  timer={timer_name(torch.device(self.device))}"
        )


def environment(device: torch.device) -> Environment:
    """What a row was measured on. On CPU the ``gpu`` column says ``cpu: <model>`` so rows are never mistaken."""
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu: {_cpu_name()}"
    return Environment(
        device=device.type,
        gpu=gpu,
        torch=torch.__version__,
        cuda=torch.version.cuda or "none",
        tensorrt=tensorrt_version(),
        timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )


# ------------------------------------------------------------------------------------------ requirements


@dataclass(frozen=True)
class RunContext:
    device: torch.device
    quick: bool = False
    #: Each provider is timed with every one of these, side by side (one result row each).
    timers: tuple[str, ...] = ("do_bench",)
    repeats: int = 1

    def __post_init__(self) -> None:
        unknown = [t for t in self.timers if t not in TIMERS]
        if unknown or not self.timers:
            raise ValueError(f"unknown timer(s) {unknown or list(self.timers)}; use any of {list(TIMERS)}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")


Requirement = Callable[[RunContext], str | None]


def needs_cuda(ctx: RunContext) -> str | None:
    return None if ctx.device.type == "cuda" else "needs a CUDA GPU (this run is on CPU)"


def needs_eager_kernel(entry: Any) -> Requirement:
    """The op's eager CUDA kernel on this device: its launcher library (prebuilt in a wheel, else built here); on CPU
    the reference kernel runs."""

    def check(ctx: RunContext) -> str | None:
        if ctx.device.type != "cuda":
            return None
        declaration = entry.declaration
        if declaration.library is None:
            return f"{entry.spec.qualname} is declared without a launcher library: it has no eager CUDA kernel"
        try:
            declaration.library.launchers()
        except Exception as err:  # noqa: BLE001 - whatever keeps the library from loading is the reason
            return f"{entry.spec.qualname}: its launcher library is not available ({_first_line(err)})"
        return None

    return check


def needs_inductor(ctx: RunContext) -> str | None:
    if ctx.device.type == "cuda":
        reason = triton_reason()
        return f"torch.compile (inductor) on GPU: {reason}" if reason else None
    if ctx.quick:
        return "not run on CPU with --quick (inductor's C++ compile takes ~1 min cold); run without --quick"
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        return "torch.compile (inductor) on CPU needs a C++ compiler (c++ not found)"
    return None


def needs_tensorrt(ctx: RunContext) -> str | None:
    missing = []
    if importlib.util.find_spec("tensorrt") is None:
        missing.append("tensorrt")
    if _compat.torch_tensorrt() is None:
        missing.append("torch_tensorrt")
    if missing:
        return f"{' and '.join(missing)} not installed (pip install -e '.[trt]' on a machine with TensorRT)"
    return None


def needs_sdk_build(ctx: RunContext) -> str | None:
    """An op declared with ``torchtrt_plugins.declare`` runs from a library the SDK builds here (nvcc, headers)."""
    from torchtrt_plugins import _build

    missing = _build.sdk_build_prerequisites()
    return f"cannot build declared-op libraries here: {'; '.join(missing)}" if missing else None


def vision() -> Any:
    """``torchtrt_plugins.vision`` (our declarations of torchvision's nms and roi_align; it imports torchvision)."""
    return importlib.import_module("torchtrt_plugins.vision")


def needs_torchvision(ctx: RunContext) -> str | None:
    """torchvision's own ops, the peer of our declared torchvision ops (they do not load next to a CPU-only torch).

    Looks for torchvision before importing ``torchtrt_plugins.vision``: without torchvision that module defines the
    two ops itself and declares them on a library that must be built, which a benchmark that only asks whether it
    can run must not leave behind (``load_plugins`` would then need that library)."""
    try:
        importlib.import_module("torchvision")
    except Exception as err:  # noqa: BLE001 - absent, or unable to load with this torch
        return f"torchvision's ops are not loaded: {_first_line(err)}"
    try:
        if vision().TORCHVISION:
            return None
    except Exception as err:  # noqa: BLE001 - reported as the reason
        return f"torchtrt_plugins.vision does not import: {_first_line(err)}"
    return f"torchvision's ops are not loaded with torch {torch.__version__} (e.g. a CPU-only build)"


HARNESS_HOOK = "bench_enqueue"


def harness_hook() -> Callable[..., Any] | None:
    """``torchtrt_plugins.testing.bench_enqueue`` when the conformance harness provides it.

    Contract: ``bench_enqueue(op, inputs, tactic=..., iters=..., fields=...) -> list[float]``: ``op`` the op
    name, ``inputs`` the CUDA tensors in the spec's input order, ``fields`` the plugin fields by name,
    ``tactic`` a tactic value (0: the plugin's own choice). The harness runs the plugin lifecycle up to
    ``enqueue`` and returns milliseconds per ``enqueue``, each bracketed by its own CUDA events. For an op declared
    with ``torchtrt_plugins.declare``, ``op`` is the converter's ``PluginCall`` and ``library=`` its plugin library.
    """
    try:
        testing = importlib.import_module("torchtrt_plugins.testing")
    except Exception:  # noqa: BLE001 - absent or broken: reported as a skip reason
        return None
    hook = getattr(testing, HARNESS_HOOK, None)
    return hook if callable(hook) else None


def needs_harness(ctx: RunContext) -> str | None:
    if harness_hook() is None:
        return f"harness not available (torchtrt_plugins.testing.{HARNESS_HOOK} not found)"
    return None


def unmet(requirements: Iterable[Requirement], ctx: RunContext) -> str | None:
    """Every unmet requirement, joined: the user learns all that is missing at once."""
    reasons = [reason for reason in (req(ctx) for req in requirements) if reason]
    return "; ".join(reasons) if reasons else None


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


@dataclass
class Result:
    op: str
    provider: str
    shape: str
    dtype: str
    device: str
    status: str  # ok | mismatch | skipped | error
    reason: str = ""
    timing: Timing | None = None
    nbytes: int | None = None
    copy_ms: float | None = None
    timer: str = "do_bench"
    repeats: int = 1

    @property
    def timed(self) -> bool:
        return self.timing is not None

    @property
    def gbps(self) -> float | None:
        if self.timer == "host":  # host time says nothing of bandwidth
            return None
        return gbps(self.nbytes, self.timing.median_ms if self.timing else None)

    @property
    def pct_of_copy(self) -> float | None:
        if self.timer == "host":
            return None
        return pct_of_copy(self.timing.median_ms if self.timing else None, self.copy_ms)

    def row(self, env: Environment) -> dict[str, str]:
        timing = self.timing
        return {
            "op": self.op,
            "provider": self.provider,
            "shape": self.shape,
            "dtype": self.dtype,
            "median_ms": _fmt(timing.median_ms if timing else None, ".6g"),
            "p20_ms": _fmt(timing.p20_ms if timing else None, ".6g"),
            "p80_ms": _fmt(timing.p80_ms if timing else None, ".6g"),
            "gbps": _fmt(self.gbps, ".2f"),
            "pct_of_copy": _fmt(self.pct_of_copy, ".1f"),
            "gpu": env.gpu,
            "torch": env.torch,
            "cuda": env.cuda,
            "tensorrt": env.tensorrt,
            "timestamp": env.timestamp,
            "timer": self.timer,
            "repeats": str(self.repeats),
        }


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def format_shape(shape: Sequence[int]) -> str:
    return "x".join(str(int(d)) for d in shape)


def format_bytes(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


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
    entry: Any, name: str = "plugin_enqueue", requires: tuple[Requirement, ...] = ()
) -> list[Provider]:
    """The op's TensorRT plugin run through the conformance harness, timing ``enqueue`` only.

    One provider for the plugin's own tactic choice and one per tactic in the spec. Inputs with a
    ``plugin_dtype`` are cast before the timing starts (see :func:`plugin_inputs`). An op declared with
    ``torchtrt_plugins.declare`` runs from its own plugin library (``entry.library``). ``entry`` may also be a
    function returning it, called only when the benchmark runs: then the plugin's own tactic choice alone is timed.
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
    return providers


def torchvision_providers(op: str) -> list[Provider]:
    """A torchvision op we declare (``torchtrt_plugins.vision``; ``op`` is ``nms`` or ``roi_align``) against
    torchvision's own: ``torchvision`` (its eager op; the peer, so its output is not checked: its half kernels compute
    in half), ``torchtrt`` (our launcher as the plugin's ``enqueue`` calls it, on buffers made once: an
    :class:`sdk.PreparedLaunch`) and ``plugin_enqueue`` (the plugin, through the harness). A case's inputs are the op's
    tensors, its kwargs the op's scalars by name."""

    def declaration() -> Any:
        return getattr(vision(), op.upper())

    def peer(case: Case) -> Callable[[], Any]:
        function = getattr(torch.ops.torchvision, op)
        return lambda: function(*case.inputs, **case.kwargs)

    def ours(case: Case) -> Callable[[], Any]:
        return PreparedLaunch(declaration(), *case.inputs, **case.kwargs)

    return [
        Provider("torchvision", peer, (needs_torchvision,), check=False),
        Provider("torchtrt", ours, (needs_cuda, needs_sdk_build)),
        *plugin_enqueue_providers(declaration, requires=(needs_sdk_build,)),
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


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


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
    providers interleaved (copy first), so that a drift of the machine spreads over all of them alike."""
    label = f"{benchmark.name} {dtype_name(dtype)} {format_shape(shape)}"
    results: list[Result] = []

    def result(provider: str, status: str, reason: str, timer: str, **kw: Any) -> Result:
        where = (benchmark.name, provider, format_shape(shape), dtype_name(dtype), ctx.device.type)
        return Result(*where, status, reason, timer=timer, repeats=ctx.repeats, **kw)

    def record(provider: str, status: str, reason: str = "") -> None:
        results.extend(result(provider, status, reason, timer) for timer in ctx.timers)
        if progress is not None:
            progress.update(f"{label} {provider}")

    try:
        case = benchmark.make_case(shape, dtype, ctx.device)
        # Only where a provider runs: the reference may need what the skipped ones lack (e.g. torchvision).
        runs = any(not static[p.name] for p in chosen)
        expected = benchmark.expected(case) if benchmark.expected and runs else None
    except Exception as err:  # noqa: BLE001 - e.g. out of memory: every provider of the case errors
        for name in [COPY_PROVIDER, *(p.name for p in chosen)]:
            record(name, "error", f"could not build the inputs: {_first_line(err)}")
        return results
    # torch.compile per shape: a clean dynamo cache for this case, before any provider compiles.
    torch._dynamo.reset()
    # name -> (timer -> a zero-argument timing, the mismatch found by the output check or "")
    prepared: dict[str, tuple[Callable[[str], Callable[[], Timing]], str]] = {}
    own_nbytes: dict[str, int | None] = {}
    if case.nbytes:
        try:
            copy = copy_fn(case.nbytes, ctx.device)
            prepared[COPY_PROVIDER] = (lambda timer: lambda: time_fn(copy, ctx.device, ctx.quick, timer), "")
        except Exception as err:  # noqa: BLE001
            record(COPY_PROVIDER, "error", _first_line(err))
    elif progress is not None:
        progress.update(f"{label} (not memory-bound: no copy)")
    for provider in chosen:
        if static[provider.name]:
            record(provider.name, "skipped", static[provider.name])
            continue
        try:
            if provider.nbytes is not None:
                own_nbytes[provider.name] = provider.nbytes(case)
            if provider.measure is not None:
                prepared[provider.name] = (lambda timer, p=provider: _measure_provider(p, case, timer), "")
                continue
            fn = provider.factory(case)
            out = fn()
            _sync(ctx.device)
            mismatch = _compare(benchmark, expected, out, dtype) if provider.check else None
            del out
            prepared[provider.name] = (
                lambda timer, fn=fn: lambda: time_fn(fn, ctx.device, ctx.quick, timer),
                mismatch or "",
            )
        except Skip as err:
            record(provider.name, "skipped", str(err))
        except Exception as err:  # noqa: BLE001 - reported, the run goes on
            record(provider.name, "error", _first_line(err))
    for timer in ctx.timers:
        results += _time_prepared(ctx, case, prepared, timer, result, own_nbytes)
    if progress is not None:
        for name in prepared:
            progress.update(f"{label} {name}")
    # Providers in their declared order, the copy first, whatever order they finished in; timers in the given order.
    order = {name: i for i, name in enumerate([COPY_PROVIDER, *(p.name for p in chosen)])}
    results.sort(key=lambda r: (ctx.timers.index(r.timer), order.get(r.provider, len(order))))
    return results


def _time_prepared(
    ctx: RunContext,
    case: Case,
    prepared: dict[str, tuple[Callable[[str], Callable[[], Timing]], str]],
    timer: str,
    result: Callable[..., Result],
    own_nbytes: dict[str, int | None] | None = None,
) -> list[Result]:
    """Every prepared provider timed with ``timer``, ``ctx.repeats`` times, interleaved, the order rotated by one each
    repeat (on the H100 a provider's time at 64-128 MB was seen to shift by up to 7% between rounds, with the state
    of the device, so no provider always runs in the same place); one Result each, made by
    ``result(provider, status, reason, timer, **timing_fields)``; ``own_nbytes``: providers that move other bytes
    than the case's (their copy time scaled to them)."""
    samples: dict[str, list[Timing]] = {name: [] for name in prepared}
    failed: dict[str, tuple[str, str]] = {}
    timings = {name: make(timer) for name, (make, _mismatch) in prepared.items()}
    with no_recompile():
        names = list(timings)
        for repeat in range(ctx.repeats):
            shift = repeat % len(names) if names else 0
            for name in names[shift:] + names[:shift]:
                if name in failed:
                    continue
                try:
                    samples[name].append(timings[name]())
                except (Skip, NotCapturable) as err:
                    failed[name] = ("skipped", str(err))
                except Exception as err:  # noqa: BLE001 - e.g. a recompile during timing: reported
                    failed[name] = ("error", _first_line(err))
    copy_ms = None
    if COPY_PROVIDER in prepared and COPY_PROVIDER not in failed:
        copy_ms = combine_repeats(samples[COPY_PROVIDER]).median_ms
    results = []
    for name, (_make, mismatch) in prepared.items():
        if name in failed:
            results.append(result(name, *failed[name], timer))
            continue
        timing = combine_repeats(samples[name])
        status = "mismatch" if mismatch else "ok"
        nbytes, copy = case.nbytes, copy_ms
        if own_nbytes and own_nbytes.get(name) and case.nbytes:
            nbytes = own_nbytes[name]
            copy = copy_ms * nbytes / case.nbytes if copy_ms is not None else None
        results.append(result(name, status, mismatch, timer, timing=timing, nbytes=nbytes, copy_ms=copy))
    return results


# ------------------------------------------------------------------------------------------ CSV


def write_results(results: Sequence[Result], env: Environment, path: os.PathLike | None = None) -> Path:
    """Append the timed results to the CSV (header written once) and what did not run to skipped.csv beside it."""
    path = Path(path) if path else DEFAULT_CSV
    _append(path, COLUMNS, [r.row(env) for r in results if r.timed])
    not_run = [
        {
            "op": r.op,
            "provider": r.provider,
            "shape": r.shape,
            "dtype": r.dtype,
            "device": r.device,
            "status": r.status,
            "reason": r.reason,
            "timestamp": env.timestamp,
        }
        for r in results
        if r.status != "ok"
    ]
    _append(path.with_name(NOT_RUN_FILE), NOT_RUN_COLUMNS, not_run)
    return path


def _append(path: Path, columns: Sequence[str], rows: Sequence[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = not path.is_file() or path.stat().st_size == 0
    if not fresh:
        with open(path, newline="") as handle:
            header = next(csv.reader(handle), [])
        if tuple(header) != tuple(columns):
            raise ValueError(
                f"{path} has columns {header}, expected {list(columns)}; write to another file or move it away"
            )
    with open(path, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        if fresh:
            writer.writeheader()
        writer.writerows(rows)


def read_results(path: os.PathLike) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        columns = tuple(reader.fieldnames or ())
        if columns == LEGACY_COLUMNS:
            return [dict(row, timer="do_bench", repeats="1") for row in reader]
        if columns != COLUMNS:
            raise ValueError(f"{path} is not a results CSV: columns {reader.fieldnames}, expected {list(COLUMNS)}")
        return list(reader)


# ------------------------------------------------------------------------------------------ report


def format_table(results: Sequence[Result]) -> str:
    """One block per case: the copy first, then each provider's time, GB/s and % of copy."""
    lines = []
    cases: dict[tuple[str, str, str, str, str], list[Result]] = {}
    for r in results:
        cases.setdefault((r.op, r.dtype, r.shape, r.device, r.timer), []).append(r)
    header = f"    {'provider':<30} {'median ms':>11} {'p20-p80 ms':>21} {'GB/s':>9} {'% copy':>7}  status"
    # With repeats, p20-p80 is the spread of the repeats' medians.
    for (op, dtype, shape, device, _timer), rows in cases.items():
        timed = [r for r in rows if r.timed]
        if not timed:
            continue
        nbytes = next((r.nbytes for r in timed if r.nbytes), None)
        moved = f"  {format_bytes(nbytes)} moved" if nbytes else ""
        how = f"  timer={timed[0].timer}" + (f" x{timed[0].repeats} repeats" if timed[0].repeats > 1 else "")
        lines.append(f"{op}  {dtype}  {shape}  device={device}{moved}{how}")
        lines.append(header)
        for r in timed:
            t = r.timing
            spread = f"{t.p20_ms:.4g}-{t.p80_ms:.4g}"
            status = "" if r.status == "ok" else f"{r.status.upper()}: {r.reason}"
            lines.append(
                f"    {r.provider:<30} {t.median_ms:>11.4g} {spread:>21} {_fmt(r.gbps, '.1f'):>9} "
                f"{_fmt(r.pct_of_copy, '.0f'):>7}  {status}".rstrip()
            )
        lines.append("")
    return "\n".join(lines)


def format_not_run(results: Sequence[Result]) -> str:
    """What did not run, one line per (op, provider, status, reason), with how many cases it covers."""
    groups: dict[tuple[str, str, str, str], int] = {}
    for r in results:
        if r.status in ("skipped", "error"):
            key = (r.op, r.provider, r.status, r.reason)
            groups[key] = groups.get(key, 0) + 1
    if not groups:
        return ""
    lines = ["Not run:"]
    for (op, provider, status, reason), count in groups.items():
        cases = f"{count} case{'s' if count > 1 else ''}"
        lines.append(f"  {op:<14} {provider:<30} {status:<8} ({cases}): {reason}")
    return "\n".join(lines)


@dataclass
class Report:
    env: Environment
    results: list[Result]
    csv_path: Path

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
) -> Report:
    """Run benchmarks side by side in one process, append the CSV, return the report."""
    ctx = RunContext(resolve_device(device), quick, tuple(timers), repeats)
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
    path = write_results(results, env, csv_path)
    return Report(env, results, path)


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
        f"time per call, {HOST_CALLS} calls with no synchronization inside). Default: {','.join(DEFAULT_TIMERS)}",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="time every provider this many times, interleaved; report the spread"
    )
    parser.add_argument(
        "--sizes",
        help="comma-separated shapes replacing the plans' sizes, e.g. 1x4096,8x4096 (benchmarks whose "
        "shapes have that many dimensions)",
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
        )
    except ValueError as err:
        parser.error(str(err))
    print(report.text())
    return 0
