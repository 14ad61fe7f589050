"""Testing tools for an op's author: the plugin conformance harness (``harness``: ``run_plugin``, ``run_call``,
``bench_enqueue``), the plugin-in-the-loop graph runner (``runner``: ``run_graph``) and ``check_op``, which tests an
op with a plugin in one call. Our own tests' fixtures live in the repository's ``tests/``, not here."""

from .check import CHECKS, CheckReport, check_op
from .harness import (
    HarnessError,
    HarnessResult,
    ShapeArg,
    TensorArg,
    Violation,
    bench_enqueue,
    run_call,
    run_plugin,
)
from .runner import PluginGraphRunner, RunnerResult, run_graph

__all__ = [
    "CHECKS",
    "CheckReport",
    "check_op",
    "HarnessError",
    "HarnessResult",
    "PluginGraphRunner",
    "RunnerResult",
    "ShapeArg",
    "TensorArg",
    "Violation",
    "bench_enqueue",
    "run_call",
    "run_graph",
    "require_sdk_build",
    "run_plugin",
    "sdk_build_unavailable",
]


def sdk_build_unavailable() -> str | None:
    """Why declared-op libraries (``sdk.PluginLibrary``) cannot be built here, or None when they can."""
    from .. import _build

    missing = _build.sdk_build_prerequisites()
    return "declared-op libraries cannot be built here: " + "; ".join(missing) if missing else None


def require_sdk_build() -> None:
    """In a test module, before anything declares ops on an SDK library: skip the module, with the reason, where
    such libraries cannot be built (no nvcc, or no TensorRT headers: e.g. a wheel install without them)."""
    import pytest

    reason = sdk_build_unavailable()
    if reason:
        pytest.skip(reason, allow_module_level=True)
