"""torchtrt-plugins doctor / build / bench on a machine without GPU or TensorRT."""

import csv
import importlib.util
import subprocess
import sys

import pytest

from torchtrt_plugins import _build, cli

common = cli.import_benchmarks()


def test_python_m_lists_the_subcommands():
    result = subprocess.run([sys.executable, "-m", "torchtrt_plugins", "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for command in ("doctor", "build", "bench"):
        assert command in result.stdout


def test_doctor_reports_every_piece_and_exits_0(capsys):
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    for section in ("Python and torch", "GPU and CUDA", "Toolchain", "TensorRT", "Native pieces", "Ops and plugins"):
        assert section in out
    for item in (
        "nvcc",
        "TensorRT headers",
        "tensorrt",
        "torch_tensorrt",
        "tensorrt_rtx",
        "plugin library",
        "CUDA torch ops",
        "rms_norm",
    ):
        assert item in out
    checks = cli.collect_checks()
    assert all(c.fix for c in checks if c.state == cli.MISSING), [
        c for c in checks if c.state == cli.MISSING and not c.fix
    ]
    assert "missing:" in out or "nothing missing" in out


def test_build_without_sources_skips_with_the_reason(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("TORCHTRT_PLUGINS_SOURCE_DIR", str(tmp_path))
    assert cli.main(["build"]) == 0
    out = capsys.readouterr().out
    assert "skipped: native sources not found" in out
    assert cli.main(["build", "--strict"]) == 1


def test_build_failure_is_reported_and_exits_1(monkeypatch, capsys):
    def failing_build(force=False, quiet=False):
        raise _build.BuildError("plugin library build failed: nvcc error: identifier 'boom' is undefined")

    monkeypatch.setattr(cli, "plugin_build_prerequisites", lambda: None)
    monkeypatch.setattr(cli, "torch_ops_prerequisites", lambda: "no CUDA GPU visible to torch")
    monkeypatch.setattr(_build, "build_plugin_library", failing_build)
    assert cli.main(["build"]) == 1
    out = capsys.readouterr().out
    assert "FAILED: the plugin library did not build" in out
    assert "identifier 'boom' is undefined" in out
    assert "skipped: no CUDA GPU visible to torch" in out


def test_build_of_a_cached_library(capsys):
    library, status = cli.cached_plugin_library()
    if library is None:
        pytest.skip(f"plugin library not cached ({status}); `torchtrt-plugins build` compiles it (minutes)")
    code = cli.main(["build"])
    out = capsys.readouterr().out
    # The C++ sources change under active development: either outcome is fine, reported clearly.
    assert (code == 0 and "up to date (cached)" in out) or (code == 1 and "FAILED" in out)


def test_bench_quick_on_cpu_writes_csv_and_says_what_did_not_run(tmp_path, capsys):
    out_dir = tmp_path / "bench"
    argv = [
        "bench",
        "--quick",
        "--device",
        "cpu",
        "--out",
        str(out_dir),
        "--no-progress",
        "--providers",
        "eager*,torchtrt,plugin_enqueue,tensorrt*,torch.compile",
    ]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    with open(out_dir / "results.csv", newline="") as handle:
        header = next(csv.reader(handle))
    assert tuple(header) == common.COLUMNS
    rows = common.read_results(out_dir / "results.csv")
    timed = {(r["op"], r["provider"]) for r in rows}
    assert {("rms_norm", "copy"), ("rms_norm", "eager_composite"), ("rms_norm", "torchtrt")} <= timed
    assert {("decoder_block", "eager"), ("decoder_block", "eager+torchtrt")} <= timed
    assert all(r["gpu"].startswith("cpu") and float(r["median_ms"]) > 0 for r in rows)
    assert all(r["gbps"] and r["pct_of_copy"] for r in rows if r["op"] == "rms_norm")
    with open(out_dir / common.NOT_RUN_FILE, newline="") as handle:
        not_run = {(r["op"], r["provider"]): r["reason"] for r in csv.DictReader(handle)}
    assert "CUDA GPU" in not_run[("rms_norm", "plugin_enqueue")]
    assert "CUDA GPU" in not_run[("decoder_block", "tensorrt")]
    assert "--quick" in not_run[("rms_norm", "torch.compile")]
    assert "device=cpu" in out and "Not run:" in out and "plugin_enqueue" in out
    if importlib.util.find_spec("matplotlib") is None:
        assert "matplotlib is not installed" in out
    else:
        assert (out_dir / "rms_norm_float32_time.png").is_file()
        assert (out_dir / "rms_norm_float32_pct_of_copy.png").is_file()


def test_bench_quick_pad_to_and_masked_rows_on_cpu_write_csv_rows(tmp_path, capsys):
    out_dir = tmp_path / "bench"
    argv = ["bench", "--quick", "--device", "cpu", "--ops", "pad_to,masked_rows", "--out", str(out_dir)]
    assert cli.main([*argv, "--no-progress", "--no-plots"]) == 0
    out = capsys.readouterr().out
    with open(out_dir / "results.csv", newline="") as handle:
        header = next(csv.reader(handle))
    assert tuple(header) == common.COLUMNS
    rows = common.read_results(out_dir / "results.csv")
    assert {r["op"] for r in rows} == {"pad_to", "masked_rows"}
    timed = {(r["op"], r["provider"], r["shape"]) for r in rows}
    for shape in ("1x3x30x40x32x48", "2x8x64x64x56x72"):
        for provider in ("copy", "eager_composite", "F.pad", "torchtrt"):
            assert ("pad_to", provider, shape) in timed
    for shape in ("1000x8x50", "4096x64x100"):
        for provider in ("copy", "eager_composite", "x[mask]", "torchtrt"):
            assert ("masked_rows", provider, shape) in timed
    assert all(r["dtype"] == "float32" and r["gpu"].startswith("cpu") and float(r["median_ms"]) > 0 for r in rows)
    assert all(r["gbps"] and r["pct_of_copy"] for r in rows)  # both memory-bound: every row has bandwidth
    with open(out_dir / common.NOT_RUN_FILE, newline="") as handle:
        not_run = {(r["op"], r["provider"]): (r["status"], r["reason"]) for r in csv.DictReader(handle)}
    for op in ("pad_to", "masked_rows"):
        assert not_run[(op, "plugin_enqueue")][0] == "skipped" and "CUDA GPU" in not_run[(op, "plugin_enqueue")][1]
        assert "--quick" in not_run[(op, "torch.compile")][1]
        assert "CUDA GPU" in not_run[(op, "tensorrt[plugin]")][1]
    assert {status for status, _ in not_run.values()} == {"skipped"}  # nothing errored or disagreed
    assert "pad_to  float32  1x3x30x40x32x48  device=cpu" in out and "masked_rows  float32  1000x8x50" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench", "--ops", "no_such_op"], "unknown --ops ['no_such_op']"),
        (["bench", "--dtypes", "fp12"], "unknown dtype 'fp12'"),
        (["bench", "--device", "cpu", "--providers", "nothing*"], "match no provider"),
    ],
)
def test_bench_usage_errors_exit_2(argv, message, tmp_path, capsys):
    assert cli.main([*argv, "--out", str(tmp_path), "--no-plots", "--no-progress"]) == 2
    assert message in capsys.readouterr().out
