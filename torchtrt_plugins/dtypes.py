"""Every tensor dtype we handle and its name or value in each system we hand it to: the one table, read by the
modules that talk to those systems (``_derive``, ``sdk``, ``kernels``, ``onnx``, ``spec``, ``testing.harness``).

A ``None`` means that system does not take the dtype from us.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch


class DType(NamedTuple):
    torch: torch.dtype
    #: TensorRT ``DataType``: member name and value (NvInferRuntimeBase.h).
    trt_name: str | None
    trt_code: int | None
    #: ``ttp::DType``: enumerator and value (csrc/sdk/dtypes.h).
    kernel_name: str | None
    kernel_code: int | None
    #: ONNX element type (``TensorProto``, ``ir.DataType``).
    onnx: str | None
    #: The ``PluginFieldType`` of a weight field holding elements of the dtype (``declare(weight_fields=...)``).
    weight_field: str | None
    #: Triton pointer element type.
    triton: str | None


TABLE = (
    DType(torch.float32, "FLOAT", 0, "kFLOAT32", 0, "FLOAT", "FLOAT32", "fp32"),
    DType(torch.float16, "HALF", 1, "kFLOAT16", 1, "FLOAT16", "FLOAT16", "fp16"),
    DType(torch.bfloat16, "BF16", 7, "kBFLOAT16", 2, "BFLOAT16", "BF16", "bf16"),
    DType(torch.int8, "INT8", 2, "kINT8", 3, "INT8", "INT8", "i8"),
    DType(torch.int32, "INT32", 3, "kINT32", 4, "INT32", "INT32", "i32"),
    DType(torch.int64, "INT64", 8, "kINT64", 5, "INT64", "INT64", "i64"),
    DType(torch.bool, "BOOL", 4, "kBOOL", 6, "BOOL", None, None),
    DType(torch.float8_e4m3fn, "FP8", 6, "kFLOAT8_E4M3", 7, "FLOAT8E4M3FN", None, "fp8e4nv"),
    DType(torch.uint8, "UINT8", 5, None, None, "UINT8", None, None),
    DType(torch.float64, None, None, None, None, "DOUBLE", None, None),
)


def _column(name: str) -> dict[torch.dtype, Any]:
    """torch dtype -> the ``name`` column, for the dtypes that system takes, in table order."""
    return {row.torch: getattr(row, name) for row in TABLE if getattr(row, name) is not None}


#: torch dtype -> TensorRT DataType value, in value order.
TRT_CODES: dict[torch.dtype, int] = dict(sorted(_column("trt_code").items(), key=lambda item: item[1]))
TRT_NAMES: dict[torch.dtype, str] = _column("trt_name")
KERNEL_CODES: dict[torch.dtype, int] = _column("kernel_code")
KERNEL_NAMES: dict[torch.dtype, str] = _column("kernel_name")
ONNX_NAMES: dict[torch.dtype, str] = _column("onnx")
WEIGHT_FIELD_TYPES: dict[torch.dtype, str] = _column("weight_field")
TRITON_NAMES: dict[torch.dtype, str] = _column("triton")
