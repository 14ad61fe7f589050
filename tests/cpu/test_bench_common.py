"""torchtrt_plugins/benchmarks/common.py: statistics, bandwidth math, CSV format, provider skips and errors, plots."""

import csv
import dataclasses
import importlib
import importlib.util
import random
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import torchtrt_plugins
from torchtrt_plugins import cli

common = cli.import_benchmarks()
REPO = Path(__file__).resolve().parents[2]
#: Whether the package under test is this checkout's (CI also runs these tests against the installed wheel).
FROM_CHECKOUT = Path(torchtrt_plugins.__file__).resolve().parents[1] == REPO


# ------------------------------------------------------------------------------------------ statistics


@pytest.mark.parametrize("n", [1, 2, 7, 100])
def test_percentile_matches_numpy_linear(n):
    rng = random.Random(n)
    values = [rng.uniform(0.01, 5.0) for _ in range(n)]
    for q in (0.0, 0.2, 0.5, 0.8, 1.0):
        assert common.percentile(values, q) == pytest.approx(float(np.percentile(values, q * 100)))


def test_percentile_rejects_nonsense():
    with pytest.raises(ValueError, match="no values"):
        common.percentile([], 0.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        common.percentile([1.0], 50)


def test_summarize_is_median_p20_p80():
    timing = common.summarize([float(v) for v in range(10, 0, -1)])  # unsorted on purpose
    assert (timing.median_ms, timing.p20_ms, timing.p80_ms) == pytest.approx((5.5, 2.8, 8.2))


def test_bandwidth_and_pct_of_copy():
    assert common.gbps(2_000_000_000, 1000.0) == pytest.approx(2.0)
    assert common.gbps(None, 1.0) is None and common.gbps(10, None) is None and common.gbps(10, 0.0) is None
    # Same bytes: twice the copy's time is half its bandwidth.
    assert common.pct_of_copy(op_ms=2.0, copy_ms=1.0) == pytest.approx(50.0)
    assert common.pct_of_copy(None, 1.0) is None and common.pct_of_copy(1.0, None) is None


def test_time_cpu_returns_ordered_quantiles():
    timing = common.time_cpu(lambda: sum(range(100)), warmup_ms=1, rep_ms=2)
    assert 0 < timing.p20_ms <= timing.median_ms <= timing.p80_ms


def test_time_host_gives_a_slow_call_fewer_calls_a_sample():
    # A call of 10 ms: about 50 ms a sample, not 200 calls (2 s) a sample, and still its own time per call.
    calls = []

    def slow():
        calls.append(time.sleep(0.01))

    timing = common.time_host(slow, torch.device("cpu"), samples=3)
    assert len(calls) <= 40
    assert 9.5 <= timing.median_ms <= 40
    fast = []
    common.time_host(lambda: fast.append(None), torch.device("cpu"), samples=3)
    assert len(fast) == 20 + 3 * common.HOST_CALLS  # a fast call keeps the full count


def test_parse_dtypes_and_shapes():
    assert common.parse_dtypes("bf16, fp16,float32,bf16") == (torch.bfloat16, torch.float16, torch.float32)
    assert common.parse_dtypes("") is None and common.parse_dtypes(None) is None
    with pytest.raises(ValueError, match="unknown dtype 'int3'"):
        common.parse_dtypes("int3")
    assert common.format_shape((32768, 16384)) == "32768x16384"
    assert common.parse_shape("8x512x2048") == (8, 512, 2048)


# ------------------------------------------------------------------------------------------ CSV


def _env(timestamp="2026-01-01T00:00:00+00:00"):
    return common.Environment("cuda", "NVIDIA H100 80GB HBM3", "2.11.0", "12.8", "10.13.0", timestamp, "0123abcd4567")


def _results():
    timing = common.Timing(0.5, 0.4, 0.6)
    return [
        common.Result(
            "rms_norm",
            "copy",
            "4096x4096",
            "bfloat16",
            "cuda",
            "ok",
            timing=common.Timing(0.25, 0.2, 0.3),
            nbytes=64 << 20,
            copy_ms=0.25,
        ),
        common.Result(
            "rms_norm", "torchtrt", "4096x4096", "bfloat16", "cuda", "ok", timing=timing, nbytes=64 << 20, copy_ms=0.25
        ),
        common.Result("decoder_block", "eager", "1x128x2048", "bfloat16", "cuda", "ok", timing=timing),
        common.Result("rms_norm", "tensorrt[plugin]", "4096x4096", "bfloat16", "cuda", "skipped", "no TensorRT"),
        common.Result(
            "rms_norm",
            "F.rms_norm",
            "4096x4096",
            "bfloat16",
            "cuda",
            "mismatch",
            "differs",
            timing=timing,
            nbytes=64 << 20,
            copy_ms=0.25,
        ),
    ]


def test_csv_columns_values_and_append(tmp_path):
    path = tmp_path / "out" / "results.csv"
    common.write_results(_results(), _env(), path)
    common.write_results(_results()[:1], _env("2026-01-02T00:00:00+00:00"), path)
    with open(path, newline="") as handle:
        lines = list(csv.reader(handle))
    assert (
        tuple(lines[0])
        == common.COLUMNS
        == (
            "op",
            "provider",
            "shape",
            "dtype",
            "median_ms",
            "p20_ms",
            "p80_ms",
            "gbps",
            "pct_of_copy",
            "gpu",
            "torch",
            "cuda",
            "tensorrt",
            "timestamp",
            "timer",
            "repeats",
            "placements",
            "commit",
        )
    )
    assert sum(1 for line in lines if line[0] == "op") == 1  # header written once
    rows = common.read_results(path)
    assert len(rows) == 5  # 4 timed in the first run (the skipped one is not a row) + 1
    ours = next(r for r in rows if r["provider"] == "torchtrt")
    assert ours["median_ms"] == "0.5" and ours["p20_ms"] == "0.4" and ours["p80_ms"] == "0.6"
    assert float(ours["gbps"]) == pytest.approx((64 << 20) / 0.5e-3 / 1e9, abs=0.01)
    assert ours["pct_of_copy"] == "50.0"
    assert (ours["gpu"], ours["torch"], ours["cuda"], ours["tensorrt"]) == (
        "NVIDIA H100 80GB HBM3",
        "2.11.0",
        "12.8",
        "10.13.0",
    )
    assert ours["commit"] == "0123abcd4567"
    model = next(r for r in rows if r["op"] == "decoder_block")
    assert model["gbps"] == "" and model["pct_of_copy"] == ""  # not memory-bound
    with open(path.with_name(common.NOT_RUN_FILE), newline="") as handle:
        not_run = list(csv.DictReader(handle))
    assert [(r["provider"], r["status"], r["reason"]) for r in not_run] == [
        ("tensorrt[plugin]", "skipped", "no TensorRT"),
        ("F.rms_norm", "mismatch", "differs"),
    ]


def test_csv_refuses_a_file_with_other_columns(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="has columns"):
        common.write_results(_results(), _env(), path)
    with pytest.raises(ValueError, match="not a results CSV"):
        common.read_results(path)


# ------------------------------------------------------------------------------------------ providers


def _make_case(shape, dtype, device):
    x = torch.full(shape, 2.0, dtype=dtype, device=device)
    return common.Case("double", shape, dtype, device, (x,), {}, nbytes=2 * x.numel() * x.element_size())


def _skip(case):
    raise common.Skip("hidden size not supported by this provider")


def _boom(case):
    raise RuntimeError("kernel launch failed\nsecond line")


def _synthetic():
    plan = common.Plan(((4, 8), (2, 16)), (torch.float32,))
    return common.Benchmark(
        name="double",
        make_case=_make_case,
        providers=[
            common.Provider("good", lambda case: lambda: case.inputs[0] * 2),
            common.Provider("gpu_only", lambda case: lambda: case.inputs[0] * 2, (common.needs_cuda,)),
            common.Provider("skips", _skip),
            common.Provider("raises", _boom),
            common.Provider("wrong", lambda case: lambda: case.inputs[0] * 3),
        ],
        full=plan,
        quick=plan,
        cpu=plan,
        cpu_quick=common.Plan(((4, 8),), (torch.float32,)),
        expected=lambda case: case.inputs[0] * 2,
    )


def test_every_provider_is_reported_never_dropped():
    benchmark = _synthetic()
    ctx = common.RunContext(torch.device("cpu"), quick=True)
    progress = common.Progress(common.count_runs(benchmark, ctx, None, None), enabled=False)
    results = common.run(benchmark, ctx, progress=progress)
    assert progress.done == progress.total == len(results) == 6  # one case: copy + five providers
    by_name = {r.provider: r for r in results}
    assert by_name["copy"].status == "ok" and by_name["copy"].pct_of_copy == pytest.approx(100.0)
    assert by_name["good"].status == "ok" and by_name["good"].timing is not None
    assert by_name["good"].gbps is not None and by_name["good"].pct_of_copy is not None
    assert (by_name["gpu_only"].status, by_name["gpu_only"].reason) == (
        "skipped",
        "needs a CUDA GPU (this run is on CPU)",
    )
    assert (by_name["skips"].status, by_name["skips"].reason) == (
        "skipped",
        "hidden size not supported by this provider",
    )
    assert by_name["raises"].status == "error" and by_name["raises"].reason == "RuntimeError: kernel launch failed"
    assert by_name["wrong"].status == "mismatch" and "differs from the reference" in by_name["wrong"].reason
    assert by_name["wrong"].timing is not None  # timed all the same, flagged
    table, not_run = common.format_table(results), common.format_not_run(results)
    assert "double  float32  4x8  device=cpu" in table and "MISMATCH" in table
    for name in ("gpu_only", "skips", "raises"):
        assert name in not_run


def test_provider_filter_uses_globs():
    benchmark = _synthetic()
    assert [p.name for p in common.select_providers(benchmark, ["g*"])] == ["good", "gpu_only"]
    with pytest.raises(ValueError, match="match no provider"):
        common.run_suite([benchmark], device="cpu", providers=["nothing*"], show_progress=False)


def test_rms_norm_providers_say_why_they_cannot_run_on_cpu():
    bench = importlib.import_module("torchtrt_plugins.benchmarks.bench_rms_norm")
    ctx = common.RunContext(torch.device("cpu"), quick=True)
    reasons = {p.name: common.unmet(p.requires, ctx) for p in bench.BENCHMARK.providers}
    assert reasons["eager_composite"] is None and reasons["F.rms_norm"] is None and reasons["torchtrt"] is None
    assert "--quick" in reasons["torch.compile"]
    for tactic in torchtrt_plugins.get("rms_norm").spec.tactics:
        assert "CUDA GPU" in reasons[f"torchtrt[{tactic.name}]"]
        assert "CUDA GPU" in reasons[f"plugin_enqueue[{tactic.name}]"]
    if common.harness_hook() is None:
        assert "harness not available" in reasons["plugin_enqueue"]
    if common.needs_tensorrt(ctx):
        assert "torch_tensorrt" in reasons["tensorrt[plugin]"] or "tensorrt" in reasons["tensorrt[plugin]"]
    assert "CUDA GPU" in reasons["tensorrt[composite]"]


def test_harness_provider_calls_the_hook_with_op_inputs_fields_tactic(monkeypatch):
    calls = _fake_harness(monkeypatch)
    entry = torchtrt_plugins.get("rms_norm")
    providers = common.plugin_enqueue_providers(entry)
    assert [p.name for p in providers] == ["plugin_enqueue"] + [f"plugin_enqueue[{t.name}]" for t in entry.spec.tactics]
    x, weight = torch.ones(2, 8), torch.ones(8)
    case = common.Case("rms_norm", (2, 8), torch.float32, torch.device("cpu"), (x, weight), {"eps": 1e-5})
    for provider in providers:
        assert common.needs_harness(common.RunContext(torch.device("cpu"))) is None
        assert provider.measure(case).median_ms == 3.0
    assert [c[0] for c in calls] == ["rms_norm"] * len(providers)
    assert all(c[1][0] is x and c[1][1] is weight and c[2] == {"eps": 1e-5, "weight_offset": 0.0} for c in calls)
    assert [c[3] for c in calls] == [0] + [t.value for t in entry.spec.tactics]


def test_plugin_fields_default_from_the_spec():
    spec = torchtrt_plugins.get("rms_norm").spec
    case = common.Case("rms_norm", (1, 1), torch.float32, torch.device("cpu"), ())
    assert common.plugin_fields(spec, case) == {"eps": 1e-6, "weight_offset": 0.0}


@pytest.mark.parametrize("op", ["pad_to", "masked_rows"])
def test_new_op_providers_say_why_they_cannot_run_on_cpu(op):
    bench = importlib.import_module(f"torchtrt_plugins.benchmarks.bench_{op}")
    natural = {"pad_to": "F.pad", "masked_rows": "x[mask]"}[op]
    ctx = common.RunContext(torch.device("cpu"), quick=True)
    reasons = {p.name: common.unmet(p.requires, ctx) for p in bench.BENCHMARK.providers}
    assert set(reasons) >= {
        "eager_composite",
        natural,
        "torch.compile",
        "torchtrt",
        "plugin_enqueue",
        "tensorrt[plugin]",
        "tensorrt[composite]",
    }
    assert reasons["eager_composite"] is None and reasons[natural] is None and reasons["torchtrt"] is None
    assert "--quick" in reasons["torch.compile"]
    assert "CUDA GPU" in reasons["plugin_enqueue"]
    if common.harness_hook() is None:
        assert "harness not available" in reasons["plugin_enqueue"]
    if common.needs_tensorrt(ctx):
        assert "tensorrt" in reasons["tensorrt[plugin]"]
    assert "CUDA GPU" in reasons["tensorrt[plugin]"] and "CUDA GPU" in reasons["tensorrt[composite]"]
    assert bench.BENCHMARK.name == op and bench.BENCHMARK.expected is not None


def test_pad_to_bytes_moved_read_the_kept_region_and_write_the_output():
    bench = importlib.import_module("torchtrt_plugins.benchmarks.bench_pad_to")
    # x (2, 3, 4, 5) -> (6, 3): pad H (4 -> 6), crop W (5 -> 3). Read 2*3*4*3 = 72 elements, write 2*3*6*3 = 108.
    case = bench.make_case((2, 3, 4, 5, 6, 3), torch.float32, torch.device("cpu"))
    assert case.nbytes == (72 + 108) * 4 == 720
    assert case.inputs[0].shape == (2, 3, 4, 5) and case.kwargs == {"height": 6, "width": 3, "value": 0.0}
    int8 = bench.make_case((2, 3, 4, 5, 6, 3), torch.int8, torch.device("cpu"))
    assert int8.nbytes == 180 and int8.inputs[0].dtype == torch.int8
    # Crop both: read only what is kept (1*1*2*2), write the same.
    assert bench.make_case((1, 1, 8, 8, 2, 2), torch.bfloat16, torch.device("cpu")).nbytes == (4 + 4) * 2
    # Pad both: read all of x (1*2*3*3 = 18), write 1*2*4*5 = 40.
    assert bench.moved_bytes((1, 2, 3, 3, 4, 5), 4) == (18 + 40) * 4


def test_masked_rows_bytes_moved_read_mask_and_kept_rows_and_write_them():
    bench = importlib.import_module("torchtrt_plugins.benchmarks.bench_masked_rows")
    cpu = torch.device("cpu")
    # 10 rows of 3 fp32: the bool mask is 10 bytes; all kept: read and write 10*3*4 = 120 bytes each.
    every = bench.make_case((10, 3, 100), torch.float32, cpu)
    assert every.inputs[1].dtype == torch.bool and bool(every.inputs[1].all())
    assert every.nbytes == 10 + 2 * 120 == 250
    assert bench.make_case((10, 3, 0), torch.float32, cpu).nbytes == 10  # none kept: the mask alone
    half = bench.make_case((1000, 3, 50), torch.bfloat16, cpu)
    kept = int(half.inputs[1].sum())
    assert 350 < kept < 650  # about half, drawn
    assert half.nbytes == 1000 + 2 * kept * 3 * 2
    again = bench.make_case((1000, 3, 50), torch.bfloat16, cpu)
    assert torch.equal(again.inputs[1], half.inputs[1])  # seeded: the same mask every time
    assert bench.moved_bytes(rows=10, kept=4, row_elements=3, element_size=4) == 10 + 2 * 4 * 3 * 4


@pytest.mark.parametrize("op", ["pad_to", "masked_rows"])
def test_new_op_providers_agree_with_the_reference_on_cpu(op):
    bench = importlib.import_module(f"torchtrt_plugins.benchmarks.bench_{op}")
    ctx = common.RunContext(torch.device("cpu"), quick=True)
    results = common.run(bench.BENCHMARK, ctx, providers=["eager*", "F.pad", "x?mask?", "torchtrt"])
    assert {r.status for r in results} == {"ok"}, [(r.provider, r.status, r.reason) for r in results]
    assert {r.provider for r in results} == {
        "copy",
        "eager_composite",
        "torchtrt",
        "F.pad" if op == "pad_to" else "x[mask]",
    }


def test_pad_to_f_pad_crops_with_negative_pads_for_every_dtype():
    bench = importlib.import_module("torchtrt_plugins.benchmarks.bench_pad_to")
    for dtype in bench.ENTRY.spec.inputs[0].dtypes:
        for shape in ((2, 3, 5, 7, 4, 9), (1, 2, 6, 6, 8, 3), (1, 1, 4, 4, 2, 2)):
            case = bench.make_case(shape, dtype, torch.device("cpu"))
            assert torch.equal(bench.functional(case)(), bench.expected(case)), (dtype, shape)


def _fake_harness(monkeypatch):
    calls = []

    def bench_enqueue(op, inputs, tactic=0, iters=100, fields=None):
        calls.append((op, inputs, fields, tactic))
        return [3.0, 1.0, 2.0, 4.0, 5.0]

    testing = types.ModuleType("torchtrt_plugins.testing")
    testing.bench_enqueue = bench_enqueue
    monkeypatch.setitem(sys.modules, "torchtrt_plugins.testing", testing)
    return calls


def test_pad_to_plugin_provider_passes_height_width_value_fields(monkeypatch):
    calls = _fake_harness(monkeypatch)
    bench = importlib.import_module("torchtrt_plugins.benchmarks.bench_pad_to")
    case = bench.make_case((1, 2, 3, 4, 5, 6), torch.float32, torch.device("cpu"))
    (provider,) = [p for p in bench.BENCHMARK.providers if p.name.startswith("plugin_enqueue")]
    assert provider.measure(case).median_ms == 3.0
    ((op, inputs, fields, tactic),) = calls
    assert (op, tactic, fields) == ("pad_to", 0, {"height": 5, "width": 6, "value": 0.0})
    assert len(inputs) == 1 and inputs[0] is case.inputs[0]


def test_masked_rows_plugin_provider_casts_the_mask_to_int32(monkeypatch):
    calls = _fake_harness(monkeypatch)
    bench = importlib.import_module("torchtrt_plugins.benchmarks.bench_masked_rows")
    case = bench.make_case((100, 4, 50), torch.float32, torch.device("cpu"))
    (provider,) = [p for p in bench.BENCHMARK.providers if p.name.startswith("plugin_enqueue")]
    assert provider.measure(case).median_ms == 3.0
    ((op, inputs, fields, tactic),) = calls
    assert (op, tactic, fields) == ("masked_rows", 0, {})
    x, mask = inputs
    assert x is case.inputs[0] and mask.dtype == torch.int32  # the plugin's dtype: TensorRT plugins take no bool
    assert torch.equal(mask, case.inputs[1].to(torch.int32))
    assert case.inputs[1].dtype == torch.bool  # the case's own mask is left as it is


def test_masked_rows_plugin_is_judged_by_the_bytes_it_moves(monkeypatch):
    """The plugin reads the INT32 mask TensorRT hands it: 4 bytes a row where the eager op reads 1. Its GB/s and %
    of copy count those bytes, against the copy's time scaled to them."""
    _fake_harness(monkeypatch)
    bench = importlib.import_module("torchtrt_plugins.benchmarks.bench_masked_rows")
    cpu = torch.device("cpu")
    case = bench.make_case((1000, 4, 50), torch.float32, cpu)
    kept = int(case.inputs[1].sum())
    (provider,) = [p for p in bench.BENCHMARK.providers if p.name == "plugin_enqueue"]
    assert provider.nbytes(case) == 1000 * 4 + 2 * kept * 4 * 4 == case.nbytes + 3 * 1000
    provider = dataclasses.replace(provider, requires=())  # runs here, on CPU, with a fake harness
    monkeypatch.setattr(common, "time_fn", lambda fn, device, quick=False, timer="do_bench": common.Timing(2.0, 2, 2))
    monkeypatch.setattr(common, "_measure_provider", lambda p, c, timer: lambda: common.Timing(4.0, 4, 4))
    plan = common.Plan(((1000, 4, 50),), (torch.float32,))
    benchmark = common.Benchmark("masked_rows", bench.make_case, [provider], plan, plan, plan, plan)
    results = {r.provider: r for r in common.run(benchmark, common.RunContext(cpu))}
    copy, plugin = results["copy"], results["plugin_enqueue"]
    assert copy.nbytes == case.nbytes and plugin.nbytes == provider.nbytes(case)
    assert plugin.copy_ms == pytest.approx(2.0 * plugin.nbytes / case.nbytes)
    assert plugin.pct_of_copy == pytest.approx(100 * 0.5 * plugin.nbytes / case.nbytes)


def test_plugin_inputs_cast_only_inputs_with_a_plugin_dtype():
    spec = torchtrt_plugins.get("masked_rows").spec
    x, mask = torch.ones(3, 2), torch.tensor([True, False, True])
    cast_x, cast_mask = common.plugin_inputs(spec, [x, mask])
    assert cast_x is x and cast_mask.dtype == torch.int32 and cast_mask.tolist() == [1, 0, 1]
    already = mask.to(torch.int32)
    assert common.plugin_inputs(spec, [x, already])[1] is already


# ------------------------------------------------------------------------------------------ plots


def test_plot_without_matplotlib_says_what_to_install(tmp_path, monkeypatch):
    plot = importlib.import_module("torchtrt_plugins.benchmarks.plot")
    path = common.write_results(_results(), _env(), tmp_path / "results.csv")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot.plot(path)
    assert plot.main([str(path)]) == 1


def test_plot_draws_time_and_pct_of_copy(tmp_path):
    pytest.importorskip("matplotlib")
    plot = importlib.import_module("torchtrt_plugins.benchmarks.plot")
    path = common.write_results(_results(), _env(), tmp_path / "results.csv")
    common.write_results(_results()[1:2], _env("2026-02-01T00:00:00+00:00"), path)  # a later run of one row
    assert len(plot.latest(common.read_results(path))) == 4
    written = plot.plot(path, tmp_path / "png")
    names = sorted(p.name for p in written)
    assert names == [
        "decoder_block_bfloat16_time.png",
        "rms_norm_bfloat16_pct_of_copy.png",
        "rms_norm_bfloat16_time.png",
    ]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)


# ------------------------------------------------------------------------------------------ timers, repeats, compile


def test_combine_repeats_is_the_spread_across_runs():
    one = common.Timing(1.0, 0.9, 1.2)
    assert common.combine_repeats([one]) == one  # one run: its own quantiles
    runs = [common.Timing(m, m - 0.1, m + 0.1) for m in (3.0, 1.0, 2.0, 5.0, 4.0)]
    combined = common.combine_repeats(runs)
    assert (combined.median_ms, combined.p20_ms, combined.p80_ms) == pytest.approx((3.0, 1.8, 4.2))
    with pytest.raises(ValueError, match="no timings"):
        common.combine_repeats([])


def test_timer_and_size_arguments():
    assert common.parse_timers(None) == ("do_bench", "host")
    assert common.parse_timers("graph, do_bench,graph") == ("graph", "do_bench")
    with pytest.raises(ValueError, match="unknown"):
        common.parse_timers("events")
    assert common.parse_sizes("1x4096, 8x4096") == ((1, 4096), (8, 4096))
    assert common.parse_sizes("") is None
    with pytest.raises(ValueError, match="--sizes"):
        common.parse_sizes("1x4096,big")
    with pytest.raises(ValueError, match="unknown timer"):
        common.RunContext(torch.device("cpu"), timers=("wallclock",))
    with pytest.raises(ValueError, match="repeats"):
        common.RunContext(torch.device("cpu"), repeats=0)


def _tagged(tag, fails=lambda: False):
    """A provider factory whose call doubles the input, tagged for the fake timers (raising where `fails()`)."""

    def factory(case):
        if fails():
            raise RuntimeError("out of memory on this placement")

        def fn():
            return case.inputs[0] * 2

        fn.tag = tag
        return fn

    return factory


def _doubling(make_case, providers):
    plan = common.Plan(((4, 8),), (torch.float32,))
    return common.Benchmark(
        "double", make_case, providers, plan, plan, plan, plan, expected=lambda case: case.inputs[0] * 2
    )


def test_repeats_interleave_providers_and_report_each_timer(monkeypatch):
    calls = []

    def fake_time_fn(fn, device, quick=False, timer="do_bench"):
        calls.append((getattr(fn, "tag", "copy"), timer))
        if timer == "graph":
            raise common.NotCapturable("the graph timer needs a CUDA GPU (this run is on CPU)")
        return common.Timing(float(len(calls)), 0.0, 0.0)

    monkeypatch.setattr(common, "time_fn", fake_time_fn)
    benchmark = _doubling(_make_case, [common.Provider("a", _tagged("a")), common.Provider("b", _tagged("b"))])
    ctx = common.RunContext(torch.device("cpu"), timers=("do_bench", "graph"), repeats=3)
    results = common.run(benchmark, ctx)
    do_bench = [c for c in calls if c[1] == "do_bench"]
    # Interleaved, one round per repeat, the order rotated by one each round.
    assert [tag for tag, _ in do_bench] == ["copy", "a", "b", "a", "b", "copy", "b", "copy", "a"]
    rows = {(r.provider, r.timer): r for r in results}
    assert rows[("a", "do_bench")].timing.median_ms == pytest.approx(4.0)  # median of the calls 2, 4, 9
    assert rows[("a", "do_bench")].repeats == 3
    assert rows[("a", "graph")].status == "skipped" and "CUDA GPU" in rows[("a", "graph")].reason
    assert [r.timer for r in results] == ["do_bench"] * 3 + ["graph"] * 3
    table = common.format_table(results)
    assert "timer=do_bench x3 repeats" in table


def test_graph_timer_needs_a_gpu():
    with pytest.raises(common.NotCapturable, match="CUDA GPU"):
        common.time_fn(lambda: None, torch.device("cpu"), timer="graph")


def test_csv_rows_carry_timer_and_repeats_and_old_files_still_read(tmp_path):
    result = common.Result("op", "p", "2x2", "float32", "cuda", "ok", timing=common.Timing(1, 1, 1), timer="graph")
    result.repeats = 5
    row = result.row(_env())
    assert (row["timer"], row["repeats"]) == ("graph", "5")
    legacy = tmp_path / "old.csv"
    with open(legacy, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(common.LEGACY_COLUMNS))
        writer.writeheader()
        writer.writerow({k: v for k, v in row.items() if k in common.LEGACY_COLUMNS})
    (read,) = common.read_results(legacy)
    assert (read["timer"], read["repeats"], read["placements"]) == ("do_bench", "1", "1")


def test_placements_and_commit_columns_and_files_written_before_them(tmp_path):
    result = common.Result("op", "p", "2x2", "float32", "cuda", "ok", timing=common.Timing(1, 1, 1), timer="graph")
    result.repeats, result.placements = 3, 8
    assert (
        common.REPEATS_COLUMNS + ("placements", "commit") == common.PLACEMENTS_COLUMNS + ("commit",) == common.COLUMNS
    )
    assert result.row(_env())["placements"] == "8"
    assert "timer=graph x3 repeats on 8 placements" in common.format_table([result])
    # A file from before the commit column (and ones from before placements, and before timer and repeats) reads with
    # the defaults of the columns it lacks, and the next run appends to it after rewriting its header, its rows kept.
    for columns, kept in (
        (common.PLACEMENTS_COLUMNS, ("graph", "3", "8")),
        (common.REPEATS_COLUMNS, ("graph", "3", "1")),
        (common.LEGACY_COLUMNS, ("do_bench", "1", "1")),
    ):
        old = tmp_path / f"old{len(columns)}.csv"
        with open(old, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(columns))
            writer.writeheader()
            writer.writerow({k: v for k, v in result.row(_env()).items() if k in columns})
        (read,) = common.read_results(old)
        assert (read["timer"], read["repeats"], read["placements"], read["commit"]) == (*kept, "")
        common.write_results([result], _env("2026-01-02T00:00:00+00:00"), old)
        rows = common.read_results(old)
        assert [(r["timer"], r["repeats"], r["placements"], r["commit"]) for r in rows] == [
            (*kept, ""),
            ("graph", "3", "8", "0123abcd4567"),
        ]
        assert old.read_text().splitlines()[0] == ",".join(common.COLUMNS)


def test_record_gets_the_timed_rows_of_every_run_appended(tmp_path):
    out, record = tmp_path / "out" / "results.csv", tmp_path / "data" / "record.csv"
    common.write_results(_results(), _env(), out, record)
    common.write_results(_results()[:1], _env("2026-01-02T00:00:00+00:00"), tmp_path / "other" / "results.csv", record)
    rows = common.read_results(record)
    assert [(r["provider"], r["timestamp"]) for r in rows] == [
        *((r["provider"], "2026-01-01T00:00:00+00:00") for r in common.read_results(out)),
        ("copy", "2026-01-02T00:00:00+00:00"),
    ]
    assert len(rows) == 5 and {r["commit"] for r in rows} == {"0123abcd4567"}
    assert not (record.parent / common.NOT_RUN_FILE).exists()  # what did not run stays with the run's own output
    record.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="has columns"):
        common.write_results(_results(), _env(), out, record)


def test_source_commit_names_the_checkout_and_its_changes(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("no git here")
    checkout, elsewhere = tmp_path / "checkout", tmp_path / "elsewhere"
    package = checkout / "pkg"
    package.mkdir(parents=True)
    elsewhere.mkdir()
    assert common.source_commit(elsewhere) == ""  # not a checkout: an installed wheel records no commit
    (package / "__init__.py").write_text("")
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    assert common.source_commit(package) == ""  # a package in a repository that does not track it is not its
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True)
    assert common.source_commit(package) == head.stdout.strip()
    (package / "__init__.py").write_text("changed = True\n")
    assert common.source_commit(package) == head.stdout.strip() + "+dirty"


@pytest.mark.skipif(not FROM_CHECKOUT, reason="runs against an installed package: the checkout's benchmarks/ is absent")
def test_the_committed_record_is_a_results_csv_of_measured_gpu_rows():
    record = REPO / common.RECORD_CSV
    rows = common.read_results(record)
    assert rows and record.read_text().splitlines()[0] == ",".join(common.COLUMNS)
    for row in rows:
        assert row["gpu"].startswith("NVIDIA") and float(row["median_ms"]) > 0, row
        assert row["timer"] in common.TIMERS and row["timestamp"] and row["op"] and row["provider"], row


def test_the_package_ships_no_host_time_yardstick():
    assert importlib.util.find_spec("torchtrt_plugins.benchmarks.handwritten") is None
    assert not list(Path(common.__file__).parent.glob("*.cpp"))


@pytest.mark.skipif(not FROM_CHECKOUT, reason="runs against an installed package: the checkout's benchmarks/ is absent")
def test_the_host_time_yardstick_imports_from_the_checkouts_benchmarks_folder():
    assert "package-data" not in (REPO / "pyproject.toml").read_text()
    assert (REPO / "benchmarks" / "handwritten_op.cpp").is_file()
    code = "import sys; sys.path.append(sys.argv[1]); import handwritten; print(handwritten.__file__)"
    found = subprocess.run([sys.executable, "-c", code, str(REPO / "benchmarks")], capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == REPO / "benchmarks" / "handwritten.py"


def test_placements_build_the_case_again_and_time_every_provider_on_each(monkeypatch):
    calls, built = [], []

    def fake_time_fn(fn, device, quick=False, timer="do_bench"):
        calls.append(getattr(fn, "tag", "copy"))
        return common.Timing(float(len(calls)), 0.0, 0.0)

    def make_case(shape, dtype, device):
        built.append(shape)
        return _make_case(shape, dtype, device)

    monkeypatch.setattr(common, "time_fn", fake_time_fn)
    b = common.Provider("b", _tagged("b", fails=lambda: len(built) == 2))
    benchmark = _doubling(make_case, [common.Provider("a", _tagged("a")), b])
    with pytest.raises(ValueError, match="placements"):
        common.RunContext(torch.device("cpu"), placements=0)
    ctx = common.RunContext(torch.device("cpu"), repeats=2, placements=3)
    results = {r.provider: r for r in common.run(benchmark, ctx)}
    assert len(built) == 3  # the case built once per placement
    # Each placement: two rotated rounds of the providers prepared there; b, which could not be prepared on the
    # second, is not timed again.
    assert calls == ["copy", "a", "b", "a", "b", "copy", "copy", "a", "a", "copy", "copy", "a", "a", "copy"]
    a = results["a"]
    assert (a.status, a.repeats, a.placements) == ("ok", 2, 3)
    assert a.timing.median_ms == pytest.approx(8.5)  # the median of all six of a's timings: 2, 4, 8, 9, 12, 13
    assert results["b"].status == "error" and "placement 1" in results["b"].reason
    assert results["copy"].status == "ok"


def test_a_recompile_while_timing_is_an_error_not_eager(monkeypatch):
    compiled = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
    inputs = [torch.ones(4, 8), torch.ones(5, 8)]
    state = {"n": 0}

    def factory(case):
        def fn():  # the first call (the output check) compiles; timing then meets a new shape: a recompile
            state["n"] += 1
            return compiled(inputs[0] if state["n"] == 1 else inputs[state["n"] % 2])

        return fn

    torch._dynamo.reset()
    plan = common.Plan(((4, 8),), (torch.float32,))
    benchmark = common.Benchmark("double", _make_case, [common.Provider("compiled", factory)], plan, plan, plan, plan)
    (result,) = [r for r in common.run(benchmark, common.RunContext(torch.device("cpu"))) if r.provider == "compiled"]
    assert result.status == "error" and "ecompil" in result.reason, result.reason


def test_compile_inductor_refuses_to_run_eager_when_nothing_compiles():
    def no_tensor_ops(x):
        return 1

    compiled = common.compile_inductor(no_tensor_ops)
    with pytest.raises(common.CompileFallback, match="no graph"):
        compiled(torch.ones(2))


def test_liger_provider_says_why_it_cannot_run(monkeypatch):
    bench = importlib.import_module("torchtrt_plugins.benchmarks.bench_rms_norm")
    assert "CUDA GPUs only" in bench.needs_liger(common.RunContext(torch.device("cpu")))
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "liger_kernel" else real(name, *a)
    )
    ctx = common.RunContext.__new__(common.RunContext)
    object.__setattr__(ctx, "device", torch.device("cuda"))
    assert "pip install --no-deps liger-kernel" in bench.needs_liger(ctx)
    assert "liger" in [p.name for p in bench.PROVIDERS]


def test_two_compiled_providers_of_one_case_both_stay_compiled(monkeypatch):
    # Each provider compiles in turn, then all are timed: a dynamo reset by the second must not send the first
    # back to compiling (the recompile would be an error under no_recompile; seen with the decoder block).
    monkeypatch.setattr(common, "INDUCTOR_BACKEND", "eager")

    class Double(torch.nn.Module):  # one forward, two modules that guard differently (as the decoder block's)
        def __init__(self, by_add: bool):
            super().__init__()
            self.by_add = by_add

        def forward(self, x):
            return x + x if self.by_add else x * 2

    def compiled(by_add):
        def factory(case):
            model = common.compile_inductor(Double(by_add))
            return lambda: model(case.inputs[0])

        return factory

    plan = common.Plan(((4, 8),), (torch.float32,))
    providers = [common.Provider("first", compiled(False)), common.Provider("second", compiled(True))]
    benchmark = common.Benchmark(
        "double", _make_case, providers, plan, plan, plan, plan, expected=lambda case: case.inputs[0] * 2
    )
    results = common.run(benchmark, common.RunContext(torch.device("cpu"), quick=True))
    assert {r.provider: r.status for r in results} == {"copy": "ok", "first": "ok", "second": "ok"}, [
        (r.provider, r.reason) for r in results
    ]


def test_vision_benchmarks_that_cannot_run_declare_no_op(tmp_path):
    """Without torchvision and a GPU, the vision benchmarks (their requirement checks, their references) must not
    import torchtrt_plugins.vision: that declares torchvision's ops on a library that load_plugins then has to build
    (it broke the wheel's tests, which have no TensorRT headers)."""
    if importlib.util.find_spec("torchvision") is not None or torch.cuda.is_available():
        pytest.skip("torchvision or a GPU is here: the vision benchmarks run and import torchtrt_plugins.vision")
    code = (
        "import sys\n"
        "from torchtrt_plugins import cli\n"
        "from torchtrt_plugins.benchmarks import common\n"
        "print(common.needs_torchvision(None))\n"
        f"cli.main(['bench', '--quick', '--device', 'cpu', '--ops', 'nms,roi_align', '--out', {str(tmp_path)!r}])\n"
        "print('torchtrt_plugins.vision' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert "torchvision" in out[0]
    assert out[-1] == "False"


def _cuda_context():
    ctx = common.RunContext.__new__(common.RunContext)
    object.__setattr__(ctx, "device", torch.device("cuda"))
    return ctx


def test_our_ops_run_eagerly_from_their_launcher_library(monkeypatch):
    # Every op of ours runs eagerly through the launcher library (prebuilt in a wheel): its eager provider needs it and
    # nothing else, and a launcher library that does not load skips it with the reason.
    ctx = _cuda_context()

    def requirements(module: str, provider: str) -> list:
        bench = importlib.import_module(f"torchtrt_plugins.benchmarks.{module}")
        return list(next(p for p in bench.PROVIDERS if p.name == provider).requires)

    library = torchtrt_plugins.get("rms_norm").declaration.library
    assert torchtrt_plugins.get("pad_to").declaration.library is library
    monkeypatch.setattr(library, "launchers", lambda: object())
    eager = (
        ("bench_rms_norm", "torchtrt"),
        ("bench_masked_rows", "torchtrt"),
        ("bench_pad_to", "torchtrt"),
        ("bench_model", "eager+torchtrt"),
    )
    for module, provider in eager:
        assert [r(ctx) for r in requirements(module, provider) if r(ctx)] == [], (module, provider)

    def missing():
        raise OSError("libtorchtrt_plugins_launchers.so: cannot open shared object file")

    monkeypatch.setattr(library, "launchers", missing)
    for module, op in (("bench_rms_norm", "rms_norm"), ("bench_pad_to", "pad_to")):
        reasons = [r(ctx) for r in requirements(module, "torchtrt") if r(ctx)]
        assert reasons and f"torchtrt::{op}" in reasons[0] and "cannot open shared object" in reasons[0]


def test_host_timer_runs_calls_back_to_back_and_reports_no_bandwidth():
    calls = []
    timing = common.time_fn(lambda: calls.append(1), torch.device("cpu"), quick=True, timer="host")
    assert len(calls) == 20 + 7 * common.HOST_CALLS and timing.p20_ms <= timing.median_ms <= timing.p80_ms
    assert "host" in common.parse_timers(None)
