"""``triton.autotune(reset_to_zero=...)`` on a GPU: a kernel that accumulates into its output with atomics gets a
zeroed output before each launch, in the eager op (every tactic) and in the plugin (the harness, check_op), though
the launcher ABI hands outputs over uninitialized."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import aot_ops  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

import torchtrt_plugins as ttp  # noqa: E402
from torchtrt_plugins import sdk  # noqa: E402
from torchtrt_plugins.testing import check_op  # noqa: E402

_TUNED = triton.autotune(
    configs=[triton.Config({"BLOCK": 256}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=8)],
    key=["n"],
    reset_to_zero=["out_ptr"],
)(aot_ops.total_kernel)
TOTAL = ttp.declare(
    "aot_test::total",
    library=sdk.PluginLibrary("aot_reset_test", sources=[]),
    launcher=ttp.triton_kernel(
        _TUNED,
        grid=lambda x, meta: (-(-x.numel() // meta["BLOCK"]),),
        params={"x_ptr": "x", "out_ptr": "out0", "n": lambda x: x.numel()},
    ),
    dtypes={"x": (torch.float32,)},
    tolerances={torch.float32: ttp.Tolerance(1e-4, 1e-4)},
)


def test_every_tactic_of_the_eager_op_starts_from_a_zeroed_output():
    x = torch.randn(10000, device="cuda")
    expected = x.sum().reshape(1)
    for tactic in (0, 1, 0, 1):
        # A freed block of non-zeros, which the caching allocator hands to the op's 4-byte output next; the previous
        # call's result is such a block too.
        garbage = torch.full((128,), 1e6, device="cuda")
        del garbage
        torch.testing.assert_close(sdk.launch(TOTAL, x, tactic=tactic), expected, atol=1e-3, rtol=1e-4)


def _whole_numbers(*shape: int) -> torch.Tensor:
    """Small whole numbers as float32: their sum is exact in any order, so the atomics' order cannot change the bits
    the harness compares (replay, re-created plugin); an output not zeroed first still differs."""
    return torch.randint(-8, 9, shape).float()


def test_the_plugin_starts_from_a_zeroed_output():
    report = check_op(
        torch.ops.aot_test.total, [(_whole_numbers(10000),), (_whole_numbers(3, 777),)], checks=("eager", "harness")
    )
    assert {"eager", "harness"} <= set(report.passed), report
