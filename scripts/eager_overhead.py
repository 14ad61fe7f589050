"""Host time per call of the eager CUDA ops on tiny tensors (the GPU work is negligible, so this is the adapter's
overhead), and masked_rows' device memory. Prints one line per measurement; compare two checkouts in one run:

    PYTHONPATH=<checkout> python scripts/eager_overhead.py <label>
"""

import statistics
import sys
import time

import torch

import torchtrt_plugins
from torchtrt_plugins.benchmarks import handwritten
from torchtrt_plugins.ops.rotary_embedding import cos_sin_cache as cos_sin_cache_of

LABEL = sys.argv[1] if len(sys.argv) > 1 else "this"


def per_call_us(fn, calls=2000, repeats=5):
    for _ in range(100):
        fn()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times), min(times), max(times)


x, w = torch.randn(4, 64, device="cuda"), torch.ones(64, device="cuda")
xm, mask = torch.randn(8, 16, device="cuda"), torch.arange(8, device="cuda") % 2 == 0
xp = torch.randn(1, 2, 6, 6, device="cuda")
residual = torch.randn(4, 64, device="cuda")
xr, positions = torch.randn(4, 8, 64, device="cuda"), torch.arange(4, device="cuda")
cos, sin = torch.randn(4, 1, 64, device="cuda"), torch.randn(4, 1, 64, device="cuda")
cos_sin_cache = cos_sin_cache_of(4096, 64, 10000.0, device="cuda")


def rotate_half_rope():
    x1, x2 = xr.chunk(2, dim=-1)
    return xr * cos + torch.cat((-x2, x1), dim=-1) * sin


def add_then_rms_norm():
    residual.add_(x)
    return torch.nn.functional.rms_norm(residual, (64,), w, 1e-6)


handwritten.load()  # the hand-written C++ ops over our launchers (built here, about a minute)
hw = torch.ops.ttp_handwritten
# Each hand-written twin computes what its declared op does.
torch.testing.assert_close(hw.pad_to(xp, 8, 8), torch.ops.torchtrt.pad_to(xp, 8, 8), rtol=0, atol=0)
torch.testing.assert_close(
    hw.rotary_embedding(xr, positions, cos_sin_cache, 64, 4096),
    torch.ops.torchtrt.rotary_embedding(xr, positions, 64, 4096),
    rtol=0,
    atol=0,
)
r1, r2 = residual.clone(), residual.clone()
torch.testing.assert_close(
    hw.add_rms_norm(x, r1, w, 1e-6), torch.ops.torchtrt.add_rms_norm(x, r2, w, 1e-6), rtol=0, atol=0
)
torch.testing.assert_close(r1, r2, rtol=0, atol=0)
cases = {
    "rms_norm": lambda: torch.ops.torchtrt.rms_norm(x, w, 1e-6),
    "rms_norm.default": lambda: torch.ops.torchtrt.rms_norm.default(x, w, 1e-6),
    "hand-written C++ op (rms_norm's launcher)": lambda: torch.ops.ttp_handwritten.rms_norm(x, w, 1e-6),
    "hand-written C++ op without its launch": lambda: torch.ops.ttp_handwritten.rms_norm_no_launch(x, w, 1e-6),
    "rms_norm_tactic[2]": lambda: torch.ops.torchtrt.rms_norm_tactic(x, w, 1e-6, tactic=2),
    "masked_rows": lambda: torch.ops.torchtrt.masked_rows(xm, mask),
    "torch x[mask] (peer)": lambda: xm[mask],
    "torch F.rms_norm (peer)": lambda: torch.nn.functional.rms_norm(x, (64,), w, 1e-6),
    "add_rms_norm": lambda: torch.ops.torchtrt.add_rms_norm(x, residual, w, 1e-6),
    "hand-written C++ add_rms_norm": lambda: torch.ops.ttp_handwritten.add_rms_norm(x, residual, w, 1e-6),
    "torch residual.add_(x); F.rms_norm (peer)": add_then_rms_norm,
    "pad_to": lambda: torch.ops.torchtrt.pad_to(xp, 8, 8),
    "hand-written C++ pad_to": lambda: torch.ops.ttp_handwritten.pad_to(xp, 8, 8),
    "torch F.pad (peer)": lambda: torch.nn.functional.pad(xp, (0, 2, 0, 2)),
    "rotary_embedding": lambda: torch.ops.torchtrt.rotary_embedding(xr, positions, 64, 4096),
    "hand-written C++ rotary_embedding (cache as a tensor)": lambda: torch.ops.ttp_handwritten.rotary_embedding(
        xr, positions, cos_sin_cache, 64, 4096
    ),
    "torch q * cos + rotate_half(q) * sin (peer)": rotate_half_rope,
    "torch x.clone() (a C++ op's floor)": lambda: x.clone(),
}
for name, fn in cases.items():
    median, low, high = per_call_us(fn)
    print(f"[{LABEL}] host us/call {name}: median {median:.2f} (min {low:.2f}, max {high:.2f}), 2000 calls x 5")

# The same calls from C++ (no Python): the launcher alone, and each op through the C++ dispatcher.
y = torch.empty_like(x)
loops = {
    "launcher alone": lambda: torch.ops.ttp_handwritten.launcher_us(x, w, y, 20000),
    "rms_norm": lambda: torch.ops.ttp_handwritten.dispatch_us("torchtrt::rms_norm", x, w, 20000),
    "hand-written C++ op": lambda: torch.ops.ttp_handwritten.dispatch_us("ttp_handwritten::rms_norm", x, w, 20000),
    "hand-written C++ op without its launch": lambda: torch.ops.ttp_handwritten.dispatch_us(
        "ttp_handwritten::rms_norm_no_launch", x, w, 20000
    ),
}
for ns in ("torchtrt", "ttp_handwritten"):
    who = "ours" if ns == "torchtrt" else "hand-written"
    loops[f"add_rms_norm, {who}"] = lambda ns=ns: hw.dispatch_add_rms_us(f"{ns}::add_rms_norm", x, residual, w, 20000)
    loops[f"pad_to, {who}"] = lambda ns=ns: hw.dispatch_pad_us(f"{ns}::pad_to", xp, 8, 8, 20000)
    loops[f"rotary_embedding, {who}"] = lambda ns=ns: hw.dispatch_rotary_us(
        f"{ns}::rotary_embedding", xr, positions, cos_sin_cache, 64, 4096, 20000
    )
for name, fn in loops.items():
    fn()
    samples = []
    for _ in range(5):
        torch.cuda.synchronize()
        samples.append(fn())
    torch.cuda.synchronize()
    print(
        f"[{LABEL}] C++ loop us/call {name}: median {statistics.median(samples):.2f} "
        f"(min {min(samples):.2f}, max {max(samples):.2f}), 20000 calls x 5"
    )

big = torch.randn(1 << 20, 16, device="cuda")  # 64 MiB
keep = torch.rand(1 << 20, device="cuda") < 0.1
torch.cuda.synchronize()
base = torch.cuda.memory_allocated()
torch.cuda.reset_peak_memory_stats()
y = torch.ops.torchtrt.masked_rows(big, keep)
torch.cuda.synchronize()
mib = 1 << 20
print(
    f"[{LABEL}] masked_rows 2^20 x 16 fp32 (64 MiB), {y.shape[0]} rows kept ({y.numel() * 4 / mib:.1f} MiB): "
    f"peak extra {(torch.cuda.max_memory_allocated() - base) / mib:.1f} MiB, "
    f"held by the result {(torch.cuda.memory_allocated() - base) / mib:.1f} MiB"
)
print(f"[{LABEL}] torchtrt_plugins from {torchtrt_plugins.__file__}")
