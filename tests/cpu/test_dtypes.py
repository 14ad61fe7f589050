"""The one dtype table (``torchtrt_plugins.dtypes``): its values are the C++ enums' (our ``ttp::DType``, TensorRT's
``DataType`` and ``PluginFieldType``), and every module that maps torch dtypes reads it instead of its own copy."""

import re
from pathlib import Path

import pytest

from torchtrt_plugins import _build, _derive, dtypes, onnx, sdk, spec
from torchtrt_plugins.kernels import describe
from torchtrt_plugins.testing import harness


def enum_members(header: Path, enum: str) -> dict[str, int]:
    body = re.search(rf"enum class {enum}\b[^{{]*\{{(.*?)\}};", header.read_text(), re.S)
    assert body, f"no enum class {enum} in {header}"
    return {name: int(value) for name, value in re.findall(r"\b(k\w+)\s*=\s*(\d+)", body.group(1))}


def tensorrt_header(name: str) -> Path:
    include = _build.tensorrt_include_dir()
    if include is None or not (include / name).is_file():
        pytest.skip(f"no TensorRT headers here ({name}); set TENSORRT_ROOT")
    return include / name


def test_kernel_dtypes_are_the_ttp_dtype_enum():
    # The checkout's sources, or the installed package's (a wheel ships them for the SDK's builds).
    members = enum_members(_build.source_dir() / "csrc" / "sdk" / "dtypes.h", "DType")
    assert {dtypes.KERNEL_NAMES[d]: code for d, code in dtypes.KERNEL_CODES.items()} == members


def test_trt_dtypes_are_tensorrts_data_type_enum():
    members = enum_members(tensorrt_header("NvInferRuntimeBase.h"), "DataType")
    for dtype, code in dtypes.TRT_CODES.items():
        assert members["k" + dtypes.TRT_NAMES[dtype]] == code, dtype
    assert list(dtypes.TRT_CODES.values()) == sorted(dtypes.TRT_CODES.values())


def test_weight_field_types_are_plugin_field_types():
    members = enum_members(tensorrt_header("NvInferPluginBase.h"), "PluginFieldType")
    assert all("k" + name in members for name in dtypes.WEIGHT_FIELD_TYPES.values())


def test_every_module_reads_the_one_table():
    assert _derive.TRT_DTYPE_CODES is dtypes.TRT_CODES
    assert sdk.KERNEL_DTYPES is dtypes.KERNEL_CODES
    assert describe._CXX_DTYPES is dtypes.KERNEL_NAMES
    assert describe._TRITON_DTYPES is dtypes.TRITON_NAMES
    assert onnx._ONNX_DTYPES is dtypes.ONNX_NAMES
    assert spec.WEIGHT_FIELD_TYPES is dtypes.WEIGHT_FIELD_TYPES
    assert harness._DTYPE_NAMES is dtypes.TRT_NAMES
