"""Host time per call of the eager CUDA ops on tiny tensors (the GPU work is negligible, so this is the adapter's
overhead): the torch peers, then each op in both flavours of our eager kernel (torchtrt::<op> in the one that serves
by default, ttp_stable::<op>, the same schema, in the stable one) with a hand-written twin, interleaved (from Python
and from a C++ loop); and masked_rows' device memory. Prints one line per measurement; compare two checkouts in one
run:

    PYTHONPATH=<checkout> python scripts/eager_overhead.py <label>
"""

import statistics
import sys
import time
from pathlib import Path

import torch

import torchtrt_plugins
from torchtrt_plugins import registry
from torchtrt_plugins.ops.rotary_embedding import cos_sin_cache as cos_sin_cache_of
from torchtrt_plugins.sdk import eager_kernel

# The hand-written twins live in the checkout's benchmarks/ (not in the package); appended, so a PYTHONPATH checkout's
# torchtrt_plugins stays the one imported.
sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks"))
import handwritten  # noqa: E402

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
# The stable flavour beside the default one: each op's schema again in namespace ttp_stable, served by it.
_stable = torch.library.Library("ttp_stable", "DEF")
for _name in ("rms_norm", "add_rms_norm", "pad_to", "rotary_embedding"):
    _stable.define(str(getattr(torch.ops.torchtrt, _name).default._schema).split("::", 1)[1])
    eager_kernel.register(registry.get(_name).declaration, name=f"ttp_stable::{_name}", flavour="stable")
torch.ops.torchtrt.rms_norm(x, w, 1e-6)
print(f"[{LABEL}] torchtrt:: ops served by the {eager_kernel.flavour()} flavour, ttp_stable:: by the stable one")
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

# Each declared op in both flavours beside its hand-written twin, interleaved: ROUNDS rounds, each timing all three
# (the order rotates), so that the machine's drift over the run falls on all alike. From Python, then from a C++ loop
# through the dispatcher (no Python).
ROUNDS = 15
NAMESPACES = ("torchtrt", "ttp_stable", "ttp_handwritten")
# Per op: its call from Python in namespace `ns`, and from a C++ loop (`calls` calls: us per call).
cos_sin = {"torchtrt": (), "ttp_stable": (), "ttp_handwritten": (cos_sin_cache,)}
calls_of = {
    "rms_norm": (
        lambda ns: lambda: getattr(torch.ops, ns).rms_norm(x, w, 1e-6),
        lambda ns, calls: hw.dispatch_us(f"{ns}::rms_norm", x, w, calls),
    ),
    "add_rms_norm": (
        lambda ns: lambda: getattr(torch.ops, ns).add_rms_norm(x, residual, w, 1e-6),
        lambda ns, calls: hw.dispatch_add_rms_us(f"{ns}::add_rms_norm", x, residual, w, calls),
    ),
    "pad_to": (
        lambda ns: lambda: getattr(torch.ops, ns).pad_to(xp, 8, 8),
        lambda ns, calls: hw.dispatch_pad_us(f"{ns}::pad_to", xp, 8, 8, calls),
    ),
    "rotary_embedding": (
        lambda ns: lambda: getattr(torch.ops, ns).rotary_embedding(xr, positions, *cos_sin[ns], 64, 4096),
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


def interleaved(timers):
    """Per-call us of each timer over ROUNDS rounds (the order rotating by one each round)."""
    for timer in timers:
        timer()
    samples = [[] for _ in timers]
    for r in range(ROUNDS):
        for k in range(len(timers)):
            j = (k + r) % len(timers)
            torch.cuda.synchronize()
            samples[j].append(timers[j]())
    return samples


def report(where, name, timers, calls):
    native, stable, twin = interleaved(timers)
    line = f"[{LABEL}] {where} us/call {name}: hand-written twin {statistics.median(twin):.2f} (min {min(twin):.2f})"
    for label, ours in (("ours", native), ("ours stable", stable)):
        ratios = [p / q for p, q in zip(ours, twin)]
        line += (
            f"; {label} {statistics.median(ours):.2f} (min {min(ours):.2f}), ratio to twin median "
            f"{statistics.median(ratios):.3f}, <= twin in {sum(p <= q for p, q in zip(ours, twin))} of {ROUNDS} rounds"
        )
    print(f"{line}; {calls} calls a round")


for name, (python, _) in calls_of.items():
    report("host", name, [python_loop(python(ns)) for ns in NAMESPACES], 2000)
y = torch.empty_like(x)
samples = [torch.ops.ttp_handwritten.launcher_us(x, w, y, 20000) for _ in range(5)]
print(f"[{LABEL}] C++ loop us/call launcher alone: median {statistics.median(samples):.2f}, 20000 calls x 5")
for name, (_, cpp) in calls_of.items():
    report("C++ loop", name, [lambda ns=ns, cpp=cpp: cpp(ns, 20000) for ns in NAMESPACES], 20000)

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
