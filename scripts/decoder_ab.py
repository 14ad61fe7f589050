"""The decoder block compiled by inductor twice without our lowering pass (A, A2) and once with it (B), timed
interleaved in one process: each is captured once in a CUDA graph of 10 calls, then the three graphs are replayed
round after round in a rotating order, so that clocks, temperature and the L2's state fall on all alike. A2 is the
control: the same compilation as A with its buffers elsewhere, so A2/A is the difference placement alone makes. Prints
per-call GPU time of each (median and p20-p80 over the rounds), the medians of the per-round ratios B/A, A2/A and
B/((A+A2)/2), and in how many rounds each was below 1; then the kernels of each under torch.profiler, profiled in
turn; then each call's kernels in launch order with the idle time before each (medians over 30 calls).

    python scripts/decoder_ab.py [8x512x2048] [rounds]
"""

import copy
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from torchtrt_plugins import lowering
from torchtrt_plugins.benchmarks import bench_model

shape = tuple(int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "8x512x2048").split("x"))
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 60
CALLS = 10  # per graph
REPLAYS = 5  # per measurement

case = bench_model.make_case(shape, torch.bfloat16, torch.device("cuda"))
block, x = case.inputs
# B compiled between the two copies of A, so that neither copy of A always has the earlier addresses.
variants = {"inductor": {}, "inductor+ours": lowering.inductor_options(), "inductor again": {}}
models = {}  # kept alive: each graph reads its model's parameters
graphs = {}
outputs = {}
with torch.inference_mode():
    for name, options in variants.items():
        model = models[name] = torch.compile(copy.deepcopy(block), options=options)
        for _ in range(5):
            out = model(x)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(CALLS):
                out = model(x)
        graph.replay()
        torch.cuda.synchronize()
        graphs[name] = graph
        outputs[name] = out
    expected = block(x)
for name, out in outputs.items():
    err = (out.float() - expected.float()).abs().max().item()
    print(f"{name}: max abs difference from eager {err:.3g}")

start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def measure(graph: torch.cuda.CUDAGraph) -> float:
    start.record()
    for _ in range(REPLAYS):
        graph.replay()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / (REPLAYS * CALLS)


names = list(graphs)
for name in names:  # warm
    for _ in range(3):
        measure(graphs[name])
times = {name: [] for name in names}
for r in range(rounds):
    order = names[r % len(names) :] + names[: r % len(names)]
    for name in order if r % 2 == 0 else order[::-1]:
        times[name].append(measure(graphs[name]))


def spread(values: list[float]) -> str:
    q = statistics.quantiles(values, n=5)
    return f"median {statistics.median(values):.4f} (p20-p80 {q[0]:.4f}-{q[3]:.4f})"


a, b, a2 = names
print(f"decoder block {'x'.join(map(str, shape))} bf16, {rounds} interleaved rounds of {REPLAYS}x{CALLS} calls")
for name in names:
    print(f"  {name:14s} {spread(times[name])} ms")
for label, num, den in (
    (f"{b}/{a}", times[b], times[a]),
    (f"{a2}/{a} (placement alone)", times[a2], times[a]),
    (f"{b}/mean({a}, {a2})", times[b], [(u + v) / 2 for u, v in zip(times[a], times[a2], strict=True)]),
):
    ratios = [n / d for n, d in zip(num, den, strict=True)]
    print(f"  ratio {label}: {spread(ratios)}; below 1 in {sum(v < 1 for v in ratios)} of {rounds} rounds")

# Kernels, profiled in turn (A B A2 A B A2).
totals = {name: {} for name in names}
for r in range(2 * len(names)):
    name = names[r % len(names)]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            graphs[name].replay()
        torch.cuda.synchronize()
    for e in prof.key_averages():
        if e.device_type.name == "CUDA":
            totals[name][e.key] = totals[name].get(e.key, 0.0) + e.device_time_total / (2 * 10 * CALLS)
for name in names:
    print(f"== {name}: kernel time {sum(totals[name].values()):.1f} us per call")
    for key, us in sorted(totals[name].items(), key=lambda kv: -kv[1]):
        print(f"  {us:8.2f} us  {key[:110]}")

# One replay of each graph, kernel by kernel in launch order (the first call's kernels, then the per-position median
# over the graph's calls).
for name in names:
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            graphs[name].replay()
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)
    per_call = len(events) // (3 * CALLS)
    print(f"== {name}: {len(events)} kernels, {per_call} a call")
    for k in range(per_call):
        durations = [events[c * per_call + k].time_range.elapsed_us() for c in range(3 * CALLS)]
        gaps = [
            events[c * per_call + k].time_range.start - events[c * per_call + k - 1].time_range.end
            for c in range(1, 3 * CALLS)
        ]
        print(
            f"  {k:2d} {statistics.median(durations):7.2f} us (gap before {statistics.median(gaps):5.2f})  "
            f"{events[k].name[:90]}"
        )
