"""Testing tools: models for lowering tests and benchmarks (``models``), the plugin conformance harness
(``harness``: ``run_plugin``, ``run_call``, ``bench_enqueue``) and the plugin-in-the-loop graph runner
(``runner``: ``run_graph``) and ``check_op``, which tests an op with a plugin in one call."""

from .check import CheckReport, check_op
from .harness import (
    HarnessError,
    HarnessResult,
    ShapeArg,
    TensorArg,
    Violation,
    bench_enqueue,
    broken_plugins_library,
    run_call,
    run_plugin,
)
from .runner import PluginGraphRunner, RunnerResult, run_graph

__all__ = [
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
    "broken_plugins_library",
    "run_call",
    "run_graph",
    "run_plugin",
]
