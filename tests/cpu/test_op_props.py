"""Property tests of every op on the CPU (its CPU kernel, its fake kernel, its argument checks), drawn by hypothesis
over shapes, dtypes, memory layouts and field values, against an independent numpy formulation
(``tests/props.py``)."""

import props
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import torchtrt_plugins
from torchtrt_plugins import SpecError

OPS = sorted(entry.spec.name for entry in torchtrt_plugins.all_ops())
SETTINGS = props.hypothesis_settings(max_examples=40)


def test_every_op_has_property_checks():
    assert sorted(props.CASES) == OPS


@pytest.mark.parametrize("op", OPS)
@SETTINGS
@given(data=st.data())
def test_matches_numpy(op, data):
    case = props.CASES[op].draw(data, "cpu")
    props.CASES[op].check(case, case.call())


@pytest.mark.parametrize("op", OPS)
@SETTINGS
@given(data=st.data())
def test_fake_kernel_agrees_with_the_real_one(op, data):
    case = props.CASES[op].draw(data, "cpu")
    real = case.call()
    mode = FakeTensorMode(shape_env=ShapeEnv())
    with mode:
        args = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in case.args)
        fake = getattr(torch.ops.torchtrt, op)(*args, **case.kwargs)
    for fake_out, real_out in zip(props.outputs(fake), props.outputs(real), strict=True):
        assert fake_out.dtype == real_out.dtype, case.note
        # A data-dependent extent (masked_rows' K) is symbolic in the fake output; every other one must match.
        for got, want in zip(fake_out.shape, real_out.shape, strict=True):
            assert not isinstance(got, int) or got == want, f"{case.note}: fake {fake_out.shape}, real {real_out.shape}"


@SETTINGS
@given(hidden=st.integers(1, 64), off=st.integers(1, 5), data=st.data())
def test_rms_norm_weight_of_another_length_is_refused_by_name(hidden, off, data):
    x = torch.randn(3, hidden)
    weight = torch.randn(hidden + data.draw(st.sampled_from([-off, off])) if hidden > off else hidden + off)
    with pytest.raises(SpecError, match=r"torchtrt\.rms_norm: argument 'weight' must have shape"):
        torch.ops.torchtrt.rms_norm(x, weight, 1e-6)


@SETTINGS
@given(rows=st.integers(0, 50), off=st.integers(1, 5))
def test_masked_rows_mask_of_another_length_is_refused_by_name(rows, off):
    with pytest.raises(SpecError, match=r"torchtrt\.masked_rows: argument 'mask' must have shape"):
        torch.ops.torchtrt.masked_rows(torch.randn(rows, 4), torch.ones(rows + off, dtype=torch.bool))


@SETTINGS
@given(height=st.integers(-1000, -1), width=st.integers(0, 10))
def test_pad_to_negative_extent_is_refused_by_name(height, width):
    with pytest.raises(SpecError, match=r"pad_to.*height"):
        torch.ops.torchtrt.pad_to(torch.randn(1, 1, 2, 2), height, width)
