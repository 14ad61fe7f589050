"""myops' own tests, as a user package writes them: one check_op call per op runs every tier installed here."""

import myops
import pytest
import torch

from torchtrt_plugins.testing import check_op


@pytest.mark.parametrize("dtype", myops.FLOATS)
def test_scaled_add(dtype):
    samples = [
        (torch.randn(3, 5, dtype=dtype), torch.randn(3, 5, dtype=dtype), 2.0),
        ((torch.randn(4099, dtype=dtype), torch.randn(4099, dtype=dtype)), {"alpha": -0.5}),
    ]
    report = check_op(torch.ops.myops.scaled_add, samples, reference=myops.reference_scaled_add)
    print(report)


def test_filter_above():
    samples = [(torch.randn(3, 5), 0.1), (torch.randn(1000, 3), 2.5), (torch.randn(7), 100.0)]
    report = check_op(torch.ops.myops.filter_above, samples, reference=myops.reference_filter_above)
    print(report)


def test_alpha_out_of_range_is_rejected():
    x = torch.randn(4)
    with pytest.raises(ValueError, match=r"myops\.scaled_add: argument 'alpha' must be a float >= -10000"):
        myops.SCALED_ADD.check_args(x, x, 1e9)
