"""Timing for the benchmarks: the timers (``do_bench``, ``graph``, ``host``), the copy of the same bytes that
memory-bound ops are judged against, and the statistics over samples and repeats."""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

QUANTILES = (0.5, 0.2, 0.8)
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


def time_host(
    fn: Callable[[], Any], device: torch.device, samples: int = 15, calls: int = HOST_CALLS, sample_ms: float = 50.0
) -> Timing:
    """Host wall time per call: ``calls`` calls back to back with no synchronization inside, the device drained
    before each sample and after it (outside the timed span); median and p20/p80 over ``samples``. A call slow
    enough that ``calls`` of them would pass ``sample_ms`` (a CPU op, or a big GPU one whose queue the host waits on
    anyway) gets fewer, at least one, so that a sample lasts about ``sample_ms``."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    warm, begin = 0, time.perf_counter()
    while warm < 20 and (warm < 2 or (time.perf_counter() - begin) * 1e3 < sample_ms):
        fn()
        warm += 1
    sync()
    per_call_ms = (time.perf_counter() - begin) * 1e3 / warm
    calls = max(1, min(calls, int(sample_ms / per_call_ms)))
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


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]
