"""rms_norm with its weight as a plugin field (declare(weight_fields=...), converters.weights_as_fields) gives, for
every tactic and in both phases, the same outputs as with the weight as a network input, through the harness's
enqueue: the field is copied to the device once per plugin and reaches the launcher as an ordinary input; the
runtime plugin, created from the serialized fields, reproduces the build plugin's outputs."""

import pytest
import torch
from fixtures import rms_norm_inputs

import torchtrt_plugins
from torchtrt_plugins.converters import plan
from torchtrt_plugins.testing import harness as H

SPEC = torchtrt_plugins.get("rms_norm").spec
TACTICS = [0] + [t.value for t in SPEC.tactics]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (5, 123, 123), (8, 4096)], ids=lambda s: "x".join(map(str, s)))
def test_rms_norm_weight_as_a_field_matches_the_weight_as_an_input(build, shape, dtype):
    x, w = rms_norm_inputs(shape, dtype)
    as_input = H.run_call(plan(SPEC, (x, w, 1e-6)), x, w, library=build.library)
    call = plan(SPEC, (x, w, 1e-6), weights_as_fields=True)
    assert len(call.tensor_inputs) == 1
    as_field = H.run_call(call, x, library=build.library)
    as_field.assert_conformant()
    assert as_field.enqueue_skipped is None
    for phase in ("build", "runtime"):
        for tactic in TACTICS:
            (expected,) = as_input.outputs(tactic, phase)
            (y,) = as_field.outputs(tactic, phase)
            assert torch.equal(y, expected), (phase, tactic)
