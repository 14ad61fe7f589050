"""``torchtrt-plugins`` (also ``python -m torchtrt_plugins``): doctor, build, bench, sdk, zoo.

- ``doctor``: what is present (GPU, CUDA, toolchain, TensorRT flavours, native pieces, ops and
  plugins) and, for each missing piece, what to do. Always exits 0.
- ``build``: the TensorRT plugin library, the launcher library (the ops' eager CUDA kernels) and the harness.
  Skipped with the reason when its prerequisites are missing; a build that fails exits 1.
- ``bench``: the benchmark scripts of the package (``torchtrt_plugins.benchmarks``), in this process, side
  by side; CSV, plots and a table into ``--out``, and with ``--record PATH`` the rows appended to that CSV too (a
  checkout's record is ``benchmarks/data/results.csv``). On a machine without GPU it runs what the CPU can run and says
  what it could not run and why.
- ``sdk``: where the C++ SDK is (``--cmake-dir``: the CMake package, ``--include-dir``, ``--tensorrt-include-dir``), and
  ``sdk generate``: a user library's generated C++ tables from its op declarations (what the CMake package's
  ``torchtrt_plugins_add_library`` runs at build time).
- ``zoo``: engines per model of the detector zoo under Torch-TensorRT, with and without us (``torchtrt_plugins.zoo``);
  ``zoo --time``: each model timed eagerly and as its converted graph (``benchmarks.zoo_timing``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import _build, _compat, native
from . import registry as op_registry
from . import spec as spec_mod

OK, MISSING, OPTIONAL, INFO = "ok", "missing", "optional", "info"
_LABELS = {OK: "[ok]", MISSING: "[missing]", OPTIONAL: "[--]", INFO: "[i]"}


def _say(text: str = "") -> None:
    print(text, flush=True)


# ------------------------------------------------------------------------------------------ doctor


@dataclass
class Check:
    section: str
    name: str
    state: str
    detail: str
    fix: str = ""


def _module_version(name: str) -> tuple[str | None, str]:
    """(version, "") when the module imports, else (None, why not)."""
    if importlib.util.find_spec(name) is None:
        return None, "not installed"
    try:
        module = importlib.import_module(name)
    except Exception as err:  # noqa: BLE001 - a broken install is reported, not raised
        return None, f"installed but fails to import: {type(err).__name__}: {err}"
    return str(getattr(module, "__version__", "?")), ""


def driver_version() -> str | None:
    """The NVIDIA driver version from nvidia-smi (torch does not report it)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        result = subprocess.run(
            [smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = result.stdout.strip().splitlines()
    return lines[0].strip() if result.returncode == 0 and lines else None


def nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as err:
        return f"? ({err})"
    found = re.search(r"release (\d+\.\d+)", out)
    return found.group(1) if found else "?"


def cached_plugin_library() -> tuple[Path | None, str]:
    """The plugin library for the current sources if it is built (never builds), and a status line."""
    try:
        library = native.plugin_library_path(build=False)
    except (FileNotFoundError, _build.BuildError, OSError) as err:
        return None, str(err)
    if os.environ.get("TORCHTRT_PLUGINS_LIBRARY"):
        return library, f"TORCHTRT_PLUGINS_LIBRARY={library}"
    if library.parent == _build.PREBUILT_DIR:
        return library, f"{library} (prebuilt, from the wheel)"
    return library, str(library)


def _launcher_check(section: str, library: Path | None) -> Check:
    """The launcher library our ops' eager CUDA kernels call; it is built (or shipped) beside the plugin library."""
    name = "op launcher library"
    if os.environ.get("TORCHTRT_PLUGINS_LIBRARY"):
        return Check(section, name, INFO, "not checked: TORCHTRT_PLUGINS_LIBRARY names the plugin library only")
    if library is None:
        return Check(section, name, MISSING, "built with the plugin library (missing)", "torchtrt-plugins build")
    launchers = library.parent / _build.LAUNCHER_LIBRARY_NAME
    if launchers.is_file():
        return Check(section, name, OK, f"{launchers} (the ops' eager CUDA kernels)")
    fix = "reinstall torchtrt-plugins" if _build.prebuilt_libraries() is not None else "torchtrt-plugins build"
    return Check(section, name, MISSING, f"{launchers} does not exist", fix)


def _eager_kernel_check(section: str) -> Check:
    """Which flavour of the C++ eager kernel declared ops get (the first that can serve, or the one
    TORCHTRT_PLUGINS_EAGER names), and how each stands; without one, the Python path."""
    from .sdk import eager_kernel

    name = "C++ eager kernel"
    states = {flavour: eager_kernel.status(flavour) for flavour in eager_kernel.FLAVOURS}
    detail = "; ".join(f"{flavour}: {text}" for flavour, (_, text) in states.items())
    if eager_kernel.disabled():
        return Check(section, name, INFO, f"{eager_kernel.ENV}=python: the Python path serves ({detail})")
    serving = next((f for f in eager_kernel.chosen() if states[f][0]), None)
    if serving is None:
        return Check(
            section,
            name,
            OPTIONAL,
            f"none can serve, eager calls take the Python path ({detail})",
            "install a C++ compiler and the CUDA runtime headers (or a wheel built with torch present)",
        )
    return Check(section, name, OK, f"{serving} serves ({detail})")


def _environment_checks() -> list[Check]:
    section = "Python and torch"
    import torchtrt_plugins

    checks = [
        Check(section, "python", OK, sys.version.split()[0]),
        Check(section, "torch", OK, torch.__version__),
        Check(
            section,
            "torchtrt_plugins",
            OK,
            f"{torchtrt_plugins.__version__} ({Path(torchtrt_plugins.__file__).parent})",
        ),
    ]
    checks.append(_eager_kernel_check(section))
    section = "GPU and CUDA"
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        count = torch.cuda.device_count()
        checks.append(Check(section, "GPU", OK, f"{torch.cuda.get_device_name()} (sm_{major}{minor}), {count} visible"))
    elif torch.version.cuda is None:
        checks.append(
            Check(
                section,
                "GPU",
                MISSING,
                "this torch is a CPU-only build",
                "install a CUDA build of torch on a GPU machine for the CUDA ops, the gpu/trt tiers and benchmarks; "
                "the cpu tier needs none",
            )
        )
    else:
        checks.append(
            Check(
                section,
                "GPU",
                MISSING,
                "no CUDA GPU visible to torch",
                "check nvidia-smi and CUDA_VISIBLE_DEVICES; the cpu tier runs without a GPU",
            )
        )
    if torch.version.cuda:
        checks.append(Check(section, "CUDA runtime (torch)", OK, torch.version.cuda))
    else:
        checks.append(Check(section, "CUDA runtime (torch)", INFO, "none (CPU-only torch)"))
    driver = driver_version()
    checks.append(
        Check(section, "NVIDIA driver", OK, driver)
        if driver
        else Check(section, "NVIDIA driver", INFO, "not found (no nvidia-smi)")
    )
    return checks


def _program_check(section: str, name: str, program: str, missing: str, detail: str, fix: str) -> Check:
    """OK with the path where ``program`` is on PATH, else ``missing`` with its detail and fix."""
    path = shutil.which(program)
    return Check(section, name, OK, path) if path else Check(section, name, missing, detail, fix)


def _toolchain_checks() -> list[Check]:
    section = "Toolchain (for `torchtrt-plugins build`)"
    nvcc = _build.nvcc_path()
    checks = [
        Check(section, "nvcc", OK, f"{nvcc} (CUDA {nvcc_version(nvcc)})")
        if nvcc
        else Check(section, "nvcc", MISSING, "not found", "install the CUDA toolkit, or set CUDA_HOME to it")
    ]
    checks += [
        _program_check(section, "cmake", "cmake", MISSING, "not found", "pip install cmake"),
        _program_check(
            section, "ninja", "ninja", OPTIONAL, "not found (builds use make)", "pip install ninja for faster builds"
        ),
        _program_check(
            section,
            "C++ compiler",
            os.environ.get("CXX", "c++"),
            MISSING,
            "not found",
            "install g++ (apt-get install g++)",
        ),
    ]
    checks.append(Check(section, "CUDA architectures", INFO, f"sm_{_build.cuda_archs()} (TORCHTRT_PLUGINS_CUDA_ARCHS)"))
    return checks


def _tensorrt_checks() -> list[Check]:
    section = "TensorRT"
    headers = _build.find_tensorrt_headers()
    if headers.include is not None:
        checks = [Check(section, "TensorRT headers", OK, headers.describe())]
    elif _build.prebuilt_libraries() is not None:  # only a build from the sources needs them
        checks = [Check(section, "TensorRT headers", OPTIONAL, headers.describe(), _build.HEADERS_NEEDED)]
    else:
        checks = [Check(section, "TensorRT headers", MISSING, headers.describe(), _build.HEADERS_NEEDED)]
    fixes = {
        "tensorrt": (MISSING, "pip install tensorrt on a GPU machine (needed to build engines; the trt tier)"),
        "torch_tensorrt": (
            MISSING,
            "pip install -e '.[trt]' (torch_tensorrt.compile, torch.compile(backend='tensorrt'))",
        ),
        "tensorrt_rtx": (OPTIONAL, "pip install -e '.[rtx]' (NVIDIA's plugin registry without a GPU; the rtx tier)"),
    }
    for name, (state, fix) in fixes.items():
        version, why = _module_version(name)
        checks.append(Check(section, name, OK, version) if version else Check(section, name, state, why, fix))
    trt = _compat.tensorrt()
    checks.append(
        Check(section, "TensorRT API in use", INFO, f"{trt.__name__} (TORCHTRT_PLUGINS_TENSORRT picks one)")
        if trt
        else Check(section, "TensorRT API in use", INFO, "none")
    )
    section = "Benchmark extras"
    gpu = torch.cuda.is_available()
    extras = {
        "triton": (MISSING if gpu else OPTIONAL, "pip install triton (torch.compile on GPU and do_bench timing)"),
        "matplotlib": (OPTIONAL, "pip install matplotlib (benchmark plots)"),
        "tqdm": (OPTIONAL, "pip install tqdm (progress bar)"),
    }
    for name, (state, fix) in extras.items():
        version, why = _module_version(name)
        checks.append(Check(section, name, OK, version) if version else Check(section, name, state, why, fix))
    return checks


def _native_checks() -> list[Check]:
    section = "Native pieces"
    library, status = cached_plugin_library()
    checks = [
        Check(section, "plugin library", OK, status)
        if library
        else Check(section, "plugin library", MISSING, status, "torchtrt-plugins build")
    ]
    if library is not None and library.parent.joinpath(_build.HARNESS_LIBRARY_NAME).is_file():
        checks.append(Check(section, "conformance harness", OK, str(library.parent / _build.HARNESS_LIBRARY_NAME)))
    checks.append(_launcher_check(section, library))
    testing_version, why = _module_version("torchtrt_plugins.testing")
    hook = testing_version is not None and hasattr(importlib.import_module("torchtrt_plugins.testing"), "bench_enqueue")
    checks.append(
        Check(
            section,
            "harness Python API",
            OK if testing_version else OPTIONAL,
            "torchtrt_plugins.testing" + (" (bench_enqueue: yes)" if hook else " (bench_enqueue: no)")
            if testing_version
            else why,
        )
    )
    return checks


def _registry() -> tuple[Any, str]:
    trt = _compat.tensorrt()
    if trt is None:
        return None, "no TensorRT Python API"
    try:
        return trt.get_plugin_registry(), trt.__name__
    except Exception as err:  # noqa: BLE001
        return None, f"{trt.__name__}.get_plugin_registry() failed: {err}"


def _op_checks() -> list[Check]:
    section = "Ops and plugins"
    checks = []
    registry, flavour = _registry()
    library, _ = cached_plugin_library()
    load_note = ""
    if registry is not None and library is not None:
        try:
            native.load_plugins(registry)
        except Exception as err:  # noqa: BLE001 - reported below as missing creators
            load_note = f" (loading {library.name} failed: {err})"
    converters_on = _compat.torch_tensorrt() is not None
    for entry in op_registry.all_ops():
        spec = entry.spec
        qualname = f"{spec_mod.NAMESPACE}::{spec.name}"
        defined = hasattr(getattr(torch.ops, spec_mod.NAMESPACE), spec.name)
        kernels = [
            key for key in ("CPU", "CUDA") if defined and torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key)
        ]
        tactics = ", ".join(f"{t.value}={t.name}" for t in spec.tactics) or "none"
        detail = (
            f"torch.ops.{qualname.replace('::', '.')} kernels [{', '.join(kernels)}]; plugin "
            f"{'/'.join(spec.creator_key)}; tactics {tactics}; converter "
            f"{'registered' if converters_on else 'off (no torch_tensorrt)'}"
        )
        checks.append(
            Check(
                section,
                spec.name,
                OK if defined else MISSING,
                detail,
                "" if defined else "reinstall: pip install -e . --no-build-isolation",
            )
        )
        if registry is None:
            checks.append(Check(section, f"{spec.name} creator", INFO, f"TensorRT registry not checked: {flavour}"))
            continue
        try:
            present = registry.get_creator(*spec.creator_key) is not None
        except Exception:  # noqa: BLE001 - some bindings raise for unknown creators
            present = False
        checks.append(
            Check(section, f"{spec.name} creator", OK, f"in the {flavour} plugin registry")
            if present
            else Check(
                section,
                f"{spec.name} creator",
                MISSING,
                f"not in the {flavour} plugin registry{load_note}",
                "torchtrt-plugins build, then torchtrt_plugins.load_plugins()",
            )
        )
    return checks


def _benchmark_checks() -> list[Check]:
    path = benchmarks_dir()
    return [Check("Benchmarks", "scripts", OK, f"{path} ({', '.join(p.stem for p in _bench_files(path))})")]


def collect_checks() -> list[Check]:
    checks: list[Check] = []
    for collect in (
        _environment_checks,
        _toolchain_checks,
        _tensorrt_checks,
        _native_checks,
        _op_checks,
        _benchmark_checks,
    ):
        try:
            checks += collect()
        except Exception as err:  # noqa: BLE001 - doctor reports, it never crashes
            checks.append(
                Check(collect.__name__.strip("_").replace("_", " "), "error", MISSING, f"{type(err).__name__}: {err}")
            )
    return checks


def format_checks(checks: Sequence[Check]) -> str:
    lines, section = [], None
    for check in checks:
        if check.section != section:
            section = check.section
            lines += ["", section]
        lines.append(f"  {_LABELS[check.state]:<10}{check.name:<26}{check.detail}")
        if check.fix and check.state in (MISSING, OPTIONAL):
            lines.append(f"  {'':<10}{'':<26}-> {check.fix}")
    missing = [c.name for c in checks if c.state == MISSING]
    lines += ["", f"missing: {', '.join(missing)}" if missing else "nothing missing"]
    return "\n".join(lines).lstrip("\n")


def cmd_doctor(args: argparse.Namespace) -> int:
    _say(format_checks(collect_checks()))
    return 0


# ------------------------------------------------------------------------------------------ build


def plugin_build_prerequisites() -> str | None:
    """Why the plugin library cannot be built from the sources here, or None."""
    return "; ".join(_build.plugin_build_prerequisites()) or None


def _indent(text: str, prefix: str = "      ") -> str:
    return "\n".join(prefix + line for line in text.strip().splitlines())


def cmd_build(args: argparse.Namespace) -> int:
    failed = skipped = False
    _say("plugin library (TensorRT IPluginV3 plugins + conformance harness)")
    prebuilt = None if args.force else _build.prebuilt_libraries()
    reason = plugin_build_prerequisites()
    if prebuilt is not None:
        _say(f"  prebuilt (from the wheel; --force builds from the sources): {prebuilt.library}")
        _say(f"  harness: {prebuilt.harness}")
    elif reason:
        skipped = True
        _say(f"  skipped: {reason}")
    else:
        try:
            built = _build.build_plugin_library(force=args.force)
            _say(f"  {'built' if built.built_now else 'up to date (cached)'}: {built.library}")
            _say(f"  harness: {built.harness if built.harness else 'none (csrc/harness/ not in the sources)'}")
            _say(f"  launchers (the ops' eager CUDA kernels): {built.launchers or 'missing'}")
        except _build.BuildError as err:
            failed = True
            _say("  FAILED: the plugin library did not build:")
            _say(_indent(str(err)))
    if failed:
        _say("build failed (see above)")
        return 1
    if skipped and args.strict:
        _say("some pieces were skipped and --strict was given")
        return 1
    _say("done" + (" (some pieces skipped; see above)" if skipped else ""))
    return 0


# ------------------------------------------------------------------------------------------ bench


BENCHMARKS_PACKAGE = "torchtrt_plugins.benchmarks"


def benchmarks_dir() -> Path:
    """The installed ``torchtrt_plugins/benchmarks`` package (one ``bench_<op>.py`` per op)."""
    return Path(importlib.import_module(BENCHMARKS_PACKAGE).__file__).resolve().parent


def _bench_files(path: Path) -> list[Path]:
    # Op benchmarks first, the model-level one last.
    return sorted(path.glob("bench_*.py"), key=lambda p: (p.stem == "bench_model", p.stem))


def import_benchmarks():
    """``torchtrt_plugins.benchmarks.common``, the shared benchmark machinery."""
    return importlib.import_module(f"{BENCHMARKS_PACKAGE}.common")


def load_benchmarks(path: Path | None = None) -> tuple[list[Any], list[str]]:
    """Every ``BENCHMARK`` of ``bench_*.py``, and the scripts that failed to import (with why)."""
    found, failures = [], []
    for file in _bench_files(path or benchmarks_dir()):
        try:
            module = importlib.import_module(f"{BENCHMARKS_PACKAGE}.{file.stem}")
        except Exception as err:  # noqa: BLE001 - one broken script must not stop the others
            failures.append(f"{file.name}: {type(err).__name__}: {err}")
            continue
        benchmark = getattr(module, "BENCHMARK", None)
        if benchmark is None:
            failures.append(f"{file.name}: defines no BENCHMARK")
        else:
            found.append(benchmark)
    return found, failures


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def cmd_bench(args: argparse.Namespace) -> int:
    common = import_benchmarks()
    benchmarks, failures = load_benchmarks()
    wanted = _split(args.ops)
    if wanted:
        names = [b.name for b in benchmarks]
        unknown = [name for name in wanted if name not in names]
        if unknown:
            _say(f"bench: unknown --ops {unknown}; available: {names}")
            return 2
        benchmarks = [b for b in benchmarks if b.name in wanted]
    try:
        dtypes = common.parse_dtypes(args.dtypes)
        device = common.resolve_device(args.device)
    except ValueError as err:
        _say(f"bench: {err}")
        return 2
    out = Path(args.out)
    _say(
        f"torchtrt-plugins bench: {', '.join(b.name for b in benchmarks) or 'nothing'} on {device}"
        f"{' (--quick)' if args.quick else ''} -> {out}"
    )
    if device.type == "cpu":
        _say(
            "  no CUDA GPU: running what the CPU can run (our ops' CPU kernels are the reference implementations);"
            " GPU-only providers are listed as not run, with the reason"
        )
    try:
        report = common.run_suite(
            benchmarks,
            device=str(device),
            quick=args.quick,
            dtypes=dtypes,
            providers=_split(args.providers) or None,
            csv_path=out / "results.csv",
            show_progress=not args.no_progress,
            timers=common.parse_timers(args.timer),
            repeats=args.repeats,
            sizes=common.parse_sizes(args.sizes),
            placements=args.placements,
            record_path=args.record,
        )
    except ValueError as err:
        _say(f"bench: {err}")
        return 2
    _say("")
    _say(report.text())
    for failure in failures:
        _say(f"benchmark script not run: {failure}")
    if not args.no_plots:
        _say(_plots(out / "results.csv", out))
    if args.strict and (report.errors or failures):
        _say(f"--strict: {len(report.errors)} provider runs failed or disagreed with the reference")
        return 1
    return 0


def _plots(csv_path: Path, out: Path) -> str:
    try:
        plot = importlib.import_module(f"{BENCHMARKS_PACKAGE}.plot")
        paths = plot.plot(csv_path, out)
    except ImportError as err:
        return f"plots: {err}"
    except (OSError, ValueError) as err:
        return f"plots: not drawn ({err})"
    return "plots: " + (", ".join(p.name for p in paths) if paths else "nothing to draw") + f" in {out}"


# ------------------------------------------------------------------------------------------ sdk


def declared_library(module: str, name: str) -> Any:
    """The ``sdk.PluginLibrary`` named ``name`` that ops declared by importing ``module`` are built into (``declare``
    builds and loads nothing, so importing it does not start the very build this generator is a step of)."""
    importlib.import_module(module)
    libraries = {}
    for entry in op_registry.registered_ops():
        library = getattr(entry.declaration, "library", None)
        if library is not None:
            libraries.setdefault(library.name, {})[id(library)] = library
    found = list(libraries.get(name, {}).values())
    if len(found) != 1:
        known = sorted(libraries) or "none"
        what = "several libraries" if found else "no library"
        raise ValueError(f"importing {module} declares ops on {what} named {name!r} (libraries: {known})")
    return found[0]


def _imported_files(module: str) -> list[Path]:
    """The files the generated tables depend on: the imported modules of ``module``'s top-level package and of
    torchtrt_plugins, and the build recipe."""
    from . import sdk

    roots = [Path(__file__).resolve().parent]
    top = Path(importlib.import_module(module.partition(".")[0]).__file__).resolve()
    roots.append(top.parent if top.name == "__init__.py" else top)
    files = {sdk.include_dir() / "sdk" / "sdk_build.json"}
    for loaded in list(sys.modules.values()):
        path = getattr(loaded, "__file__", None)
        if path and Path(path).is_file():
            path = Path(path).resolve()
            if any(path == root or root in path.parents for root in roots):
                files.add(path)
    return sorted(files)


def _make_escape(path: Path) -> str:
    return str(path).replace("$", "$$").replace("#", "\\#").replace(" ", "\\ ")


def cmd_sdk_generate(args: argparse.Namespace) -> int:
    from . import sdk

    try:
        library = declared_library(args.module, args.library)
    except (ImportError, ValueError) as err:
        print(f"sdk generate: {err}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    try:
        sources = sdk.generated_sources(library.declarations, args.archs or None)
    except ValueError as err:  # a kernel written in Python that does not compile (kernels.describe.KernelError)
        print(f"sdk generate: {err}", file=sys.stderr)
        return 2
    for file_name, text in sources.items():
        (out / file_name).write_text(text)
        written.append(out / file_name)
    if args.depfile:
        inputs = " \\\n  ".join(_make_escape(p) for p in _imported_files(args.module))
        Path(args.depfile).write_text(f"{_make_escape(written[0])}: \\\n  {inputs}\n")
    ops = ", ".join(d.qualname for d in library.declarations)
    _say(f"generated {', '.join(p.name for p in written)} of library {library.name} ({ops}) in {out}")
    return 0


def cmd_sdk(args: argparse.Namespace) -> int:
    from . import sdk

    if args.sdk_command == "generate":
        return cmd_sdk_generate(args)
    headers = _build.find_tensorrt_headers()
    if not (args.cmake_dir or args.include_dir or args.tensorrt_include_dir):
        _say(f"CMake package (-Dtorchtrt_plugins_DIR=): {sdk.cmake_dir()}")
        _say(f"SDK headers: {sdk.include_dir()}")
        _say(f"TensorRT headers: {headers.describe()}")
        return 0
    # One path per line, always in this order (the CMake package reads them so).
    for wanted, path in ((args.cmake_dir, sdk.cmake_dir()), (args.include_dir, sdk.include_dir())):
        if wanted:
            _say(str(path))
    if args.tensorrt_include_dir:
        if headers.include is None:
            print(headers.error(), file=sys.stderr)
            return 1
        _say(str(headers.include))
    return 0


def cmd_zoo(args: argparse.Namespace) -> int:
    try:
        if not args.time:
            import torch_tensorrt  # noqa: F401

        from . import zoo
    except ImportError as err:
        _say(f"zoo: needs torchvision, transformers{'' if args.time else ' and Torch-TensorRT'} ({err})")
        return 2
    names = _split(args.models) or list(zoo.MODELS)
    unknown = [name for name in names if name not in zoo.MODELS]
    if unknown:
        _say(f"zoo: unknown --models {unknown}; available: {list(zoo.MODELS)}")
        return 2
    if args.time:
        import torch

        timing = importlib.import_module(f"{BENCHMARKS_PACKAGE}.zoo_timing")
        device = "cuda" if torch.cuda.is_available() else "cpu"
        results = timing.run(names, device=device, csv_path=args.csv, record=args.record, quick=args.quick, log=_say)
        return 1 if any(r.status != "ok" for r in results) else 0
    zoo.table(names, full_tensorrt=args.full_tensorrt, inductor=args.inductor, log=_say)
    return 0


# ------------------------------------------------------------------------------------------ main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchtrt-plugins",
        description="CUDA ops for eager PyTorch, torch.compile and TensorRT engines: check, build, benchmark.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{doctor,build,bench,sdk,zoo}")
    doctor = sub.add_parser("doctor", help="what is present and what to do about what is missing")
    doctor.set_defaults(func=cmd_doctor)
    build = sub.add_parser("build", help="build the plugin library and, with a GPU, the CUDA ops")
    build.add_argument("--force", action="store_true", help="rebuild the plugin library even if cached")
    build.add_argument("--strict", action="store_true", help="exit 1 when a piece is skipped, too")
    build.set_defaults(func=cmd_build)
    bench = sub.add_parser("bench", help="run the benchmarks; CSV, plots and a table into --out")
    bench.add_argument("--out", default="bench_results", help="output folder (default bench_results/)")
    bench.add_argument("--ops", help="comma-separated benchmark names (default all: the ops, then decoder_block)")
    bench.add_argument("--dtypes", help="comma-separated, e.g. bf16,fp16,fp32 (default: each benchmark's plan)")
    bench.add_argument("--quick", action="store_true", help="a few sizes, one dtype: a couple of minutes on a GPU")
    bench.add_argument("--providers", help="comma-separated glob patterns, e.g. 'torchtrt*,torch.compile'")
    bench.add_argument("--device", default="auto", help="auto (default: cuda when visible), cuda or cpu")
    bench.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    import_benchmarks().add_timing_arguments(bench)
    import_benchmarks().add_record_argument(bench)
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.add_argument("--strict", action="store_true", help="exit 1 when a provider errors or disagrees")
    bench.set_defaults(func=cmd_bench)
    sdk = sub.add_parser("sdk", help="where the C++ SDK is (CMake package, headers); generate a library's tables")
    sdk.add_argument("--cmake-dir", action="store_true", help="print the CMake package's folder (torchtrt_plugins_DIR)")
    sdk.add_argument("--include-dir", action="store_true", help="print the SDK headers' folder")
    sdk.add_argument(
        "--tensorrt-include-dir", action="store_true", help="print the TensorRT headers' folder (exit 1 if not found)"
    )
    sdk.set_defaults(func=cmd_sdk)
    sdk_sub = sdk.add_subparsers(dest="sdk_command", metavar="{generate}")
    generate = sdk_sub.add_parser("generate", help="write a library's generated C++ tables from its op declarations")
    generate.add_argument("--module", required=True, help="Python module whose import declares the ops, e.g. myops")
    generate.add_argument("--library", required=True, help="the sdk.PluginLibrary's name, e.g. myops")
    generate.add_argument("--out", required=True, help="folder for the generated .cpp files")
    generate.add_argument("--depfile", help="also write a Makefile-style depfile (the Python files imported)")
    generate.add_argument(
        "--archs", help="CUDA architectures to compile kernels written in Python for (CMake syntax, e.g. '80;90')"
    )
    zoo = sub.add_parser("zoo", help="engines per detector of the model zoo under Torch-TensorRT, with and without us")
    zoo.add_argument("--models", help="comma-separated zoo model names (default all)")
    zoo.add_argument(
        "--full-tensorrt", action="store_true", help="partition as full TensorRT does (its boolean-index converter)"
    )
    zoo.add_argument(
        "--inductor", action="store_true", help="add the engines with the Inductor plugins' switch on (a column)"
    )
    zoo.add_argument(
        "--time",
        action="store_true",
        help="instead: time each model eagerly and as its converted graph (GPU and host time; needs no Torch-TensorRT)",
    )
    zoo.add_argument("--csv", default="bench_results/zoo.csv", help="with --time: the results CSV to append to")
    zoo.add_argument("--record", metavar="PATH", help="with --time: also append the rows to this CSV")
    zoo.add_argument("--quick", action="store_true", help="with --time: GPU time only, shorter timing")
    zoo.set_defaults(func=cmd_zoo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
