"""The out-of-tree example package (examples/myops): built only with the installed SDK, its ops declared with
torchtrt_plugins.declare, checked with check_op, and its own pytest run as a user runs it."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import subprocess  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from example_package import EXAMPLE, import_myops, run_own_tests  # noqa: E402

from torchtrt_plugins import converters  # noqa: E402
from torchtrt_plugins.testing import check_op  # noqa: E402

# At collection: importing the example puts it on sys.path, which inside a test the global-state guard reports.
MYOPS = import_myops()


@pytest.fixture(scope="module")
def myops():
    return MYOPS


def test_library_builds_from_the_sdk(myops):
    build = myops.LIBRARY.build()
    out = subprocess.run(["nm", "-D", "--defined-only", str(build.plugins)], capture_output=True, text=True).stdout
    assert {line.split()[-1] for line in out.splitlines() if " T " in line} == {"getCreators", "setLoggerFinder"}


def test_converter_and_validator_come_from_the_declaration(myops):
    entry = converters.entry_for_target(torch.ops.myops.scaled_add.default)
    assert entry is myops.SCALED_ADD.entry
    call = converters.plan(entry.spec, (torch.zeros(2, 3), torch.zeros(2, 3)), {"alpha": 0.5})
    assert call.creator_key == ("ScaledAdd", "1", "myops") and call.field_value("alpha") == 0.5
    with pytest.raises(ValueError, match=r"myops\.scaled_add: argument 'alpha' must be a float >= -10000"):
        converters.plan(entry.spec, (torch.zeros(2), torch.zeros(2), 1e5))
    dds = converters.plan(myops.FILTER_ABOVE.spec, (torch.zeros(4, 3), 0.0))
    assert dds.num_outputs == 2 and dds.requires_output_allocator


@pytest.mark.parametrize("op", ["scaled_add", "filter_above"])
def test_check_op(myops, op):
    samples = {
        "scaled_add": [(torch.randn(3, 5), torch.randn(3, 5), 2.0), (torch.randn(0, 4), torch.randn(0, 4), 1.0)],
        "filter_above": [(torch.randn(3, 5), 0.1), (torch.randn(64), 5.0)],
    }[op]
    report = check_op(getattr(torch.ops.myops, op), samples)
    assert {"eager", "opcheck", "compile", "plan", "harness"} <= set(report.passed), report


def test_the_example_packages_own_tests_pass():
    run_own_tests(EXAMPLE)
