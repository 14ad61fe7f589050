"""Inside a Torch-TensorRT that builds with TensorRT-RTX (whose Python network has no ``add_plugin_v3``), our
validators send our ops to PyTorch and the lowering pass leaves graphs alone; ``lower()`` called by hand still
rewrites (ONNX export needs it). The tt tier runs the real pipeline; here Torch-TensorRT's import is stood in for
by what it leaves behind: the module it builds with in ``sys.modules["tensorrt"]`` (issue 25)."""

from __future__ import annotations

import logging
import sys
import types

import pytest
import torch
from models import make_rms_norm

from torchtrt_plugins import _compat, lowering
from torchtrt_plugins.converters import validate_node

RMS_NORM = torch.ops.torchtrt.rms_norm.default


class OurOp(torch.nn.Module):
    def forward(self, x, weight):
        return torch.ops.torchtrt.rms_norm(x, weight, 1e-6)


@pytest.fixture
def inside_torch_tensorrt_rtx(monkeypatch, trt):
    """As after ``import torch_tensorrt`` from torch-tensorrt-rtx: ``tensorrt`` is TensorRT-RTX; the once-per-process
    warning not given yet."""
    if hasattr(trt.INetworkDefinition, "add_plugin_v3"):
        pytest.skip(f"rtx tier: {trt.__name__} {trt.__version__} has add_plugin_v3")
    monkeypatch.setitem(sys.modules, "torch_tensorrt", types.ModuleType("torch_tensorrt"))
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setattr(_compat, "_warned_no_plugin_layers", False)
    monkeypatch.delenv(lowering.ENV_VAR, raising=False)
    return trt


def _op_node():
    program = torch.export.export(OurOp(), (torch.randn(2, 16), torch.ones(16)))
    (node,) = [n for n in program.graph_module.graph.nodes if n.target == RMS_NORM]
    return node


def test_the_reason_names_the_missing_method(inside_torch_tensorrt_rtx):
    reason = _compat.plugin_layers_unavailable()
    assert "INetworkDefinition" in reason and "has no add_plugin_v3" in reason
    assert inside_torch_tensorrt_rtx.__version__ in reason


def test_no_reason_outside_torch_tensorrt(trt, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch_tensorrt", raising=False)
    assert _compat.plugin_layers_unavailable() is None


def test_validator_sends_our_op_to_pytorch_with_one_warning(inside_torch_tensorrt_rtx, caplog):
    node = _op_node()
    with caplog.at_level(logging.WARNING, logger=_compat.__name__):
        assert not validate_node(node)
        assert not validate_node(node)
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "has no add_plugin_v3" in warning.getMessage()


def test_validator_accepts_where_the_network_takes_plugin_layers(inside_torch_tensorrt_rtx, monkeypatch):
    monkeypatch.setattr(inside_torch_tensorrt_rtx.INetworkDefinition, "add_plugin_v3", lambda *a: None, raising=False)
    assert validate_node(_op_node())


def test_the_pass_inside_torch_tensorrt_leaves_the_norm_and_lower_still_rewrites(inside_torch_tensorrt_rtx):
    model, x = make_rms_norm("llama", 16).eval(), torch.randn(2, 3, 16)
    gm = torch.export.export(model, (x,)).module()
    assert lowering.torch_tensorrt_pass(gm) is gm
    assert not [n for n in gm.graph.nodes if n.target == RMS_NORM]
    lowering.lower(gm)
    assert len([n for n in gm.graph.nodes if n.target == RMS_NORM]) == 1
