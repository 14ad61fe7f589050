"""Our lowering as inductor's post-grad pass: ``torch.compile(model, options=lowering.inductor_options())``."""

from __future__ import annotations

import pytest
import torch
from models import decoder_block
from torch._inductor.utils import run_and_get_code

import torchtrt_plugins  # noqa: F401  (defines the ops)
from torchtrt_plugins import lowering
from torchtrt_plugins.lowering.inductor import InductorPass


def _compiled_code(model: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, str]:
    torch._dynamo.reset()
    with torch.no_grad():
        out, code = run_and_get_code(torch.compile(model, options=lowering.inductor_options()), x)
    return out, "\n".join(code)


def _block(style: str = "llama") -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return decoder_block(style, hidden_size=64, num_heads=4, intermediate_size=128).eval(), torch.randn(2, 8, 64)


@pytest.mark.parametrize("style", ["llama", "nn"])
def test_decoder_block_compiles_with_our_ops_reinplaced(style):
    model, x = _block(style)
    with torch.no_grad():
        expected = model(x)
    out, code = _compiled_code(model, x)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    # The first norm reads the block's input; the second takes the residual add, updating the attention output in
    # place (reinplaced by inductor: no copy of it first).
    assert code.count("torch.ops.torchtrt.rms_norm.default(") == 1, code
    assert code.count("torch.ops.torchtrt.add_rms_norm.default(") == 1, code
    assert "auto_functionalized" not in code


def test_lowering_off_leaves_inductor_alone(monkeypatch):
    monkeypatch.setenv(lowering.ENV_VAR, "0")
    model, x = _block()
    out, code = _compiled_code(model, x)
    assert "torchtrt" not in code
    with torch.no_grad():
        torch.testing.assert_close(out, model(x), atol=1e-5, rtol=1e-5)


def test_cache_key_follows_the_switch(monkeypatch):
    on = InductorPass().uuid()
    monkeypatch.setenv(lowering.ENV_VAR, "0")
    assert InductorPass().uuid() != on
