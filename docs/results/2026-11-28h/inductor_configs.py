"""Prints the configuration inductor's autotuner chose for add_rms_norm (the benchmark's unfused ops) at five bf16
shapes, with its registers: python3 inductor_configs.py from a checkout with the package installed (the log beside
this file came from this script's first form: the same calls, printing shared memory and warps too)."""

import gc

import torch
from torch._inductor.runtime.triton_heuristics import CachingAutotuner

from torchtrt_plugins.benchmarks import bench_add_rms_norm as bench

seen: set[int] = set()
for shape in [(16384, 8192), (65536, 4096), (4096, 4096), (2048, 12288), (32768, 16384)]:
    torch._dynamo.reset()
    case = bench.make_case(shape, torch.bfloat16, torch.device("cuda"))
    bench.inductor(case)()
    torch.cuda.synchronize()
    for o in list(gc.get_objects()):
        # type(), not isinstance(): gc holds weak proxies whose referents may be gone.
        if issubclass(type(o), CachingAutotuner) and id(o) not in seen:
            seen.add(id(o))
            print(shape, torch.bfloat16, o.fn.__name__, flush=True)
            for launcher in o.launchers:
                print("  chosen", launcher.config, "regs", launcher.n_regs, "spills", launcher.n_spills, flush=True)
