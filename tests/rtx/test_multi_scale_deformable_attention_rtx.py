"""multi_scale_deformable_attention in the rtx tier: a node made for NVIDIA's MultiscaleDeformableAttnPlugin_TRT
builds with our plugin through TensorRT-RTX's ONNX parser and builder once its op type is renamed and our namespace
named (plugin_namespace="torchtrt": docs/onnx.md). NVIDIA's builder building our plugin from a network: the cases
of test_builder.py."""

from __future__ import annotations

from test_onnx_parser import NVIDIA_STYLE, parser_reports  # noqa: F401  (the fixture: one parser run for all models)

CASES = {case.id.split("-", 1)[1]: case for case in NVIDIA_STYLE}


def test_renamed_nvidia_node_with_our_namespace_parses_and_builds(parser_reports):  # noqa: F811
    report = parser_reports["handwritten-nvidia_msda-with_namespace"]
    assert report["parsed"], (report["parser_errors"], report["errors"])
    (layer,) = report["plugin_layers"]
    # Ours is (B, Q, H * D); NVIDIA's plugin gives (B, Q, H, D).
    assert [o["shape"] for o in layer["outputs"]] == CASES["with_namespace"].outputs == [[-1, -1, 256]]
    assert [i["dtype"] for i in layer["inputs"]][1:3] == ["INT32", "INT32"]
    assert report["plan_bytes"] > 0, report["errors"]
    assert report["errors"] == []


def test_renamed_nvidia_node_without_a_namespace_finds_no_creator(parser_reports):  # noqa: F811
    """NVIDIA's node carries no plugin_namespace; the parser then asks the registry for namespace "" and ours is
    registered under "torchtrt": renaming the op type alone is not enough (docs/onnx.md says so)."""
    report = parser_reports["handwritten-nvidia_msda-op_type_only"]
    assert not report["parsed"]
    assert any("Plugin not found" in e for e in report["parser_errors"]), report
