"""Peer lab: candidate kernel configurations (peers_*.cu, built here with nvcc) timed with the benchmarks' own timers
beside the peers in one process: rms_norm and add_rms_norm vs Liger-Kernel and inductor; pad_to and masked_rows vs a
copy of the same bytes. Prints one line per (case, provider, timer), checks every candidate's output against the
production kernel's (add_rms_norm: against the op's reference). add_rms alone builds only peers_add_rms.cu (or loads
$LAB_ADD_RMS_SO, built beforehand with the same flags and -shared; several, colon-separated, each built from its own
copy of the sources, time a change to the shipped kernel against the one before in one process: from each library
after the first, its shipped-kernel variants only, tagged with the file's stem).

    python scripts/kernel_lab/peers_lab.py [rms] [add_rms] [add_rms_placed] [pad] [placement] [granule] [pad16]
        [masked] [patterns]
    python scripts/kernel_lab/peers_lab.py dump
"""

# ruff: noqa: B023  (the closures are called before the loop moves on)
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import torch

from torchtrt_plugins.benchmarks import common

HERE = Path(__file__).resolve().parent
BUILD = Path(os.environ.get("LAB_BUILD", "/tmp/peers_lab"))
DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.int8: 3, torch.bool: 6, torch.int32: 4}


FLAGS = ["-std=c++17", "-O3", "-arch=sm_90", "-Xcompiler", "-fPIC", "-lineinfo"]
# masked_rows.cu built again with its tuning knobs changed: one library each, loaded side by side (RTLD_LOCAL).
MASKED_BUILDS = {
    "before (tile 32K, unroll 4)": ["-DTTP_MASKED_TILE_BYTES=32768", "-DTTP_MASKED_SHORT_ROWS_UNROLL=4"],
    "tile 32K": ["-DTTP_MASKED_TILE_BYTES=32768"],
    "tile 128K": ["-DTTP_MASKED_TILE_BYTES=131072"],
    "short unroll 4": ["-DTTP_MASKED_SHORT_ROWS_UNROLL=4"],
}


def build() -> ctypes.CDLL:
    BUILD.mkdir(parents=True, exist_ok=True)
    jobs = [
        subprocess.Popen(["nvcc", *FLAGS, "-c", str(HERE / f"{name}.cu"), "-o", str(BUILD / f"{name}.o")])
        for name in ("peers_rms", "peers_pad", "peers_masked")
    ]
    jobs += [
        subprocess.Popen(
            ["nvcc", *FLAGS, *defines, "-shared", str(HERE / "peers_masked.cu"), "-o", str(BUILD / f"masked{i}.so")]
        )
        for i, defines in enumerate(MASKED_BUILDS.values())
    ]
    if any(job.wait() for job in jobs):
        sys.exit("peer lab: nvcc failed")
    objects = [str(BUILD / f"{name}.o") for name in ("peers_rms", "peers_pad", "peers_masked")]
    subprocess.run(["nvcc", "-shared", *objects, "-o", str(BUILD / "peers_lab.so")], check=True)
    lib = ctypes.CDLL(str(BUILD / "peers_lab.so"))
    lib.masked_builds = {"": lib}
    for i, name in enumerate(MASKED_BUILDS):
        lib.masked_builds[name] = ctypes.CDLL(str(BUILD / f"masked{i}.so"))
    p, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    signatures = {
        "lab_rms_name": (ctypes.c_char_p, [i, i, ll]),
        "lab_rms": (i, [i, p, p, p, ll, ll, i, p]),
        "lab_pad_name": (ctypes.c_char_p, [i]),
        "lab_pad": (i, [i, p, p, ll, ll, ll, ll, ll, i, p]),
        "lab_masked_name": (ctypes.c_char_p, [i]),
        "lab_masked": (i, [i, p, p, i, ll, ll, p, p, p, p]),
        "lab_masked_ws": (ll, [ll]),
    }
    for fn, (restype, argtypes) in signatures.items():
        for library in lib.masked_builds.values() if fn.startswith("lab_masked") else (lib,):
            getattr(library, fn).restype = restype
            getattr(library, fn).argtypes = argtypes
    return lib


def build_add_rms() -> dict[str, ctypes.CDLL]:
    """The add_rms lab libraries by tag: "" for the first, "[stem] " for each further one (loaded side by side,
    RTLD_LOCAL)."""
    paths = [so for so in os.environ.get("LAB_ADD_RMS_SO", "").split(":") if so]
    if not paths:
        BUILD.mkdir(parents=True, exist_ok=True)
        paths = [str(BUILD / "peers_add_rms.so")]
        subprocess.run(["nvcc", *FLAGS, "-shared", str(HERE / "peers_add_rms.cu"), "-o", paths[0]], check=True)
    p, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    libs = {}
    for n, so in enumerate(paths):
        lib = ctypes.CDLL(so)
        lib.lab_add_rms_name.restype = ctypes.c_char_p
        lib.lab_add_rms_name.argtypes = [i, i, ll]
        lib.lab_add_rms.restype = i
        lib.lab_add_rms.argtypes = [i, p, p, p, p, p, ll, ll, i, p, p]
        libs[f"[{Path(so).stem}] " if n else ""] = lib
    return libs


def stream() -> ctypes.c_void_p:
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def matches(y: torch.Tensor, expected: torch.Tensor) -> bool:
    """A candidate's output against the reference (or the production kernel's), at the lab's tolerance."""
    return torch.allclose(y.float(), expected.float(), atol=2e-2, rtol=2e-2)


def add_rms_peers(case, before_each=lambda: None) -> dict:
    """The add_rms_norm benchmark's own providers (inductor, Liger as its API runs it, our op) on `case`, calling
    `before_each()` before making each (a placement's spacer)."""
    from torchtrt_plugins.benchmarks import bench_add_rms_norm as bench

    peers = {}
    factories = {"torch.compile": bench.inductor, "liger": bench.liger, "torchtrt op": bench.torchtrt_op}
    for name, factory in factories.items():
        before_each()
        peers[name] = factory(case)
    return peers


def ptr(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def line(case: str, name: str, timer: str, t: common.Timing, copy: common.Timing, note: str = "") -> None:
    pct = 100 * copy.median_ms / t.median_ms
    print(f"{case:34s} {name:36s} {timer:8s} {t.median_ms * 1e3:9.3f} us  {pct:6.1f}% of copy  {note}", flush=True)


def timers(fn, timer_names):
    for timer in timer_names:
        yield timer, (common.time_cuda_graph(fn) if timer == "graph" else common.time_cuda(fn))


ROUNDS = 3


def race(case: str, entries: dict, timer_names, copy_fn, notes: dict | None = None) -> None:
    """Times every entry ROUNDS times per timer, in an order rotated each round (the first timed after a change of
    workload was seen to run slow), and prints the median of the rounds' medians with their range."""
    names = list(entries)
    for timer in timer_names:
        samples: dict[str, list[float]] = {name: [] for name in ["copy", *names]}
        for r in range(ROUNDS):
            order = ["copy", *names[r % len(names) :], *names[: r % len(names)]]
            for name in order:
                fn = copy_fn if name == "copy" else entries[name]
                _, t = next(timers(fn, (timer,)))
                samples[name].append(t.median_ms)
        copy = sorted(samples["copy"])[ROUNDS // 2]
        for name in ["copy", *names]:
            ms = sorted(samples[name])
            pct = 100 * copy / ms[ROUNDS // 2]
            print(
                f"{case:34s} {name:40s} {timer:8s} {ms[ROUNDS // 2] * 1e3:9.3f} us ({ms[0] * 1e3:.3f}-"
                f"{ms[-1] * 1e3:.3f})  {pct:6.1f}% of copy  {(notes or {}).get(name, '')}",
                flush=True,
            )


def rms_cases(lib: ctypes.CDLL) -> None:
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    import torchtrt_plugins

    reference = torchtrt_plugins.get("rms_norm").reference
    eps = 1e-6
    shapes = [
        (1, 4096, torch.bfloat16, ("graph",)),
        (128, 4096, torch.bfloat16, ("graph", "do_bench")),
        (1024, 2048, torch.bfloat16, ("graph",)),
        (100000, 128, torch.bfloat16, ("graph", "do_bench")),
        (4096, 4096, torch.float32, ("graph", "do_bench")),
        (4096, 4096, torch.bfloat16, ("graph", "do_bench")),
        (4096, 12288, torch.bfloat16, ("graph", "do_bench")),
        (65536, 4096, torch.bfloat16, ("graph", "do_bench")),
    ]
    for rows, hidden, dtype, timer_names in shapes:
        torch._dynamo.reset()
        case = f"rms_norm {rows}x{hidden} {str(dtype)[6:]}"
        x = torch.randn(rows, hidden, dtype=dtype, device="cuda")
        w = torch.rand(hidden, dtype=dtype, device="cuda") + 0.5
        nbytes = (2 * x.numel() + w.numel()) * x.element_size()
        copy_fn = common.copy_fn(nbytes, x.device)
        compiled = common.compile_inductor(reference)
        entries = {
            "torch.compile": lambda: compiled(x, w, eps),
            "liger": lambda: LigerRMSNormFunction.apply(x, w, eps, 0.0, "gemma", False),
        }
        expected = reference(x, w, eps)
        notes = {}
        for label, v in variant_index(lib.lab_rms_name, DTYPES[dtype], hidden).items():
            # A new output each call, as the op and the peers allocate theirs (in a CUDA graph: one per call).
            def call(v=v, label=label):
                y = torch.empty_like(x)
                err = lib.lab_rms(v, ptr(x), ptr(w), ptr(y), rows, hidden, DTYPES[dtype], stream())
                if err:
                    raise RuntimeError(f"{label}: CUDA error {err}")
                return y

            y = call()
            torch.cuda.synchronize()
            if not matches(y, expected):
                notes[label] = f"WRONG max err {(y.float() - expected.float()).abs().max().item():.3g}"
            entries[label] = call
        for fn in entries.values():
            fn()
        race(case, entries, timer_names, copy_fn, notes)


NEW_SUM = " (sum to a new tensor)"


def add_variant(entries, notes, lib, label, v, new_sum, case, expected_y, counter) -> None:
    """Adds lab variant `v` of `lib` to `entries` as `label`, updating a residual of its own in place (new_sum: writing
    the sum to a new tensor), noted WRONG in `notes` unless it matches the reference first."""
    x, residual0, weight = case.inputs
    rows, hidden = x.shape
    dtype = x.dtype
    own = residual0.clone()

    def call(r=own):
        y = torch.empty_like(x)
        ro = torch.empty_like(r) if new_sum else r
        err = lib.lab_add_rms(
            v, ptr(x), ptr(r), ptr(weight), ptr(ro), ptr(y), rows, hidden, DTYPES[dtype], ptr(counter), stream()
        )
        if err:
            raise RuntimeError(f"{label}: CUDA error {err}")
        return y, ro

    key = label + (NEW_SUM if new_sum else "")
    y, ro = call(r=residual0.clone())
    torch.cuda.synchronize()
    if not torch.equal(ro, residual0 + x) or not matches(y, expected_y):
        notes[key] = "WRONG"
    entries[key] = call


def add_rms_cases(libs: dict[str, ctypes.CDLL], shapes) -> None:
    """The benchmark's own providers (inductor, Liger, our op) beside the lab's launches, each updating a residual of
    its own in place; "(sum to a new tensor)" writes the sum elsewhere, as Liger does."""
    from torchtrt_plugins.benchmarks import bench_add_rms_norm as bench

    for rows, hidden, dtype in shapes:
        torch._dynamo.reset()
        case = bench.make_case((rows, hidden), dtype, torch.device("cuda"))
        x, residual0, weight = case.inputs
        name = f"add_rms_norm {rows}x{hidden} {str(dtype)[6:]}"
        entries = add_rms_peers(case)
        expected_y = bench.expected(case)
        counter = torch.zeros(2, dtype=torch.int32, device="cuda")
        notes = {}
        for tag, lib in libs.items():
            for label, v in variant_index(lib.lab_add_rms_name, DTYPES[dtype], hidden).items():
                if tag and not label.startswith(("production", "cfg")):
                    continue
                for new_sum in (False, True) if v == 0 and not tag else (False,):
                    add_variant(entries, notes, lib, tag + label, v, new_sum, case, expected_y, counter)
        if os.environ.get("ADD_RMS_NEXT") == "gemm":
            # Each call followed by a GEMM that reads its y and a weight that fits the L2 (what the next layer does):
            # shows what the call's cache hints leave the next kernel.
            wt = torch.randn(hidden, 1024 if dtype != torch.float32 else 128, dtype=dtype, device="cuda")
            y0 = torch.randn_like(x)

            def then_gemm(fn):
                def call():
                    out = fn()
                    return torch.mm(out[0] if isinstance(out, (tuple, list)) else out, wt)

                return call

            entries = {"gemm alone": lambda: torch.mm(y0, wt)} | {k: then_gemm(f) for k, f in entries.items()}
            name += " + gemm"
        for fn in entries.values():
            fn()
        race(name, entries, ("graph",), common.copy_fn(case.nbytes, x.device), notes)


def liger_in_place(case):
    """Liger's fused add + RMSNorm kernel launched as its Python wrapper launches it, but writing the sum over the
    residual (Liger's API writes it to a new tensor; our op updates the residual in place)."""
    from liger_kernel.ops.fused_add_rms_norm import _fused_add_rms_norm_forward_kernel as kernel
    from liger_kernel.ops.utils import calculate_settings

    from torchtrt_plugins.benchmarks import bench_add_rms_norm as bench

    x, residual, weight = case.inputs
    r = residual.clone()
    rows, hidden = x.shape
    block, warps = calculate_settings(hidden)
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    gemma = 1

    def call():
        y = torch.empty_like(x)
        kernel[(rows,)](
            y, y.stride(0), r, r.stride(0), x, x.stride(0), r, r.stride(0), weight, weight.stride(0), rstd,
            rstd.stride(0), hidden, bench.EPS, 0.0, gemma, BLOCK_SIZE=block, num_warps=warps, num_stages=2,
        )  # fmt: skip
        return y

    return call


def add_rms_placed_cases(libs: dict[str, ctypes.CDLL], shapes, placements: int) -> None:
    """Inductor, Liger (as its API runs it, and writing the sum in place) and our op beside each library's production
    launcher (and the first library's variants named in $ADD_RMS_VARIANTS, comma-separated, each writing the sum to a
    new tensor where its name ends so), on `placements` placements of their buffers: speeds against our op. A variant
    whose output is wrong is reported and left out."""
    import dataclasses

    from torchtrt_plugins.benchmarks import bench_add_rms_norm as bench

    extra = [n for n in os.environ.get("ADD_RMS_VARIANTS", "").split(",") if n]
    for rows, hidden, dtype in shapes:
        counter = torch.zeros(2, dtype=torch.int32, device="cuda")

        def make_calls(spacer, rows=rows, hidden=hidden, dtype=dtype):
            torch._dynamo.reset()  # a new placement compiles inductor's kernel again (the last one is done)
            case = bench.make_case((rows, hidden), dtype, torch.device("cuda"))
            inputs = []
            for t in case.inputs:
                spacer()
                inputs.append(t.clone())
            case = dataclasses.replace(case, inputs=tuple(inputs))
            expected_y = bench.expected(case)
            calls, notes = add_rms_peers(case, spacer), {}
            spacer()
            calls["liger (sum in place)"] = liger_in_place(case)
            y = calls["liger (sum in place)"]()
            if not matches(y, expected_y):
                sys.exit(f"add_rms_placed: liger (sum in place) WRONG at {rows}x{hidden} {dtype}")
            for tag, lib in libs.items():
                index = variant_index(lib.lab_add_rms_name, DTYPES[dtype], hidden)
                for label in ["production addRmsNorm()", *(extra if not tag else ())]:
                    variant = label.removesuffix(NEW_SUM)
                    if variant in index:
                        spacer()
                        add_variant(
                            calls,
                            notes,
                            lib,
                            tag + variant,
                            index[variant],
                            label != variant,
                            case,
                            expected_y,
                            counter,
                        )
            for label in notes:  # a wrong lab variant is dropped (on every placement: it is wrong on each)
                print(f"add_rms_placed: {label} WRONG at {rows}x{hidden} {dtype}: not timed", flush=True)
                del calls[label]
            return calls

        case = f"placed add_rms_norm {rows}x{hidden} {str(dtype)[6:]}"
        race_on_placements(case, make_calls, "torchtrt op", placements, seed=0, timer_names=("graph",))


def pad_cases(lib: ctypes.CDLL) -> None:
    shapes = [
        (8 * 64, 256, 256, 224, 224, torch.int8),
        (8 * 64, 224, 224, 256, 256, torch.int8),
        (8 * 64, 256, 256, 224, 224, torch.bfloat16),
        (16 * 32, 512, 512, 480, 544, torch.int8),
    ]
    for planes, h, w, oh, ow, dtype in shapes:
        case = f"pad_to {planes}x{h}x{w}->{oh}x{ow} {str(dtype)[6:]}"
        x = torch.randint(-100, 100, (planes, h, w), device="cuda").to(dtype)
        nbytes = (planes * min(h, oh) * min(w, ow) + planes * oh * ow) * x.element_size()
        copy_fn = common.copy_fn(nbytes, x.device)
        entries, notes = {}, {}
        expected = None
        for name, v in variant_index(lib.lab_pad_name).items():

            def call(v=v):
                y = torch.empty(planes, oh, ow, dtype=dtype, device="cuda")
                err = lib.lab_pad(v, ptr(x), ptr(y), planes, h, w, oh, ow, DTYPES[dtype], stream())
                if err:
                    raise RuntimeError(f"pad variant {v}: CUDA error {err}")
                return y

            y = call()
            expected = y if expected is None else expected
            if not torch.equal(y, expected):
                notes[name] = "WRONG"
            entries[name] = call
        race(case, entries, ("graph", "do_bench"), copy_fn, notes)


def masked_inputs(rows: int, row_elements: int, dtype: torch.dtype, pattern: str):
    x = torch.randn(rows, row_elements, device="cuda").to(dtype)
    g = torch.Generator(device="cuda").manual_seed(0)
    if pattern == "random":
        mask = torch.rand(rows, generator=g, device="cuda") < 0.5
    elif pattern == "pairs":  # rows 2k and 2k+1 together: kept bytes come in aligned 64-byte pieces
        mask = (torch.rand((rows + 1) // 2, generator=g, device="cuda") < 0.5).repeat_interleave(2)[:rows]
    elif pattern == "quads":
        mask = (torch.rand((rows + 3) // 4, generator=g, device="cuda") < 0.5).repeat_interleave(4)[:rows]
    elif pattern == "half":  # the first half: one contiguous run
        mask = torch.arange(rows, device="cuda") < rows // 2
    else:
        mask = torch.ones(rows, dtype=torch.bool, device="cuda")
    return x, mask


def masked_cases(lib: ctypes.CDLL, patterns: bool) -> None:
    shapes = [
        (10000000, 8, torch.bfloat16),
        (4000000, 16, torch.bfloat16),
        (10000000, 8, torch.float32),
        (4000000, 16, torch.float32),
        (1000000, 64, torch.bfloat16),
        (1000000, 64, torch.float32),
        (10000000, 1, torch.float32),
    ]
    runs = [(s, "random") for s in shapes]
    if patterns:
        runs += [(shapes[0], p) for p in ("pairs", "quads", "half", "all")]
    for (rows, row_elements, dtype), pattern in runs:
        x, mask_bool = masked_inputs(rows, row_elements, dtype, pattern)
        kept = int(mask_bool.sum())
        row_bytes = row_elements * x.element_size()
        ws = torch.empty(lib.lab_masked_ws(rows), dtype=torch.uint8, device="cuda")
        count = torch.zeros(1, dtype=torch.int32, device="cuda")
        y = torch.empty_like(x)
        expected = x[mask_bool]
        for mask in (mask_bool.to(torch.int32), mask_bool):
            mb = mask.element_size()
            nbytes = rows * mb + 2 * kept * row_bytes
            case = f"masked {rows}x{row_bytes}B {pattern} mask {str(mask.dtype)[6:]}"
            copy_fn = common.copy_fn(nbytes, x.device)
            for timer in ("do_bench", "graph"):
                copy = common.time_cuda_graph(copy_fn) if timer == "graph" else common.time_cuda(copy_fn)
                for build_name, library in lib.masked_builds.items():
                    # The other builds: the plugin's sequence (count+scatter pdl) and the scatter alone.
                    variants = range(4) if not build_name else (1, 3) if pattern == "random" else ()
                    for v in variants:
                        name = f"{build_name + ': ' if build_name else ''}{library.lab_masked_name(v).decode()}"

                        def launch(v, mask=mask, library=library):
                            return library.lab_masked(
                                v,
                                ptr(x),
                                ptr(mask),
                                DTYPES[mask.dtype],
                                rows,
                                row_bytes,
                                ptr(ws),
                                ptr(count),
                                ptr(y),
                                stream(),
                            )

                        def call(v=v, launch=launch, name=name):
                            if err := launch(v):
                                raise RuntimeError(f"masked variant {name}: CUDA error {err}")

                        y.zero_()
                        launch(0)
                        call()
                        torch.cuda.synchronize()
                        ok = int(count.item()) == kept and torch.equal(y[:kept], expected)
                        _, t = next(timers(call, (timer,)))
                        line(case, name, timer, t, copy, f"{nbytes / 1e6:.1f} MB" + ("" if ok else " WRONG"))


def granule_cases(lib: ctypes.CDLL) -> None:
    """Which piece does DRAM read? Crops of int8 rows of 256 bytes to widths of 192-256 bytes (always whole 32-byte
    sectors, not always whole 64-byte pieces): the production launcher's speed against a copy of the bytes it counts."""
    for dtype in (torch.int8, torch.bfloat16):
        for ow in (192, 208, 224, 240, 256):
            planes, h, w, oh = 512, 256, 256, 224
            case = f"pad_to {planes}x{h}x{w}->{oh}x{ow} {str(dtype)[6:]}"
            x = torch.randint(-100, 100, (planes, h, w), device="cuda").to(dtype)
            nbytes = (planes * min(h, oh) * min(w, ow) + planes * oh * ow) * x.element_size()

            def call(x=x, ow=ow, dtype=dtype):
                y = torch.empty(planes, oh, ow, dtype=dtype, device="cuda")
                lib.lab_pad(0, ptr(x), ptr(y), planes, h, w, oh, ow, DTYPES[dtype], stream())
                return y

            race(case, {"production padTo()": call}, ("graph", "do_bench"), common.copy_fn(nbytes, x.device))


def variant_index(name_fn, *args) -> dict[str, int]:
    """A lab library's variants by name: `name_fn(v, *args)` for v = 0, 1, ... until None; an empty name is a variant
    that does not apply to these arguments."""
    index = {}
    v = 0
    while (name := name_fn(v, *args)) is not None:
        if name:
            index[name.decode()] = v
        v += 1
    return index


def race_on_placements(
    case: str, make_calls, baseline: str, placements: int, seed: int, timer_names=("graph", "do_bench")
) -> None:
    """The same kernels on several placements of their buffers in memory: `make_calls(spacer)` allocates one set of
    buffers, calling `spacer()` between them (a free block of a random size), and returns {name: call}. The timers saw
    one kernel's time shift by up to 8% with where its buffers lie, more than the differences between candidates, so
    candidates are compared placement by placement (two rounds per timer in rotated order, the faster kept), as
    speed ratios against `baseline`, then summarised over the placements."""
    import random

    rng = random.Random(seed)
    keep: list = []

    def spacer() -> None:
        keep.append(torch.empty(rng.randint(1, 64) << 20, dtype=torch.uint8, device="cuda"))

    ratios: dict[tuple[str, str], list[float]] = {}
    for placement in range(placements):
        spacer()
        calls = make_calls(spacer)
        keep.append(calls)
        names = list(calls)
        for fn in calls.values():
            fn()
        for timer in timer_names:
            times: dict[str, list[float]] = {}
            for r in range(2):
                for n in names[r % len(names) :] + names[: r % len(names)]:
                    _, t = next(timers(calls[n], (timer,)))
                    times.setdefault(n, []).append(t.median_ms)
            base = min(times[baseline])
            cells = "  ".join(f"{n}: {min(ts) * 1e3:8.3f} us ({base / min(ts):5.3f})" for n, ts in times.items())
            print(f"{case:34s} placement {placement} {timer:8s} {cells}", flush=True)
            for n, ts in times.items():
                ratios.setdefault((timer, n), []).append(base / min(ts))
    for (timer, n), rs in ratios.items():
        rs.sort()
        print(
            f"{case:34s} SUMMARY {timer:8s} {n:36s} speed vs {baseline}: median {rs[len(rs) // 2]:.3f} "
            f"min {rs[0]:.3f} max {rs[-1]:.3f} over {len(rs)} placements",
            flush=True,
        )


def pad_calls(lib: ctypes.CDLL, names, planes: int, h: int, w: int, oh: int, ow: int, dtype: torch.dtype, peers=None):
    """make_calls for race_on_placements: the named pad_to lab variants writing one y, each checked against the
    reference once (a wrong candidate stops the lab), after `peers(x)`'s calls on the same x."""
    from torchtrt_plugins.ops.pad_to import reference

    index = variant_index(lib.lab_pad_name)

    def make_calls(spacer):
        x = torch.randint(-100, 100, (planes, h, w), device="cuda").to(dtype)
        spacer()
        y = torch.empty(planes, oh, ow, dtype=dtype, device="cuda")
        expected = reference(x.view(8, planes // 8, h, w), oh, ow, 0.0).view(planes, oh, ow)
        calls = peers(x) if peers else {}
        for n in names:

            def call(v=index[n], x=x, y=y):
                if err := lib.lab_pad(v, ptr(x), ptr(y), planes, h, w, oh, ow, DTYPES[dtype], stream()):
                    raise RuntimeError(f"pad variant {n}: CUDA error {err}")

            y.fill_(7)
            call()
            if not torch.equal(y, expected):
                sys.exit(f"pad variant {n}: WRONG output for {planes}x{h}x{w}->{oh}x{ow} {dtype}")
            calls[n] = call
        return calls

    return make_calls


def pad16_cases(lib: ctypes.CDLL) -> None:
    """pad_to candidates (structure, block size, load path), each on the same buffers, on four placements, beside
    inductor's kernel on the same x (which allocates its own y)."""
    from torchtrt_plugins.ops.pad_to import reference

    names = [
        "production padTo()",
        "ld=D st=D B=512",
        "ld=D st=D B=1024",
        "rows B=512",
        "rows B=1024",
        "rows B=512 ld=EF",
        "ld=EF st=D B=1024",
    ]
    for (h, w, oh, ow), dtype in (
        ((224, 224, 256, 256), torch.bfloat16),
        ((256, 256, 224, 224), torch.bfloat16),
        ((512, 512, 480, 544), torch.bfloat16),
        ((224, 224, 256, 256), torch.int8),
        ((256, 256, 224, 224), torch.int8),
        ((224, 224, 256, 256), torch.float32),
    ):
        planes = 512
        compiled = common.compile_inductor(reference)

        def inductor(x, compiled=compiled, h=h, w=w, oh=oh, ow=ow):
            x4 = x.view(8, planes // 8, h, w)
            return {"inductor": lambda: compiled(x4, oh, ow, 0.0)}

        case = f"pad16 {planes}x{h}x{w}->{oh}x{ow} {str(dtype)[6:]}"
        make_calls = pad_calls(lib, names, planes, h, w, oh, ow, dtype, peers=inductor)
        race_on_placements(case, make_calls, "production padTo()", placements=4, seed=1)


def placement_cases(lib: ctypes.CDLL) -> None:
    """rms_norm's row kernel against the block kernel, and pad_to's L2 priorities, each on six placements."""
    rms = [
        (4096, 4096, dt, names)
        for dt, names in (
            (torch.float32, ("block C=8 B=128 pf=true ld=D st=D", "row C=4 B=256 pdl=true")),
            (torch.bfloat16, ("block C=4 B=128 pf=true ld=D st=D", "row C=2 B=256 pdl=true")),
        )
    ]
    for rows, hidden, dtype, names in rms:
        index = variant_index(lib.lab_rms_name, DTYPES[dtype], hidden)

        def make_calls(spacer, rows=rows, hidden=hidden, dtype=dtype, names=names, index=index):
            x = torch.randn(rows, hidden, device="cuda").to(dtype)
            spacer()
            w_ = torch.rand(hidden, device="cuda").to(dtype) + 0.5
            y = torch.empty_like(x)
            return {
                n: lambda v=index[n]: lib.lab_rms(v, ptr(x), ptr(w_), ptr(y), rows, hidden, DTYPES[dtype], stream())
                for n in names
            }

        case = f"placed rms_norm {rows}x{hidden} {str(dtype)[6:]}"
        race_on_placements(case, make_calls, names[0], placements=6, seed=0)
    for (h, w, oh, ow), dtype in (
        ((256, 256, 224, 224), torch.int8),
        ((256, 256, 224, 224), torch.bfloat16),
        ((224, 224, 256, 256), torch.int8),
        ((224, 224, 256, 256), torch.bfloat16),
    ):
        names = ("production padTo()", "ld=D st=EF", "ld=EF st=D", "ld=EF st=EF")
        case = f"placed pad_to 512x{h}x{w}->{oh}x{ow} {str(dtype)[6:]}"
        race_on_placements(case, pad_calls(lib, names, 512, h, w, oh, ow, dtype), names[0], placements=6, seed=0)


def dump_inductor() -> None:
    """Inductor's generated code for the rms_norm reference at 1x4096 and 100000x128 bf16 (on stderr)."""
    import torchtrt_plugins

    reference = torchtrt_plugins.get("rms_norm").reference
    torch._logging.set_logs(output_code=True)
    for rows, hidden in ((1, 4096), (100000, 128)):
        torch._dynamo.reset()
        x = torch.randn(rows, hidden, dtype=torch.bfloat16, device="cuda")
        w = torch.rand(hidden, dtype=torch.bfloat16, device="cuda")
        torch.compile(reference, dynamic=False)(x, w, 1e-6)
    torch._logging.set_logs(output_code=False)


def main() -> None:
    what = set(sys.argv[1:]) or {"rms", "pad", "masked", "patterns"}
    if "dump" in what:
        dump_inductor()
        return
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    if what & {"add_rms", "add_rms_placed"}:
        # ADD_RMS_SHAPES (e.g. "4096x12288,4096x4096") and ADD_RMS_DTYPES (e.g. "bf16,fp32") narrow the run.
        sizes = os.environ.get("ADD_RMS_SHAPES", "4096x12288,2048x12288,4096x4096").split(",")
        shapes = [
            (*map(int, size.split("x")), common.DTYPE_NAMES[dtype])
            for size in sizes
            for dtype in os.environ.get("ADD_RMS_DTYPES", "bf16,fp16,fp32").split(",")
        ]
        if "add_rms" in what:
            add_rms_cases(build_add_rms(), shapes)
        if "add_rms_placed" in what:
            add_rms_placed_cases(build_add_rms(), shapes, int(os.environ.get("ADD_RMS_PLACEMENTS", "8")))
        if what <= {"add_rms", "add_rms_placed"}:
            return
    lib = build()
    if "rms" in what:
        rms_cases(lib)
    if "pad" in what:
        pad_cases(lib)
    if "pad16" in what:
        pad16_cases(lib)
    if "granule" in what:
        granule_cases(lib)
    if "placement" in what:
        placement_cases(lib)
    if "masked" in what or "patterns" in what:
        masked_cases(lib, "patterns" in what)


if __name__ == "__main__":
    main()
