"""Declared ops on a GPU: the eager CUDA kernel (the declared launcher through the generic adapter), size tensors,
and a launcher that returns an error, in eager and in the plugin's enqueue."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import pytest  # noqa: E402
import sdk_ops  # noqa: E402
import torch  # noqa: E402
from eager_costs import host_syncs, peak_bytes  # noqa: E402

from torchtrt_plugins import converters, sdk  # noqa: E402
from torchtrt_plugins.sdk import eager_kernel  # noqa: E402
from torchtrt_plugins.testing import run_call  # noqa: E402


def test_eager_cuda_kernel_is_the_launcher():
    x, w = torch.randn(6, 5, device="cuda"), torch.randn(5, device="cuda")
    first, second = torch.ops.sdk_test.shapes(x, w, 9, 3)
    expected = sdk_ops.shapes_sizes((6, 5), (5,), 9, 3)
    assert (tuple(first.shape), tuple(second.shape)) == expected
    assert first.is_cuda and second.dtype == torch.int32
    assert not first.any() and not second.any()
    for tactic in (0, 3, 7):
        out, _ = sdk.launch(sdk_ops.SHAPES, x, w, 9, 3, tactic=tactic)
        assert tuple(out.shape) == expected[0]
    with pytest.raises(ValueError, match=r"sdk_test\.shapes: argument 'tactic' must be one of \[0, 3, 7\], got 5"):
        sdk.launch(sdk_ops.SHAPES, x, w, 9, 3, tactic=5)
    # ValueError from the Python path; the C++ kernel's errors are RuntimeErrors (torch's stable ABI carries no
    # exception type), with the same message.
    with pytest.raises(
        (ValueError, RuntimeError), match=r"sdk_test\.shapes: argument 'k' must be an integer >= 1 and <= 16, got 17"
    ):
        torch.ops.sdk_test.shapes(x, w, 9, 17)


def test_size_tensor_sizes_the_eager_output():
    out = torch.ops.sdk_test.nonzero_count(torch.randn(4, 3, device="cuda"))
    assert tuple(out.shape) == (0, 3)  # the launcher writes 0 into the size tensor


@pytest.mark.parametrize("path", ["cpp", "python"])
def test_size_tensor_output_takes_one_host_sync_and_no_upper_bound(path, capfd):
    """Declared sizes_first: the (1 << 20, 3) upper bound of nonzero_count's output (12 MiB) is never allocated."""
    x = torch.randn(4, 3, device="cuda")
    if path == "cpp" and eager_kernel.disabled():
        pytest.skip(f"{eager_kernel.ENV}=python")
    op = torch.ops.sdk_test.nonzero_count if path == "cpp" else lambda x: sdk.launch(sdk_ops.NONZERO_COUNT, x)
    out, syncs = host_syncs(capfd, lambda: op(x))
    assert syncs == 1 and tuple(out.shape) == (0, 3)
    out, peak = peak_bytes(lambda: op(x))
    assert peak < (1 << 20), peak


def test_launcher_error_names_op_launcher_and_cuda_error():
    x = torch.randn(8, device="cuda")
    message = r"sdk_test\.broken: launcher 'sdk_test::failing' \(tactic 0\) returned cudaErrorInvalidValue \(1\)"
    with pytest.raises(RuntimeError, match=message):
        torch.ops.sdk_test.broken(x)  # the C++ eager kernel (or, where it cannot be had, the Python path)
    with pytest.raises(RuntimeError, match=message):
        sdk.launch(sdk_ops.BROKEN, x)  # the Python path
    result = run_call(converters.plan(sdk_ops.BROKEN.spec, (x,)), x, library=sdk_ops.LIBRARY.plugin_path())
    assert result.enqueue_skipped is None
    assert any(
        "sdk_test::broken (plugin sdk_test::Broken) enqueue: launcher 'sdk_test::failing' returned "
        "cudaErrorInvalidValue" in line.message
        for line in result.log
    ), result.log_text()


def test_harness_enqueue_matches_eager_for_every_tactic():
    x, w = torch.randn(6, 5, device="cuda"), torch.randn(5, device="cuda")
    call = converters.plan(sdk_ops.SHAPES.spec, (x, w, 9, 3))
    result = run_call(call, x, w, library=sdk_ops.LIBRARY.plugin_path())
    result.assert_conformant()
    assert result.enqueue_skipped is None
    assert sorted({r.tactic for r in result.runs}) == [0, 3, 7]
    eager = torch.ops.sdk_test.shapes(x, w, 9, 3)
    for record in result.runs:
        for got, want in zip(record.outputs, eager, strict=True):
            assert torch.equal(got, want), (record.phase, record.tactic)
