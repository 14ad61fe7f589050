"""The example package's numerics on a GPU: every tactic of its launchers against the reference, eager and through
the plugin (check_op enqueues every tactic in the harness and compares with eager)."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import pytest  # noqa: E402
import torch  # noqa: E402
from eager_costs import host_syncs, peak_bytes  # noqa: E402
from example_package import import_myops  # noqa: E402

from torchtrt_plugins import sdk  # noqa: E402
from torchtrt_plugins.sdk import eager_kernel  # noqa: E402
from torchtrt_plugins.testing import check_op  # noqa: E402

myops = import_myops()


@pytest.mark.parametrize("dtype", myops.FLOATS)
@pytest.mark.parametrize("shape", [(1,), (3, 5), (4097,), (33, 129), (2, 3, 1000)], ids=str)
@pytest.mark.parametrize("tactic", [0, 1, 2])
def test_scaled_add_every_tactic(dtype, shape, tactic):
    x, y = torch.randn(shape, dtype=dtype, device="cuda"), torch.randn(shape, dtype=dtype, device="cuda")
    got = sdk.launch(myops.SCALED_ADD, x, y, -1.5, tactic=tactic)
    tolerance = myops.SCALED_ADD.spec.tolerance(dtype)
    torch.testing.assert_close(got, myops.reference_scaled_add(x, y, -1.5), atol=tolerance.atol, rtol=tolerance.rtol)


@pytest.mark.parametrize("numel, threshold", [(1, 0.0), (511, 0.0), (513, -10.0), (100_000, 1.0), (7, 100.0)])
def test_filter_above(numel, threshold):
    x = torch.randn(numel, device="cuda")
    got = torch.ops.myops.filter_above(x, threshold)
    assert torch.equal(got, myops.reference_filter_above(x, threshold))


@pytest.mark.parametrize("path", ["cpp", "python"])
def test_filter_above_one_host_sync_and_no_upper_bound_output(path, capfd):
    """Declared sizes_first: the launcher counts, the op reads the count back once and writes the kept elements into
    an output of that size; never the numel() upper bound (16 MiB here)."""
    x = torch.randn(1 << 22, device="cuda")
    if path == "cpp" and eager_kernel.disabled():
        pytest.skip(f"{eager_kernel.ENV}=python")
    op = torch.ops.myops.filter_above if path == "cpp" else lambda *args: sdk.launch(myops.FILTER_ABOVE, *args)
    got, syncs = host_syncs(capfd, lambda: op(x, 4.0))
    assert syncs == 1 and torch.equal(got, myops.reference_filter_above(x, 4.0))
    got, peak = peak_bytes(lambda: op(x, 4.0))
    assert got.numel() < 1000 and peak < (1 << 20), peak


def test_check_op_on_gpu():
    samples = [
        (torch.randn(33, 129), torch.randn(33, 129), 0.25),
        (torch.randn(4099, dtype=torch.bfloat16), torch.randn(4099, dtype=torch.bfloat16), 2.0),
    ]
    report = check_op(torch.ops.myops.scaled_add, samples, reference=myops.reference_scaled_add)
    assert "harness enqueue" not in report.skipped and "eager CUDA" not in report.skipped, report
    report = check_op(torch.ops.myops.filter_above, [(torch.randn(1000), 0.5)], reference=myops.reference_filter_above)
    assert "harness enqueue" not in report.skipped, report
