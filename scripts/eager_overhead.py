"""Host time per call of the eager CUDA ops on tiny tensors (the GPU work is negligible, so this is the adapter's
overhead): the torch peers, then each op with a hand-written twin interleaved with it (from Python and from a C++
loop); and masked_rows' device memory. Prints one line per measurement; compare two checkouts in one run:

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
singles = {
    "rms_norm.default": lambda: torch.ops.torchtrt.rms_norm.default(x, w, 1e-6),
    "hand-written C++ op without its launch": lambda: torch.ops.ttp_handwritten.rms_norm_no_launch(x, w, 1e-6),
    "rms_norm_tactic[2]": lambda: torch.ops.torchtrt.rms_norm_tactic(x, w, 1e-6, tactic=2),
    "masked_rows": lambda: torch.ops.torchtrt.masked_rows(xm, mask),
    "torch x[mask] (peer)": lambda: xm[mask],
    "torch F.rms_norm (peer)": lambda: torch.nn.functional.rms_norm(x, (64,), w, 1e-6),
    "torch residual.add_(x); F.rms_norm (peer)": add_then_rms_norm,
    "torch F.pad (peer)": lambda: torch.nn.functional.pad(xp, (0, 2, 0, 2)),
    "torch q * cos + rotate_half(q) * sin (peer)": rotate_half_rope,
    "torch x.clone() (a C++ op's floor)": lambda: x.clone(),
}
for name, fn in singles.items():
    median, low, high = per_call_us(fn)
    print(f"[{LABEL}] host us/call {name}: median {median:.2f} (min {low:.2f}, max {high:.2f}), 2000 calls x 5")

# Each declared op beside its hand-written twin, interleaved: ROUNDS rounds, each timing both (which goes first
# alternates), so that the machine's drift over the run falls on both alike. From Python, then from a C++ loop
# through the dispatcher (no Python).
ROUNDS = 15
# Per op: ours and its twin from Python, and the op of a namespace from a C++ loop (`calls` calls: us per call).
twins = {
    "rms_norm": (
        lambda: torch.ops.torchtrt.rms_norm(x, w, 1e-6),
        lambda: torch.ops.ttp_handwritten.rms_norm(x, w, 1e-6),
        lambda ns, calls: hw.dispatch_us(f"{ns}::rms_norm", x, w, calls),
    ),
    "add_rms_norm": (
        lambda: torch.ops.torchtrt.add_rms_norm(x, residual, w, 1e-6),
        lambda: torch.ops.ttp_handwritten.add_rms_norm(x, residual, w, 1e-6),
        lambda ns, calls: hw.dispatch_add_rms_us(f"{ns}::add_rms_norm", x, residual, w, calls),
    ),
    "pad_to": (
        lambda: torch.ops.torchtrt.pad_to(xp, 8, 8),
        lambda: torch.ops.ttp_handwritten.pad_to(xp, 8, 8),
        lambda ns, calls: hw.dispatch_pad_us(f"{ns}::pad_to", xp, 8, 8, calls),
    ),
    "rotary_embedding": (
        lambda: torch.ops.torchtrt.rotary_embedding(xr, positions, 64, 4096),
        lambda: torch.ops.ttp_handwritten.rotary_embedding(xr, positions, cos_sin_cache, 64, 4096),
        lambda ns, calls: hw.dispatch_rotary_us(
            f"{ns}::rotary_embedding", xr, positions, cos_sin_cache, 64, 4096, calls
        ),
    ),
}


def python_loop(fn, calls=2000):
    def timed():
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / calls * 1e6

    return timed


def interleaved(ours, twin):
    """Per-call us of each over ROUNDS rounds: (ours, twin, ratio ours/twin per round)."""
    for fn in (ours, twin):
        fn()
    a, b = [], []
    for r in range(ROUNDS):
        for fn, samples in ((ours, a), (twin, b)) if r % 2 == 0 else ((twin, b), (ours, a)):
            torch.cuda.synchronize()
            samples.append(fn())
    return a, b, [p / q for p, q in zip(a, b)]


def report(where, name, ours, twin, calls):
    a, b, ratios = interleaved(ours, twin)
    print(
        f"[{LABEL}] {where} us/call {name}: ours median {statistics.median(a):.2f} (min {min(a):.2f}), "
        f"hand-written twin {statistics.median(b):.2f} (min {min(b):.2f}); ratio ours/twin median "
        f"{statistics.median(ratios):.3f}, ours <= twin in {sum(p <= q for p, q in zip(a, b))} of {ROUNDS} rounds, "
        f"{calls} calls a round"
    )


for name, (ours, twin, _) in twins.items():
    report("host", name, python_loop(ours), python_loop(twin), 2000)
y = torch.empty_like(x)
samples = [torch.ops.ttp_handwritten.launcher_us(x, w, y, 20000) for _ in range(5)]
print(f"[{LABEL}] C++ loop us/call launcher alone: median {statistics.median(samples):.2f}, 20000 calls x 5")
for name, (_, _, cpp) in twins.items():
    report(
        "C++ loop", name, lambda cpp=cpp: cpp("torchtrt", 20000), lambda cpp=cpp: cpp("ttp_handwritten", 20000), 20000
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
