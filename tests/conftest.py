"""Tier markers and their skip reasons, the fixtures every tier shares, and the global-state guard.

Tests live in tests/<tier>/ and are marked with that tier automatically; a tier whose requirements
are missing is skipped with a reason that says what is missing.

Every test must leave the process as it found it (tests pass in any order): a test that changes an
environment variable, a torch config module (change them only through ``config.patch``), a logger's level or
handlers, torch's global switches or our own switches without restoring them errors in its teardown, naming what
it leaked.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

TIERS = ("cpu", "rtx", "tt", "gpu", "trt")


@functools.cache
def _missing(tier: str) -> str | None:
    import torch

    if tier == "cpu":
        return None
    if tier == "rtx":
        try:
            importlib.import_module("tensorrt_rtx")
        except Exception as err:  # noqa: BLE001
            return f"rtx tier: tensorrt_rtx is not importable ({err}); pip install -e '.[rtx]'"
        return None
    if tier == "tt":  # installs the tier's own Torch-TensorRT environment on first use (tests/tt/tt_environment.py)
        from tt.tt_environment import missing

        return missing()
    if not torch.cuda.is_available():
        return f"{tier} tier: no CUDA GPU visible to torch"
    from torchtrt_plugins import _build

    try:
        _build.launcher_library_path()  # our ops' eager CUDA kernels
    except _build.BuildError as err:
        return f"{tier} tier: the op launcher library is not available ({err})"
    if tier == "trt":
        for module in ("tensorrt", "torch_tensorrt"):
            try:
                importlib.import_module(module)
            except Exception as err:  # noqa: BLE001
                return f"trt tier: {module} is not importable ({err}); pip install -e '.[trt]' on a TensorRT machine"
    return None


def pytest_configure(config):
    # Inductor sets this on its first compile; set it first, to a folder of this run, so that no test changes the
    # environment and no run depends on what an earlier run left in the cache.
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchinductor_tests_")
    # Likewise Triton's cache, which inductor sets on its first GPU compile (<inductor cache>/triton/<device>).
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "triton"))
    # torch's config modules exist before the first test, so the guard below sees a change even in the first test.
    for module in ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config"):
        importlib.import_module(module)
    _share_cores_between_workers()
    config.pluginmanager.register(_KeepCaptureOffTorchTrace(), "keep-capture-off-torch-trace")
    # xdist's loadfile hands out the files with the most tests first unless told otherwise (pytest-xdist 3.6's
    # --loadscope-reorder is on by default): the zoo's few, slowest tests then started last and ran alone for
    # minutes. Collection order instead (pytest_collection_modifyitems below puts the slowest tiers first).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _share_cores_between_workers() -> None:
    """In a pytest-xdist worker, torch (and the processes tests start, through OMP_NUM_THREADS) use the worker's share
    of the cores. Each worker's torch otherwise runs a thread per core, and the workers' OpenMP threads spin against
    each other: on CI's two cores with two workers, the CPU benchmark test took 235 CPU-seconds (97 in the kernel)
    instead of 94."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers <= 1:
        return
    import torch

    threads = max(1, len(os.sched_getaffinity(0)) // workers)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


class _KeepCaptureOffTorchTrace:
    """pytest (9.1 on) attaches its log-capture handlers to every logger that does not propagate, torch's structured
    trace (``torch.__trace``) among them; torch writes that trace whenever the logger has a handler, and its own
    handler drops itself where no trace is asked for (TORCH_TRACE unset). With pytest's attached, every symbolic-shape
    operation (fake tensors, export, compile, a declaration's derivation) built a trace record with its stack: the
    contracts' derivation took 16.2 s instead of 6.7 s (measured). Each phase's handlers are taken off that logger
    inside the logging plugin's own wrappers (trylast: innermost), which put them on; the trace records are
    torch's own diagnostics and no test reads them."""

    @staticmethod
    def _detach() -> None:
        trace = logging.getLogger("torch.__trace")
        for handler in [h for h in trace.handlers if type(h).__module__.startswith("_pytest")]:
            trace.removeHandler(handler)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_collection(self, session):
        self._detach()
        return (yield)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item):
        self._detach()
        return (yield)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item):
        self._detach()
        return (yield)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item, nextitem):
        self._detach()
        return (yield)


def _selects_tt_tier(config) -> bool:
    """Whether the run's paths (the command line's, else testpaths) hold tests/tt or lie inside it."""
    tt = Path(__file__).resolve().parent / "tt"
    paths = [Path(arg.split("::")[0]).resolve() for arg in config.args] or [Path(config.rootpath) / "tests"]
    return any(p == tt or p in tt.parents or tt in p.parents for p in paths)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    """With pytest-xdist workers, build the libraries most test files need here, in the controller, before the
    workers start (xdist starts them in its own, later sessionstart): one build on every core, not one worker
    building while the other waits on the build's lock. A build that fails is left for the tests to report.
    Meanwhile the tt tier's environment is installed (pip, mostly one core unpacking) where the run holds the tier:
    every worker's collection would otherwise wait on that install."""
    _KeepCaptureOffTorchTrace._detach()  # the logging plugin's sessionstart wrapper has put its handlers on
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(session.config.option, "numprocesses", None):
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        if _selects_tt_tier(session.config):
            pool.submit(_missing, "tt")  # its outcome is the workers' to report (collection asks again)
        _build_before_workers()


def _build_before_workers() -> None:
    from torchtrt_plugins import _build

    if _build.plugin_library_unavailable() is not None or _build.prebuilt_libraries() is not None:
        return
    try:
        _build.build_plugin_library()
        from torchtrt_plugins import vision

        vision.LIBRARY.build()
    except _build.BuildError:
        pass


#: The tiers in the order their files start (xdist hands files out in collection order, see pytest_configure): the
#: slowest files (Torch-TensorRT partitions of whole models) first, so that none of them starts last and runs alone.
_TIER_ORDER = ("tt", "rtx", "cpu")


def pytest_collection_modifyitems(config, items):
    def tier_rank(item) -> int:
        tier = Path(str(item.fspath)).parent.name
        return _TIER_ORDER.index(tier) if tier in _TIER_ORDER else len(_TIER_ORDER)

    items.sort(key=tier_rank)  # stable: each tier keeps its own order
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
        for name in TIERS:
            if item.get_closest_marker(name) is not None:
                reason = _missing(name)
                if reason:
                    item.add_marker(pytest.mark.skip(reason=reason))
                break


def pytest_report_header(config) -> list[str]:
    """Which torchtrt_plugins is under test (a checkout or an installed wheel) and where its libraries come from."""
    import torchtrt_plugins
    from torchtrt_plugins import _build

    prebuilt = _build.prebuilt_libraries()
    try:
        sources = str(_build.source_dir())
    except _build.BuildError as err:
        sources = str(err)
    return [
        f"torchtrt_plugins: {Path(torchtrt_plugins.__file__).parent}",
        f"  plugin library: {f'prebuilt {prebuilt.directory}' if prebuilt else 'built from the sources on first use'}",
        f"  native sources: {sources}",
        f"  TensorRT headers: {_build.find_tensorrt_headers().describe()}",
    ]


@pytest.fixture
def lowering_as_configured(monkeypatch):
    """The lowering as a user's process has it: no TORCHTRT_PLUGINS_LOWERING and no set_enabled() override, during
    the test and after it (a test that switches it off is undone)."""
    from torchtrt_plugins import lowering

    monkeypatch.delenv(lowering.ENV_VAR, raising=False)
    lowering.set_enabled(None)
    yield
    lowering.set_enabled(None)


@pytest.fixture(scope="session")
def build():
    """The plugin library, the harness and the broken test plugins (``_build.PluginBuild``): prebuilt (a wheel),
    cached or built now. Skips saying what is missing where they can be neither found nor built; fails where a
    build with everything present fails."""
    from torchtrt_plugins import _build

    reason = _build.plugin_library_unavailable()
    if reason:
        pytest.skip(f"needs the plugin library: {reason}")
    try:
        return _build.build_plugin_library()
    except _build.BuildError as err:
        pytest.fail(
            f"the plugin library and harness must build wherever nvcc, cmake and the TensorRT headers are: {err}"
        )


# ------------------------------------------------------------------------------------------ global-state guard

_STATE_BEFORE = pytest.StashKey[dict]()
#: Loggers whose level, handlers and propagation a test must leave as it found them.
_WATCHED_LOGGER_PREFIXES = ("torch", "torchtrt_plugins")


def _config_modules() -> dict[str, Any]:
    from torch.utils._config_module import ConfigModule

    return {name: m for name, m in list(sys.modules.items()) if isinstance(m, ConfigModule)}


def _logger_state(logger: logging.Logger) -> tuple:
    # pytest's own capture handlers come and go with each test phase.
    handlers = frozenset(h for h in logger.handlers if not type(h).__module__.startswith("_pytest"))
    return logger.level, logger.propagate, logger.disabled, handlers


#: Set by torch once per process, to values that depend on nothing a test does: not a test's change. On its first GPU
#: compile, the ptxas bundled with torch (setting it first would change which ptxas Triton runs); on inductor's first
#: C++ (CPU) compile, the address of a Python object its generated code reads.
_SET_ONCE_BY_TORCH = frozenset({"TRITON_PTXAS_PATH", "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"})

#: Set once per process by a third-party import on the GPU machine's image (Intel OpenMP settings, seen when the MSDA
#: tests first import transformers' Deformable DETR there): the same values whichever test imports it first.
_SET_ONCE_BY_IMPORTS = frozenset({"KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK"})

#: Appended to sys.path once per process when inductor's C++ build first imports setuptools.
_PATHS_ADDED_ONCE = ("setuptools/_vendor",)


def global_state() -> dict[str, Any]:
    """What a test may change only for its own duration."""
    import torch

    environ = {k: v for k, v in os.environ.items() if k not in _SET_ONCE_BY_TORCH | _SET_ONCE_BY_IMPORTS}
    state: dict[str, Any] = {
        "os.environ": environ,
        "cwd": os.getcwd(),
        "sys.path": [p for p in sys.path if not p.endswith(_PATHS_ADDED_ONCE)],
    }
    for name, module in _config_modules().items():
        state[f"config {name}"] = module.get_config_copy()
        # A deleted entry (what a monkeypatch of the module may leave behind) is hidden, not changed.
        state[f"config {name} hidden entries"] = sorted(k for k, e in getattr(module, "_config", {}).items() if e.hide)
    loggers = {"<root>": logging.getLogger()}
    loggers.update(
        (name, logger)
        for name, logger in list(logging.Logger.manager.loggerDict.items())
        if isinstance(logger, logging.Logger) and name.split(".")[0] in _WATCHED_LOGGER_PREFIXES
    )
    state["logging.disable"] = logging.root.manager.disable
    state.update((f"logger {name}", _logger_state(logger)) for name, logger in loggers.items())
    state["torch switches"] = (
        torch.get_default_dtype(),
        torch.is_grad_enabled(),
        torch.are_deterministic_algorithms_enabled(),
        torch.get_num_threads(),
    )
    lowering = sys.modules.get("torchtrt_plugins.lowering")
    if lowering is not None:
        state["torchtrt_plugins.lowering._enabled"] = lowering._enabled
    return state


def _differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    leaks = []
    for key, old in before.items():
        if key not in after or after[key] == old:
            continue
        new = after[key]
        if key.startswith("logger ") and old[:3] == new[:3] and new[3] <= old[3]:
            continue  # a handler gone is torch's lazy setup (torch.__trace drops its own); a handler added is a leak
        if isinstance(old, dict) and isinstance(new, dict):
            changed = sorted(k for k in old.keys() | new.keys() if old.get(k, "<unset>") != new.get(k, "<unset>"))
            detail = ", ".join(f"{k}: {old.get(k, '<unset>')!r} -> {new.get(k, '<unset>')!r}" for k in changed)
            leaks.append(f"{key}: {detail}")
        else:
            leaks.append(f"{key}: {old!r} -> {new!r}")
    return leaks


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_STATE_BEFORE] = global_state()
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    before = item.stash.get(_STATE_BEFORE, None)
    if before is not None:
        leaks = _differences(before, global_state())
        if leaks:
            pytest.fail(
                f"{item.nodeid} leaked global state (restore it: monkeypatch, config.patch):\n  " + "\n  ".join(leaks),
                pytrace=False,
            )
    return result
