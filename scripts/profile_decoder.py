"""Kernel times of the decoder block compiled by inductor, without and with our lowering pass (8x512x2048 bf16)."""

import sys

import torch
from torch.profiler import ProfilerActivity, profile

from torchtrt_plugins import lowering
from torchtrt_plugins.benchmarks import bench_model

shape = tuple(int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "8x512x2048").split("x"))
case = bench_model.make_case(shape, torch.bfloat16, torch.device("cuda"))
block, x = case.inputs
for name, opts in (("inductor", {}), ("inductor+ours", lowering.inductor_options())):
    torch._dynamo.reset()
    m = torch.compile(block, options=opts)
    with torch.inference_mode():
        for _ in range(5):
            m(x)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(10):
                m(x)
        g.replay()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                g.replay()
            torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    total = sum(e.device_time_total for e in events)
    print(f"== {name}: total {total / 200:.1f} us per call")
    for e in sorted(events, key=lambda e: -e.device_time_total):
        print(f"  {e.device_time_total / 200:8.2f} us  x{e.count / 200:.0f}  {e.key[:110]}")
