"""As run on 2026-11-25 (examples/pyops then defined liger_rms_norm with torch.library.custom_op; it is a Library op since).
Where the host time of a custom_op-defined declared op goes: the op as called, the same below torch's Autograd
key (custom_op's Python autograd kernel skipped), a Library.define op of ours, and Triton's own launch."""
import statistics, sys, time
from pathlib import Path
import torch
sys.path.insert(0, str(Path("examples/pyops").resolve()))
import pyops  # noqa: E402
import torchtrt_plugins  # noqa: E402,F401
from liger_kernel.ops.rms_norm import _rms_norm_forward_kernel, calculate_settings  # noqa: E402

def host(fn, calls=2000, repeats=7):
    for _ in range(50): fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls): fn()
        out.append((time.perf_counter() - t) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(out), min(out), max(out)

for rows, cols in ((1, 4096), (128, 4096)):
    x = torch.randn(rows, cols, dtype=torch.bfloat16, device="cuda"); w = torch.randn(cols, dtype=torch.bfloat16, device="cuda")
    y = torch.empty_like(x); rstd = torch.empty(rows, device="cuda")
    block, warps = calculate_settings(cols)
    def below():
        with torch._C._AutoDispatchBelowAutograd():
            return torch.ops.pyops.liger_rms_norm(x, w, 1e-6, 0.0)
    cases = {
        "custom_op as called": lambda: torch.ops.pyops.liger_rms_norm(x, w, 1e-6, 0.0),
        "custom_op below Autograd": below,
        "torchtrt.rms_norm (Library.define)": lambda: torch.ops.torchtrt.rms_norm(x, w, 1e-6),
        "triton launch": lambda: _rms_norm_forward_kernel[(rows,)](y, cols, x, cols, w, 1, rstd, 1, cols, 1e-6, 0.0, 0, True, block, num_warps=warps),
        "x.clone()": lambda: x.clone(),
    }
    for _round in range(2):
        for name, fn in cases.items():
            m, lo, hi = host(fn)
            print(f"{rows}x{cols} round {_round} {name:38s} median {m:6.2f} us (min {lo:.2f}, max {hi:.2f})")
print(torch._C._dispatch_dump("pyops::liger_rms_norm"))
