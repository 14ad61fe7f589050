"""torchtrt-plugins doctor / build / bench on a machine without GPU or TensorRT."""

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

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
        "op launcher library",
        "rms_norm",
        "pad_to",
    ):
        assert item in out
    assert "CUDA torch ops" not in out  # no torch extension any more: every op runs eagerly from its launchers
    checks = cli.collect_checks()
    assert all(c.fix for c in checks if c.state == cli.MISSING), [
        c for c in checks if c.state == cli.MISSING and not c.fix
    ]
    assert "missing:" in out or "nothing missing" in out


def test_build_without_sources_skips_with_the_reason(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("TORCHTRT_PLUGINS_SOURCE_DIR", str(tmp_path))
    assert cli.main(["build", "--force"]) == 0  # --force: from the sources, even where a wheel carries the library
    out = capsys.readouterr().out
    assert "skipped: native sources (csrc/ and CMakeLists.txt) not found" in out
    assert cli.main(["build", "--force", "--strict"]) == 1


def _no_tensorrt_headers(monkeypatch, tmp_path):
    """A machine where no TensorRT headers are found: no variables, empty system folders."""
    monkeypatch.delenv("TENSORRT_INCLUDE_DIR", raising=False)
    monkeypatch.delenv("TENSORRT_ROOT", raising=False)
    monkeypatch.setattr(_build, "_system_include_dirs", lambda: [("/usr/include", tmp_path / "usr-include")])


def _headers(root, version=(11, 1, 0)):
    root.mkdir(parents=True)
    (root / "NvInferRuntime.h").write_text("// stand-in\n")
    major, minor, patch = version
    (root / "NvInferVersion.h").write_text(
        f"#define NV_TENSORRT_MAJOR {major}\n#define NV_TENSORRT_MINOR {minor}\n#define NV_TENSORRT_PATCH {patch}\n"
    )
    return root


@pytest.mark.parametrize("variable", ["TENSORRT_INCLUDE_DIR", "TENSORRT_ROOT", "debian"])
def test_doctor_says_where_the_tensorrt_headers_were_found(variable, monkeypatch, tmp_path, capsys):
    _no_tensorrt_headers(monkeypatch, tmp_path)
    if variable == "TENSORRT_INCLUDE_DIR":
        include = _headers(tmp_path / "trt" / "include")
        monkeypatch.setenv("TENSORRT_INCLUDE_DIR", str(include))
    elif variable == "TENSORRT_ROOT":
        include = _headers(tmp_path / "TensorRT-10.13.0" / "include", (10, 13, 0))
        monkeypatch.setenv("TENSORRT_ROOT", str(include.parent))
    else:
        include = _headers(tmp_path / "x86_64-linux-gnu", (10, 3, 0))
        monkeypatch.setattr(_build, "_system_include_dirs", lambda: [("the Debian packages' folder", include)])
    assert cli.main(["doctor"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "TensorRT headers" in line)
    source = {"TENSORRT_ROOT": "TENSORRT_ROOT/include", "debian": "the Debian packages' folder"}.get(variable, variable)
    assert str(include) in line and f"from {source}" in line and "[ok]" in line


def test_doctor_without_tensorrt_headers_says_what_is_needed(monkeypatch, tmp_path, capsys):
    _no_tensorrt_headers(monkeypatch, tmp_path)
    monkeypatch.setattr(_build, "prebuilt_libraries", lambda: None)
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "[missing] TensorRT headers" in out
    assert "TensorRT 10.x or 11.x" in out and "https://github.com/NVIDIA/TensorRT" in out
    assert "TENSORRT_INCLUDE_DIR" in out and "TENSORRT_ROOT" in out


def test_headers_of_an_unsupported_tensorrt_are_refused_with_the_version(monkeypatch, tmp_path):
    _no_tensorrt_headers(monkeypatch, tmp_path)
    monkeypatch.setenv("TENSORRT_INCLUDE_DIR", str(_headers(tmp_path / "trt8", (8, 6, 1))))
    search = _build.find_tensorrt_headers()
    assert search.include is None and "holds TensorRT 8.6.1, not 10.x or 11.x" in search.describe()


def test_a_set_variable_decides_even_when_it_is_wrong(monkeypatch, tmp_path):
    _no_tensorrt_headers(monkeypatch, tmp_path)
    monkeypatch.setattr(_build, "_system_include_dirs", lambda: [("/usr/include", _headers(tmp_path / "usr"))])
    monkeypatch.setenv("TENSORRT_ROOT", str(tmp_path / "nowhere"))
    search = _build.find_tensorrt_headers()
    assert search.include is None and f"TENSORRT_ROOT/include: {tmp_path / 'nowhere' / 'include'}" in search.describe()
    monkeypatch.delenv("TENSORRT_ROOT")
    assert _build.find_tensorrt_headers().include == (tmp_path / "usr").resolve()


def test_source_build_without_headers_says_exactly_what_it_needs(monkeypatch, tmp_path, capsys):
    _no_tensorrt_headers(monkeypatch, tmp_path)
    assert cli.main(["build", "--force"]) == 0
    out = capsys.readouterr().out
    assert "skipped: TensorRT headers not found; the plugin library needs" in out
    assert "TensorRT 10.x or 11.x (the v_1_0 IPluginV3 interfaces)" in out and "NVIDIA/TensorRT" in out
    with pytest.raises(_build.BuildError, match="TensorRT headers not found; the plugin library needs"):
        _build.build_plugin_library(force=True)


def test_build_failure_is_reported_and_exits_1(monkeypatch, capsys):
    def failing_build(force=False, quiet=False):
        raise _build.BuildError("plugin library build failed: nvcc error: identifier 'boom' is undefined")

    monkeypatch.setattr(cli, "plugin_build_prerequisites", lambda: None)
    monkeypatch.setattr(_build, "build_plugin_library", failing_build)
    assert cli.main(["build", "--force"]) == 1  # --force: from the sources, even where a wheel carries the library
    out = capsys.readouterr().out
    assert "FAILED: the plugin library did not build" in out
    assert "identifier 'boom' is undefined" in out
    assert "skipped" not in out and "CUDA torch ops" not in out


def test_build_of_a_cached_library(build, capsys):
    code = cli.main(["build"])
    out = capsys.readouterr().out
    if build.prebuilt:
        assert code == 0 and f"prebuilt (from the wheel; --force builds from the sources): {build.library}" in out
        return
    # The C++ sources change under active development: either outcome is fine, reported clearly.
    assert (code == 0 and f"up to date (cached): {build.library}" in out) or (code == 1 and "FAILED" in out)


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
        "--dtypes",  # every op and the decoder block, in one dtype: each dtype's path has tests of its own
        "fp32",
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
    rms_norm = [r for r in rows if r["op"] == "rms_norm"]
    assert {r["timer"] for r in rms_norm} == set(common.DEFAULT_TIMERS)
    # Bandwidth from GPU time only: host time says nothing of it.
    assert all(bool(r["gbps"] and r["pct_of_copy"]) == (r["timer"] != "host") for r in rms_norm)
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
    # Both memory-bound: every GPU-time row has bandwidth; host-time rows have none.
    assert all(bool(r["gbps"] and r["pct_of_copy"]) == (r["timer"] != "host") for r in rows)
    with open(out_dir / common.NOT_RUN_FILE, newline="") as handle:
        not_run = {(r["op"], r["provider"]): (r["status"], r["reason"]) for r in csv.DictReader(handle)}
    for op in ("pad_to", "masked_rows"):
        assert not_run[(op, "plugin_enqueue")][0] == "skipped" and "CUDA GPU" in not_run[(op, "plugin_enqueue")][1]
        assert "--quick" in not_run[(op, "torch.compile")][1]
        assert "CUDA GPU" in not_run[(op, "tensorrt[plugin]")][1]
    assert {status for status, _ in not_run.values()} == {"skipped"}  # nothing errored or disagreed
    assert "pad_to  float32  1x3x30x40x32x48  device=cpu" in out and "masked_rows  float32  1000x8x50" in out


def test_bench_record_appends_each_run_to_one_csv(tmp_path, capsys):
    record = tmp_path / "data" / "results.csv"
    argv = ["bench", "--quick", "--device", "cpu", "--ops", "pad_to", "--providers", "eager_composite", "--timer"]
    for run in ("first", "second"):
        out_dir = tmp_path / run
        assert (
            cli.main([*argv, "host", "--out", str(out_dir), "--record", str(record), "--no-plots", "--no-progress"])
            == 0
        )
        assert common.read_results(record)[-len(common.read_results(out_dir / "results.csv")) :] == common.read_results(
            out_dir / "results.csv"
        )
    assert f"recorded in: {record}" in capsys.readouterr().out
    rows = common.read_results(record)
    first, second = (common.read_results(tmp_path / run / "results.csv") for run in ("first", "second"))
    assert rows == first + second and len(first) >= 2  # the copy and the composite, every size of the plan
    assert {(r["op"], r["timer"]) for r in rows} == {("pad_to", "host")}
    assert not (record.parent / common.NOT_RUN_FILE).exists()


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


def test_sdk_cmake_dir_holds_the_package_config_and_the_recipe_files():
    """What `-Dtorchtrt_plugins_DIR=$(python -m torchtrt_plugins sdk --cmake-dir)` needs, installed with the package
    (a wheel carries it: this runs against the installed wheel in CI too)."""
    from torchtrt_plugins import sdk

    result = subprocess.run(
        [sys.executable, "-m", "torchtrt_plugins", "sdk", "--cmake-dir", "--include-dir"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    cmake_dir, include_dir = map(Path, result.stdout.split())
    assert (cmake_dir / "torchtrt_pluginsConfig.cmake").is_file()
    recipe = sdk.build_recipe()
    files = [*recipe["headers"], *recipe["plugin_sources"], *recipe["launcher_sources"], recipe["version_script"]]
    assert [f for f in files if not (include_dir / f).is_file()] == []


def test_sdk_generate_names_the_library_it_did_not_find(tmp_path, capsys):
    assert (
        cli.main(["sdk", "generate", "--module", "torchtrt_plugins", "--library", "nope", "--out", str(tmp_path)]) == 2
    )
    assert "declares ops on no library named 'nope'" in capsys.readouterr().err


def test_doctor_reports_the_launcher_library_beside_the_plugin_library(tmp_path, monkeypatch):
    # Our ops run eagerly from libtorchtrt_plugins_launchers.so: doctor says where it is, or that it is missing and
    # how to get it.
    monkeypatch.delenv("TORCHTRT_PLUGINS_LIBRARY", raising=False)
    library = tmp_path / "libtorchtrt_plugins_v3.so"
    library.write_bytes(b"")
    missing = cli._launcher_check("Native pieces", library)
    assert missing.state == cli.MISSING and "libtorchtrt_plugins_launchers.so" in missing.detail and missing.fix
    (tmp_path / "libtorchtrt_plugins_launchers.so").write_bytes(b"")
    found = cli._launcher_check("Native pieces", library)
    assert found.state == cli.OK and str(tmp_path) in found.detail
    assert cli._launcher_check("Native pieces", None).state == cli.MISSING


def test_the_package_does_not_use_unittest():
    package = Path(cli.__file__).resolve().parent
    assert [str(p.relative_to(package)) for p in sorted(package.rglob("*.py")) if "unittest" in p.read_text()] == []


def test_doctor_says_which_eager_kernel_flavour_serves_and_how_each_stands(monkeypatch, capsys):
    from torchtrt_plugins.sdk import eager_kernel

    monkeypatch.delenv(eager_kernel.ENV, raising=False)
    monkeypatch.setattr(
        eager_kernel,
        "status",
        lambda f: (f == "stable", "cannot build here: no C++ compiler" if f == "native" else "ok"),
    )
    assert cli.main(["doctor"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "C++ eager kernel" in line)
    assert "stable serves" in line and "native: cannot build here: no C++ compiler" in line, line
    monkeypatch.setenv(eager_kernel.ENV, "native")  # only the native flavour, which cannot serve: the Python path
    assert cli.main(["doctor"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "C++ eager kernel" in line)
    assert "Python path" in line, line


def test_zoo_without_torch_tensorrt_says_what_it_needs(capsys):
    if importlib.util.find_spec("torch_tensorrt") is not None:
        pytest.skip("Torch-TensorRT is installed: the zoo would run (the tt tier checks it)")
    assert cli.main(["zoo", "--models", "DetrModel"]) == 2
    assert "zoo: needs torchvision, transformers and Torch-TensorRT" in capsys.readouterr().out
