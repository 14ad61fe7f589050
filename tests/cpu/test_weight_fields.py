"""Weights as fields (declare(weight_fields=...)): the converter gives a declared weight argument that is a constant
of the graph (a get_attr weight) to the plugin as a field named after it, of its dtype's PluginFieldType, with its
dims in `<name>_shape`, when asked (converters.weights_as_fields()); the plugin then has one network input fewer.
The plugin's side (createPlugin, serialization, checks against the other inputs) is in test_strict_fields.py."""

from __future__ import annotations

import pytest
import torch

from torchtrt_plugins import converters
from torchtrt_plugins.ops import rms_norm

SPEC = rms_norm.RMS_NORM.spec


def test_rms_norm_declares_its_weight_as_a_possible_field():
    assert SPEC.weight_fields == ("weight",)


@pytest.mark.parametrize(
    ("dtype", "field_type"), [(torch.float32, "FLOAT32"), (torch.float16, "FLOAT16"), (torch.bfloat16, "BF16")]
)
def test_the_converter_gives_a_constant_weight_as_a_field_when_asked(dtype, field_type):
    x, weight = torch.randn(2, 3, 8, dtype=dtype), torch.randn(8, dtype=dtype)
    call = converters.plan(SPEC, (x, weight, 1e-5), {}, weights_as_fields=True)
    assert [t is x for t in call.tensor_inputs] == [True]
    assert call.input_casts == [None]
    fields = {f.name: f for f in call.fields}
    assert fields["weight"].type == field_type and fields["weight"].value is weight
    assert (fields["weight_shape"].type, fields["weight_shape"].value) == ("INT64", [8])
    assert (
        fields["weight"].numpy().tobytes()
        == weight.view(torch.int16 if dtype == torch.bfloat16 else dtype).numpy().tobytes()
    )


def test_the_converter_keeps_the_weight_an_input_unless_asked():
    x, weight = torch.randn(2, 8), torch.randn(8)
    call = converters.plan(SPEC, (x, weight), {})
    assert call.tensor_inputs == [x, weight] and "weight" not in {f.name for f in call.fields}


def test_weights_as_fields_is_the_converters_choice_within_its_context():
    x, weight = torch.randn(2, 8), torch.randn(8)
    with converters.weights_as_fields():
        inside = converters.plan(SPEC, (x, weight), {})
    after = converters.plan(SPEC, (x, weight), {})
    assert len(inside.tensor_inputs) == 1 and len(after.tensor_inputs) == 2


def test_a_symbolic_weight_stays_an_input():
    """Only constants become fields: a weight that is a graph value (here: symbolic) stays a network input."""
    x, weight = torch.randn(2, 8), torch.randn(8)
    call = converters.plan(SPEC, (x, weight), {}, is_symbolic=lambda v: v is weight, weights_as_fields=True)
    assert len(call.tensor_inputs) == 2 and "weight" not in {f.name for f in call.fields}
