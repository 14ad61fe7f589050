"""The zoo with the Inductor plugins' switch on (``zoo.partition(..., inductor=True)``): with our ATen fallback
converters off (``aten_fallbacks.disabled()``), GroundingDino's ``aten.isin``, ``aten.cummax`` and ``aten.cummin`` have
no converter (Torch-TensorRT 2.13 has none); they become generated plugin layers, and the model is one engine, which
computes what the model does (its segments run in PyTorch, the generated ops by their CPU kernels: the segments)."""

from __future__ import annotations

import collections

import torch

NAME = "GroundingDinoModel"


def _zoo():
    from torchvision_site import require_torchvision

    require_torchvision()  # before torchtrt_plugins.vision (imported by the zoo) stands in for its ops
    from torchtrt_plugins import zoo

    return zoo


def test_grounding_dino_is_one_engine_with_the_inductor_plugins():
    from tt_helpers import require_plugin_library

    require_plugin_library()
    zoo = _zoo()
    from torchtrt_plugins import vision
    from torchtrt_plugins.converters import aten_fallbacks

    program, model, inputs = zoo.export(NAME)
    with aten_fallbacks.disabled():
        ours = zoo.partition(program, inputs, ours=True, inductor=True)
    assert (ours.engines, ours.fallback) == (1, collections.Counter()), ours.fallback_text()
    (engine,) = [sub for name, sub in ours.module.named_children() if "_run_on_acc" in name]
    generated = [n for n in engine.graph.nodes if n.op == "call_function" and str(n.target).startswith("ttp_inductor.")]
    assert generated, "the engine holds no generated op"
    with torch.no_grad(), vision.exportable():
        expected, got = model(*inputs), ours.module(*inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4, equal_nan=True)


def test_the_benchmarks_no_converter_targets_are_what_falls_back_without_the_switch():
    # benchmarks.inductor_switch stands in for Torch-TensorRT's registry with this list where the GPU is
    zoo = _zoo()
    from torchtrt_plugins.benchmarks import inductor_switch
    from torchtrt_plugins.converters import aten_fallbacks

    program, _, inputs = zoo.export(NAME)
    with aten_fallbacks.disabled():
        ours = zoo.partition(program, inputs, ours=True)
    assert set(ours.fallback) == inductor_switch.MODELS[NAME].no_converter, ours.fallback_text()


def test_the_cli_prints_the_inductor_plugins_column():
    import contextlib
    import io

    _zoo()
    from torchtrt_plugins import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["zoo", "--models", "deform_conv2d", "--inductor"]) == 0
    assert "| with us and Inductor plugins | still in PyTorch with Inductor plugins |" in out.getvalue()
    assert "| `deform_conv2d` | 2 | 1 | — | 1 | — |" in out.getvalue()
