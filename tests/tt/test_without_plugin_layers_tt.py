"""Torch-TensorRT-RTX as its users run it: no addPluginV3 adapter, so the networks take no plugin layers (issue 25).

Our validators send our ops to PyTorch, where their eager kernels run, and the lowering leaves norms to TensorRT;
the compile that worked without ``torchtrt_plugins`` still works with it. ``dynamo.compile`` and
``torch.compile(backend="tensorrt")`` are checked up to partitioning (``dryrun``), and the real ``torch.compile``
call up to the plan RTX's builder builds (running it needs a GPU; ``plans_built``).
"""

from __future__ import annotations

import logging

import pytest
import torch
from hf_models import EXPORT_SHAPE, MODELS, RUN_SHAPE, build, export, input_ids, tolerance, torch_tensorrt_inputs
from models import make_rms_norm
from tt_helpers import dryrun, placement, plans_built, targets_by_submodule, torch_compile_dryrun, torch_tensorrt

#: Read by the conftest: this module's worker runs without the test-only addPluginV3 adapter.
ADD_PLUGIN_V3 = False

RMS_NORM = "torchtrt.rms_norm.default"
HIDDEN = 64


class OurOpBetweenLayers(torch.nn.Module):
    """Our op called directly, between two layers Torch-TensorRT converts itself."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.rand(HIDDEN) + 0.5)

    def forward(self, x):
        return torch.ops.torchtrt.rms_norm(x.relu(), self.scale, 1e-6) * 2


def segments(partitioned: torch.fx.GraphModule) -> tuple[int, int]:
    """``(TensorRT engines, PyTorch segments)`` of a partitioned module."""
    names = list(targets_by_submodule(partitioned))
    engines = sum("_run_on_acc" in name for name in names)
    return engines, len(names) - engines


def test_the_worker_has_no_plugin_layers():
    import tensorrt_rtx

    from torchtrt_plugins import _compat

    assert not hasattr(tensorrt_rtx.INetworkDefinition, "add_plugin_v3")
    assert "has no add_plugin_v3" in _compat.plugin_layers_unavailable()


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic_batch"])
def test_our_op_runs_in_pytorch_between_engines(dynamic):
    model, x = OurOpBetweenLayers().eval(), torch.randn(4, 7, HIDDEN)
    if dynamic:
        batch = torch.export.Dim("batch", min=1, max=16)
        program = torch.export.export(model, (x,), dynamic_shapes=({0: batch},))
        spec = torch_tensorrt().Input(min_shape=(1, 7, HIDDEN), opt_shape=(4, 7, HIDDEN), max_shape=(16, 7, HIDDEN))
        partitioned = dryrun(program, [spec])
    else:
        partitioned = dryrun(torch.export.export(model, (x,)), [x])
    assert placement(partitioned) == {"trt": [], "torch": [RMS_NORM]}
    assert segments(partitioned) == (2, 1)
    torch.testing.assert_close(partitioned(x), model(x), atol=1e-5, rtol=1e-5)


def test_index_by_a_boolean_mask_stays_in_pytorch():
    """``converters.aten_fallbacks`` would make it our masked_rows plugin; with no plugin layers it falls back."""
    from aten_fallback_cases import Keep, keep_inputs

    model, inputs = Keep().eval(), keep_inputs()
    partitioned = dryrun(torch.export.export(model, tuple(inputs)), inputs)
    by_submodule = targets_by_submodule(partitioned)
    left = [target for name, targets in by_submodule.items() if "_run_on_acc" not in name for target in targets]
    assert left.count("aten.index.Tensor") == 2
    for got, expected in zip(partitioned(*inputs), model(*inputs)):
        torch.testing.assert_close(got, expected)


def test_torch_compile_backend_runs_our_op_in_pytorch():
    model, x = OurOpBetweenLayers().eval(), torch.randn(4, 7, HIDDEN)
    y, placements = torch_compile_dryrun(model, x)
    assert placements == [{"trt": [], "torch": [RMS_NORM]}]
    torch.testing.assert_close(y, model(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("style", ["llama", "nn"])
def test_lowering_leaves_the_norm_to_tensorrt(style):
    """Rewritten, the norm would fall back to PyTorch and cut the engine in two; left alone, TensorRT runs it."""
    model = make_rms_norm(style, HIDDEN).to(torch.float16).eval()
    x = torch.randn(2, 5, HIDDEN).to(torch.float16)
    partitioned = dryrun(torch.export.export(model, (x,)), [x])
    assert placement(partitioned) == {"trt": [], "torch": []}
    assert segments(partitioned) == (1, 0)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", MODELS)
def test_every_norm_of_a_hugging_face_decoder_left_to_tensorrt(name, dynamic):
    """Rewriting a decoder's norms here cuts its engine at each of them (measured: a 2-layer Llama or Gemma in 6
    engines with 5 PyTorch segments, Qwen3 and DiffLlama in 8 with 7); left alone, it stays whole (with dynamic
    shapes, the mask's ``cumsum`` is the one PyTorch segment, with or without us)."""
    model = build(name, "float16")
    partitioned = dryrun(export(model, dynamic), torch_tensorrt_inputs(dynamic))
    assert placement(partitioned) == {"trt": [], "torch": []}
    assert segments(partitioned) == ((2, 1) if dynamic else (1, 0))
    ids = input_ids(RUN_SHAPE if dynamic else EXPORT_SHAPE, seed=1)
    torch.testing.assert_close(partitioned(ids), model(ids), **tolerance("float16"))


def _torch_compile_plans(model: torch.nn.Module, *args: torch.Tensor) -> list[bytes]:
    """``torch.compile(model, backend="tensorrt")`` called once, as far as a machine without CUDA goes: the plans RTX's
    builder built. ``pass_through_build_failures``: a failure the backend would otherwise answer by returning the graph
    to PyTorch whole must fail the test (``plans_built`` lets through only the deserialization no CUDA refuses)."""
    options = {"min_block_size": 1, "pass_through_build_failures": True}
    try:
        with plans_built() as plans:
            torch.compile(model, backend="tensorrt", dynamic=False, options=options)(*args)
    finally:
        torch._dynamo.reset()
    return plans


def test_torch_compile_builds_a_plan_where_the_norm_was_lowered():
    """The call that failed (``add_plugin_v3`` missing) goes on to RTX's builder, which builds a plan without our
    plugin; only running it is left, which needs a GPU."""
    plans = _torch_compile_plans(make_rms_norm("llama", HIDDEN).eval(), torch.randn(3, 7, HIDDEN))
    assert len(plans) == 1 and b"RMSNorm" not in plans[0]


@pytest.mark.parametrize("name", ["llama", "diffllama"])
def test_torch_compile_of_a_hugging_face_decoder_builds_its_plan(name):
    """The issue's call: ``torch.compile(model, backend="tensorrt")`` on a Hugging Face decoder failed with
    ``AttributeError: ... no attribute 'add_plugin_v3'``; now RTX's builder builds the plan, without our plugin."""
    plans = _torch_compile_plans(build(name, "float16"), input_ids(EXPORT_SHAPE))
    assert plans and not any(b"RMSNorm" in plan for plan in plans)


def test_one_warning_per_process_says_why_and_what_to_do():
    from torchtrt_plugins import _compat

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger(_compat.__name__)
    warned, _compat._warned_no_plugin_layers = _compat._warned_no_plugin_layers, False
    logger.addHandler(handler)
    try:
        model, x = OurOpBetweenLayers().eval(), torch.randn(4, 7, HIDDEN)
        for _ in range(2):
            dryrun(torch.export.export(model, (x,)), [x])
            dryrun(torch.export.export(make_rms_norm("llama", HIDDEN).eval(), (x,)), [x])
    finally:
        logger.removeHandler(handler)
        _compat._warned_no_plugin_layers = warned
    (record,) = [r for r in records if r.levelno == logging.WARNING]
    message = record.getMessage()
    assert "add_plugin_v3" in message and "run in PyTorch" in message and "leaves RMSNorms to TensorRT" in message
    assert "full TensorRT" in message and "ONNX" in message
