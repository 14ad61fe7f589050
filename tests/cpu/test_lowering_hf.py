"""The lowering on real model code: Hugging Face decoders from tiny configs (``tests/hf_models.py``), exported with
static or dynamic batch and sequence, in fp32, fp16 and bf16. Every norm module becomes one op of the right kind
(weight, Gemma's offset, ones), and the lowered model's logits match eager's (issue 25)."""

from __future__ import annotations

import pytest
import torch
from hf_models import DTYPES, EXPORT_SHAPE, MODELS, RUN_SHAPE, build, export, input_ids, norm_kinds, op_kinds, tolerance

from torchtrt_plugins import lowering

RMS_NORM = torch.ops.torchtrt.rms_norm.default
NORM_LEFTOVERS = {torch.ops.aten.rsqrt.default, torch.ops.aten.rms_norm.default, torch.ops.aten.mean.dim}


@pytest.fixture(autouse=True)
def _lowering_on(monkeypatch):
    monkeypatch.delenv(lowering.ENV_VAR, raising=False)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", MODELS)
def test_every_norm_of_the_model_lowered(name, dtype, dynamic):
    model = build(name, dtype)
    program = export(model, dynamic)
    ids = input_ids(RUN_SHAPE if dynamic else EXPORT_SHAPE, seed=1)
    expected = model(ids)
    for gm in (program.module(), program.run_decompositions().module()):
        gm, report = lowering.lower_with_report(gm)
        ops = [node for node in gm.graph.nodes if node.target == RMS_NORM]
        assert report == {
            "rms_norm": sum(norm_kinds(model.model).values()),
            "multi_scale_roi_align": 0,
            "multi_scale_deformable_attention": 0,
        }
        assert op_kinds(ops) == norm_kinds(model.model)
        assert not NORM_LEFTOVERS & {node.target for node in gm.graph.nodes}
        torch.testing.assert_close(gm(ids), expected, **tolerance(dtype))
