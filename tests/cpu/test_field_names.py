"""Launchers read scalars through the index constants the SDK generates from the declarations (the fields header,
op_fields.h), never by position: two ops taking the same scalars in opposite schema orders hand one launcher source
the right values either way, where the position a launcher written for the first order reads holds the other
scalar in the second. Built by the SDK like a user's library (tests/sdk_ops/field_order.cu) and called through the
launcher library's C entry point, with a host buffer as the output (the launcher only writes what it read)."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import ctypes  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import torchtrt_plugins as ttp  # noqa: E402
from torchtrt_plugins import _build, sdk  # noqa: E402
from torchtrt_plugins.ops import LIBRARY as OURS  # noqa: E402
from torchtrt_plugins.sdk import abi, codegen  # noqa: E402

SOURCE = Path(__file__).parents[1] / "sdk_ops" / "field_order.cu"
LIBRARY = sdk.PluginLibrary("field_order", sources=[SOURCE])
SCHEMAS = {
    "alpha_first": "(Tensor x, float alpha, float beta) -> Tensor",
    "beta_first": "(Tensor x, float beta, float alpha) -> Tensor",
}
_LIB = torch.library.Library("field_order", "DEF")
DECLARATIONS = {}
for _name, _schema in SCHEMAS.items():
    _LIB.define(_name + _schema)
    torch.library.register_fake(f"field_order::{_name}", lambda x, *scalars: x.new_empty((3,)), lib=_LIB)
    _LIB.impl(_name, lambda x, *scalars: x.new_zeros((3,)), "CPU")
    DECLARATIONS[_name] = ttp.declare(
        f"field_order::{_name}",
        library=LIBRARY,
        launcher="field_order::" + ("alphaFirst" if _name == "alpha_first" else "betaFirst"),
        dtypes={"x": (torch.float32,)},
    )


@pytest.fixture(scope="module")
def launchers():
    try:
        return LIBRARY.launchers()
    except _build.BuildError as err:
        pytest.fail(f"the SDK must build a declared-op library wherever nvcc and the TensorRT headers are: {err}")


def launch(launchers, op: str, scalars: list[float]) -> list[float]:
    """What the launcher read: alpha and beta by name, then scalars[0]."""
    x = torch.zeros(4)
    out = (ctypes.c_float * 3)()
    inputs = (abi.LaunchTensor * 1)(abi.tensor_struct("x", x))
    outputs = (abi.LaunchTensor * 1)(abi.LaunchTensor(ctypes.addressof(out), abi.KERNEL_DTYPES[torch.float32], 1))
    outputs[0].dims[0] = 3
    values = (ctypes.c_double * len(scalars))(*scalars)
    args = abi.LaunchArgs(inputs, 1, outputs, 1, values, len(scalars))
    assert launchers.ttp_sdk_launch(op.encode(), 0, ctypes.byref(args)) == 0
    return list(out)


def test_reordered_scalars_reach_the_launcher_by_name(launchers):
    alpha, beta = 2.0, 3.0
    assert launch(launchers, "field_order::alpha_first", [alpha, beta]) == [alpha, beta, alpha]
    # Schema order is beta, alpha: by name the launcher still reads alpha, where position 0 holds beta.
    assert launch(launchers, "field_order::beta_first", [beta, alpha]) == [alpha, beta, beta]


def test_the_header_gives_each_op_its_index_constants_and_table():
    header = codegen.generate_fields_header(list(DECLARATIONS.values()))
    assert "constexpr int32_t kALPHA = 0;\nconstexpr int32_t kBETA = 1;\nconstexpr int32_t kNB_SCALARS = 2;" in header
    assert "constexpr int32_t kBETA = 0;\nconstexpr int32_t kALPHA = 1;\nconstexpr int32_t kNB_SCALARS = 2;" in header
    assert header.count("inline constexpr ::ttp::sdk::FieldDecl kTABLE[]") == 2


def test_a_resource_gets_the_index_constants_of_its_key_fields():
    (rotary,) = [d for d in OURS.declarations if d.qualname == "torchtrt::rotary_embedding"]
    header = codegen.generate_fields_header([rotary])
    expected = "namespace cos_sin\n{\nconstexpr int32_t kMAX_POSITION = 0;\nconstexpr int32_t kROTARY_DIM = 1;\n"
    assert expected in header


def test_the_plugin_and_eager_tables_point_at_the_one_field_table():
    declarations = list(DECLARATIONS.values())
    tables = [
        generate(declarations, programs=lambda d: [0])
        for generate in (sdk.generate_op_tables, sdk.generate_launcher_table)
    ]
    for text in tables:
        assert text.count("::field_order::fields::alpha_first::kTABLE, 2,") == 1
        assert '#include "op_fields.h"' in text
        assert "FieldDecl const" not in text  # no second copy of the rows


def test_clashing_index_constants_are_refused():
    op = types.SimpleNamespace(label="field_clash.op")  # what the message names; declaring one would outlive the test
    with pytest.raises(ttp.SpecError, match=r"field_clash\.op: the scalar arguments \['alpha', 'ALPHA'\] do not give"):
        codegen._index_constants(op, ["alpha", "ALPHA"])
    with pytest.raises(ttp.SpecError, match="kNB_SCALARS their count"):
        codegen._index_constants(op, ["nb_scalars"])
