"""What the tt tests share; imported inside the worker (Torch-TensorRT importable there only)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
import torch

OURS = "torchtrt."


def torch_tensorrt():
    import torch_tensorrt

    return torch_tensorrt


def require_plugin_library() -> None:
    """Skip unless our plugin library is there or can be built (the converters create plugins from it)."""
    from torchtrt_plugins import _build

    if not os.environ.get("TORCHTRT_PLUGINS_LIBRARY") and (reason := _build.plugin_library_unavailable()):
        pytest.skip(f"tt tier: {reason}")


def targets_by_submodule(partitioned: torch.fx.GraphModule) -> dict[str, list[str]]:
    """``{submodule name: [call targets]}`` of a partitioned module (``_run_on_acc_*`` go to TensorRT)."""
    out = {}
    for name, sub in partitioned.named_children():
        if isinstance(sub, torch.fx.GraphModule):
            out[name] = [str(n.target) for n in sub.graph.nodes if n.op == "call_function"]
    return out


def placement(partitioned: torch.fx.GraphModule) -> dict[str, list[str]]:
    """Our ops by where they run: ``{"trt": [...], "torch": [...]}``."""
    where = {"trt": [], "torch": []}
    for name, targets in targets_by_submodule(partitioned).items():
        ours = [t for t in targets if t.startswith(OURS)]
        where["trt" if "_run_on_acc" in name else "torch"].extend(ours)
    top = [str(n.target) for n in partitioned.graph.nodes if n.op == "call_function"]
    where["torch"].extend(t for t in top if t.startswith(OURS))
    return where


def dryrun(program: torch.export.ExportedProgram, inputs: list, **settings) -> torch.fx.GraphModule:
    """``torch_tensorrt.dynamo.compile(..., dryrun=True)``: export, decompositions, lowering, partitioning."""
    options = {"min_block_size": 1, "offload_module_to_cpu": True, **settings}
    return torch_tensorrt().dynamo.compile(program, arg_inputs=inputs, dryrun=True, **options)


def torch_compile_dryrun(model: torch.nn.Module, *args: torch.Tensor) -> tuple[torch.Tensor, list[dict]]:
    """``torch.compile(model, backend="tensorrt")`` in dry-run mode, called once: ``(output, placements)``, where
    ``placements`` says where our ops landed in each graph the backend partitioned."""
    import torch_tensorrt.dynamo.backend.backends as backends

    seen, original = [], backends.compile_module

    def recording(gm, *more, **kwargs):
        partitioned = original(gm, *more, **kwargs)
        seen.append(placement(partitioned))
        return partitioned

    backends.compile_module = recording
    try:
        options = {"dryrun": True, "min_block_size": 1}
        return torch.compile(model, backend="tensorrt", dynamic=False, options=options)(*args), seen
    finally:
        backends.compile_module = original
        torch._dynamo.reset()


@contextlib.contextmanager
def converter_calls() -> Iterator[list]:
    """Every ``PluginCall`` our converters emit while the block runs (they call ``_factory.emit``)."""
    from torchtrt_plugins.converters import _factory

    calls, original = [], _factory.emit

    def recording(ctx, call, target, name):
        calls.append(call)
        return original(ctx, call, target, name)

    _factory.emit = recording
    try:
        yield calls
    finally:
        _factory.emit = original


@contextlib.contextmanager
def plans_built() -> Iterator[list[bytes]]:
    """The plans RTX's builder builds while the block runs (``Builder.build_serialized_network``).

    Torch-TensorRT for RTX deserializes each plan right after building it (``_TRTInterpreter.run``), which needs a
    CUDA device: without one the deserialization returns None and Torch-TensorRT fails there. That failure ends the
    block quietly, and only that one: on a machine without CUDA, after every plan asked for was built and one of them
    was refused by the runtime; any other error propagates.
    """
    import tensorrt_rtx

    plans, refused = [], []
    build, deserialize = tensorrt_rtx.Builder.build_serialized_network, tensorrt_rtx.Runtime.deserialize_cuda_engine

    def recording_build(builder, network, config):
        plan = build(builder, network, config)
        plans.append(None if plan is None else bytes(plan))
        return plan

    def recording_deserialize(runtime, *args, **kwargs):
        engine = deserialize(runtime, *args, **kwargs)
        refused.append(engine is None)
        return engine

    tensorrt_rtx.Builder.build_serialized_network = recording_build
    tensorrt_rtx.Runtime.deserialize_cuda_engine = recording_deserialize
    try:
        yield plans
    except Exception:
        if torch.cuda.is_available() or not plans or not all(plans) or refused[-1:] != [True]:
            raise
    finally:
        tensorrt_rtx.Builder.build_serialized_network = build
        tensorrt_rtx.Runtime.deserialize_cuda_engine = deserialize


def serialized_engine(program: torch.export.ExportedProgram, inputs: list, **settings) -> bytes:
    """The plan ``convert_exported_program_to_serialized_trt_engine`` builds (conversion, then RTX's builder);
    on a machine without CUDA, the plan as the builder returned it (``plans_built``)."""
    import tensorrt_rtx
    from _nvidia import add_plugin_v3

    if not hasattr(tensorrt_rtx.INetworkDefinition, "add_plugin_v3"):
        pytest.skip(f"tt tier: {add_plugin_v3.unavailable_reason(tensorrt_rtx)}")
    options = {"min_block_size": 1, "offload_module_to_cpu": True, **settings}
    engine = None
    with plans_built() as plans:
        engine = torch_tensorrt().dynamo.convert_exported_program_to_serialized_trt_engine(
            program, arg_inputs=inputs, **options
        )
    if engine is not None:
        return bytes(engine)
    assert len(plans) == 1, f"expected one plan, the builder built {len(plans)}"
    return plans[0]
