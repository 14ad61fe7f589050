"""Plugin-in-the-loop graph runner: an FX graph where every ``torch.ops.torchtrt.*`` node runs through the
converter's plan and the TensorRT plugin in the conformance harness, and everything else runs eagerly.

It answers "does this model give the same results when our ops run as TensorRT plugins?" without TensorRT:
each plugin node goes FX node -> ``converters.plan`` -> :func:`harness.run_call` (the full lifecycle, with
the rule checks) and its output is the plugin's own (by default the runtime plugin re-created from its
serialized fields, as a deserialized engine would run it). Without a GPU the plugin cannot enqueue: the node
then runs eagerly, its build-phase checks still count, and it is listed in ``RunnerResult.fell_back``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx

from ..plan import entry_for_target, plan
from .harness import HarnessError, HarnessResult, Violation, run_call

__all__ = ["PluginGraphRunner", "RunnerResult", "run_graph"]


@dataclass
class RunnerResult:
    outputs: Any
    #: Harness results per plugin node, by node name.
    results: dict[str, HarnessResult] = field(default_factory=dict)
    #: Plugin nodes computed eagerly because the plugin could not be enqueued (no GPU), with the reason.
    fell_back: dict[str, str] = field(default_factory=dict)

    @property
    def violations(self) -> list[Violation]:
        return [v for result in self.results.values() for v in result.violations]

    def assert_conformant(self) -> None:
        for result in self.results.values():
            result.assert_conformant()


class PluginGraphRunner(torch.fx.Interpreter):
    """Runs a GraphModule with torchtrt ops executed by their TensorRT plugins (see the module docstring)."""

    def __init__(
        self,
        module: torch.fx.GraphModule,
        library: str | Path | None = None,
        tactic: int = 0,
        phase: str = "runtime",
        **harness_kwargs: Any,
    ):
        super().__init__(module)
        self.library = library
        self.tactic = tactic
        self.phase = phase
        self.harness_kwargs = harness_kwargs
        self.results: dict[str, HarnessResult] = {}
        self.fell_back: dict[str, str] = {}
        self._node_name = ""

    def run_node(self, n: torch.fx.Node) -> Any:
        self._node_name = n.name
        return super().run_node(n)

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        # symbolic_trace records the op packet (torch.ops.torchtrt.rms_norm), export the overload.
        overload = target.default if isinstance(target, torch._ops.OpOverloadPacket) else target
        entry = entry_for_target(overload)
        if entry is None:
            return super().call_function(target, args, kwargs)
        call = plan(entry.spec, args, kwargs)
        result = run_call(call, *call.tensor_inputs, library=self.library, tactics=[self.tactic], **self.harness_kwargs)
        self.results[self._node_name] = result
        if result.stopped:
            raise HarnessError(f"node {self._node_name} ({target}): the harness stopped: {result.stopped}")
        if result.enqueue_skipped:
            self.fell_back[self._node_name] = result.enqueue_skipped
            return super().call_function(target, args, kwargs)
        record = result.run(self.tactic, self.phase)
        if record.status != "ok":
            raise HarnessError(
                f"node {self._node_name} ({target}): the {self.phase} enqueue of tactic {self.tactic} failed: "
                f"{record.status}\n{result.summary()}"
            )
        outputs = record.outputs[: call.num_op_outputs]
        return outputs[0] if call.num_op_outputs == 1 else tuple(outputs)


def run_graph(
    module: torch.fx.GraphModule,
    *args: Any,
    library: str | Path | None = None,
    tactic: int = 0,
    phase: str = "runtime",
    **harness_kwargs: Any,
) -> RunnerResult:
    """Run ``module(*args)`` with its torchtrt ops as TensorRT plugins; returns outputs, results, violations.

    ``tactic`` is the tactic every plugin enqueues with; ``phase`` picks whose outputs flow on: "runtime"
    (re-created from serialized fields, the default) or "build" (a clone of the build plugin). Other keyword
    arguments go to :func:`torchtrt_plugins.testing.harness.run_plugin` (e.g. ``gate_timeout_s``).
    """
    runner = PluginGraphRunner(module, library=library, tactic=tactic, phase=phase, **harness_kwargs)
    outputs = runner.run(*args)
    return RunnerResult(outputs=outputs, results=runner.results, fell_back=runner.fell_back)
