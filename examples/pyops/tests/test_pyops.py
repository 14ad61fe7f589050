"""pyops' own tests, as a user package writes them: one check_op call per op runs every tier installed here (on a
GPU also every tactic's compiled kernel against the same kernel launched from Triton or CuPy)."""

import pyops
import pytest
import torch

from torchtrt_plugins.testing import check_op


@pytest.mark.parametrize("dtype", pyops.FLOATS)
def test_liger_rms_norm(dtype):
    samples = [
        (torch.randn(3, 64, dtype=dtype), torch.randn(64, dtype=dtype), 1e-6, 0.0),
        ((torch.randn(2, 5, 1000, dtype=dtype), torch.randn(1000, dtype=dtype)), {"offset": 1.0, "eps": 1e-5}),
        (torch.randn(4096, dtype=dtype), torch.randn(4096, dtype=dtype), 1e-6, 0.5),
    ]
    print(check_op(torch.ops.pyops.liger_rms_norm, samples, reference=pyops.reference_liger_rms_norm))


@pytest.mark.parametrize("dtype", pyops.FLOATS)
def test_swiglu(dtype):
    samples = [
        (torch.randn(3, 5, dtype=dtype), torch.randn(3, 5, dtype=dtype), 1.702),
        ((torch.randn(4099, dtype=dtype), torch.randn(4099, dtype=dtype)), {"alpha": -0.5}),
    ]
    print(check_op(torch.ops.pyops.swiglu, samples, reference=pyops.reference_swiglu))


def test_alpha_out_of_range_is_rejected():
    x = torch.randn(4)
    with pytest.raises(ValueError, match=r"pyops\.swiglu: argument 'alpha' must be a float >= -100 and <= 100"):
        pyops.SWIGLU.check_args(x, x, 1e9)
