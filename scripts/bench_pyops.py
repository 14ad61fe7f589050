"""Kernels written in Python, compiled ahead of time (examples/pyops) vs the same kernels launched from Python.

    PYTHONPATH=examples/pyops python scripts/bench_pyops.py [--out DIR] [--repeats 5] [--ops liger_rms_norm,swiglu]

GPU time per call: a CUDA graph of 50 calls, replayed (what an engine pays; the host is out of it). Host time per
eager call: wall time of 500 calls with no synchronization inside the loop, divided by 500 (what eager users pay;
the GPU runs behind). Providers, each on the same buffers:
  ttp eager      the declared op (torch.ops.pyops.*): our cubin, launched from C++ through the launcher library
  ttp enqueue    sdk.PreparedLaunch: the launcher on fixed buffers, as the plugin's enqueue calls it
  from python    the same kernel and settings launched from Python (launch.launch_from_python: Triton's
                 launcher, CuPy's RawModule, with our argument mapping)
  triton launch  Liger's kernel launched directly with Triton's launcher (kernel[grid](...)), nothing else
  liger          Liger-Kernel's own rms_norm_forward (its full Python path, same kernel)
  torch          PyTorch eager composite of the op
Rows: CSV (op, shape, dtype, provider, metric, median_us, p20_us, p80_us, gpu, torch) in DIR/pyops.csv and stdout.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "pyops"))

import pyops  # noqa: E402

from torchtrt_plugins import sdk  # noqa: E402
from torchtrt_plugins.kernels import launch

CALLS_PER_GRAPH = 50
HOST_CALLS = 500


def gpu_time_us(fn, repeats: int) -> list[float]:
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS_PER_GRAPH):
            fn()
    out = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3 / CALLS_PER_GRAPH)
    return out


def host_time_us(fn, repeats: int) -> list[float]:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(HOST_CALLS):
            fn()
        out.append((time.perf_counter() - start) * 1e6 / HOST_CALLS)
        torch.cuda.synchronize()
    return out


def rms_norm_providers(rows: int, cols: int, dtype: torch.dtype):
    from liger_kernel.ops.rms_norm import _rms_norm_forward_kernel, calculate_settings, rms_norm_forward

    x = torch.randn(rows, cols, dtype=dtype, device="cuda")
    w = torch.randn(cols, dtype=dtype, device="cuda")
    outputs = [torch.empty_like(x), torch.empty(rows, dtype=torch.float32, device="cuda")]
    prepared = sdk.PreparedLaunch(pyops.LIGER_RMS_NORM, x, w, 1e-6, 0.0)
    block, warps = calculate_settings(cols)

    def torch_composite():
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(dtype) * w

    return {
        "ttp eager": lambda: torch.ops.pyops.liger_rms_norm(x, w, 1e-6, 0.0),
        "ttp enqueue": prepared,
        "from python": lambda: launch.launch_from_python(pyops.LIGER_RMS_NORM, (x, w, 1e-6, 0.0), outputs),
        "triton launch": lambda: _rms_norm_forward_kernel[(rows,)](
            outputs[0], cols, x, cols, w, 1, outputs[1], 1, cols, 1e-6, 0.0, 0, True, block, num_warps=warps
        ),
        "liger": lambda: rms_norm_forward(x, w, 1e-6, 0.0, "llama", True),
        "torch": torch_composite,
    }


def swiglu_providers(rows: int, cols: int, dtype: torch.dtype):
    gate = torch.randn(rows, cols, dtype=dtype, device="cuda")
    up = torch.randn(rows, cols, dtype=dtype, device="cuda")
    out = torch.empty_like(gate)
    providers = {"ttp eager": lambda: torch.ops.pyops.swiglu(gate, up, 1.0)}
    for tactic in (0, 1):
        providers[f"ttp enqueue t{tactic}"] = sdk.PreparedLaunch(pyops.SWIGLU, gate, up, 1.0, tactic=tactic)
        providers[f"from python t{tactic}"] = lambda t=tactic: launch.launch_from_python(
            pyops.SWIGLU, (gate, up, 1.0), [out], tactic=t
        )
    providers["torch"] = lambda: torch.nn.functional.silu(gate) * up
    return providers


CASES = [
    ("liger_rms_norm", rms_norm_providers, [(1, 4096), (8, 4096), (128, 4096), (4096, 4096), (1024, 2048)]),
    ("swiglu", swiglu_providers, [(1, 11008), (128, 11008), (4096, 11008)]),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("bench_pyops"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--ops", default=",".join(op for op, _, _ in CASES), help="comma-separated subset of the ops")
    args = parser.parse_args()
    ops = args.ops.split(",")
    dtype = getattr(torch, args.dtype)
    args.out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name()
    with open(args.out / "pyops.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["op", "shape", "dtype", "provider", "metric", "median_us", "p20_us", "p80_us", "gpu", "torch"])
        for op, make, shapes in (case for case in CASES if case[0] in ops):
            for rows, cols in shapes:
                for provider, fn in make(rows, cols, dtype).items():
                    for metric, timer in (("gpu", gpu_time_us), ("host", host_time_us)):
                        try:
                            values = sorted(timer(fn, args.repeats))
                        except Exception as err:  # noqa: BLE001 - a provider that cannot run is reported, not fatal
                            print(f"{op} {rows}x{cols} {provider} {metric}: {type(err).__name__}: {err}")
                            continue
                        q = statistics.quantiles(values, n=5) if len(values) > 1 else values * 4
                        row = [op, f"{rows}x{cols}", args.dtype, provider, metric]
                        row += [
                            f"{statistics.median(values):.2f}",
                            f"{q[0]:.2f}",
                            f"{q[3]:.2f}",
                            gpu,
                            torch.__version__,
                        ]
                        writer.writerow(row)
                        print(",".join(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
