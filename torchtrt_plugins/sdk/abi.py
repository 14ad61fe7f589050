"""The launcher ABI (``csrc/sdk/ttp_sdk.h``) as ctypes mirrors: the structs a launcher reads and its function types."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import torch

from .. import dtypes
from ..spec import SpecError

#: torch dtype -> ttp::DType (csrc/sdk/dtypes.h).
KERNEL_DTYPES = dtypes.KERNEL_CODES
MAX_DIMS = 8


class LaunchTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("dims", ctypes.c_int64 * MAX_DIMS),
    ]


class LaunchArgs(ctypes.Structure):
    _fields_ = [
        ("inputs", ctypes.POINTER(LaunchTensor)),
        ("nbInputs", ctypes.c_int32),
        ("outputs", ctypes.POINTER(LaunchTensor)),
        ("nbOutputs", ctypes.c_int32),
        ("scalars", ctypes.POINTER(ctypes.c_double)),
        ("nbScalars", ctypes.c_int32),
        ("workspace", ctypes.c_void_p),
        ("workspaceSize", ctypes.c_size_t),
        ("tactic", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
        ("phase", ctypes.c_int32),
        ("resources", ctypes.POINTER(ctypes.c_void_p)),
        ("nbResources", ctypes.c_int32),
    ]


def tensor_struct(label: str, tensor: torch.Tensor, shape: Sequence[int] | None = None) -> LaunchTensor:
    shape = tuple(tensor.shape) if shape is None else tuple(shape)
    if len(shape) > MAX_DIMS:
        raise SpecError(f"{label}: tensors may have at most {MAX_DIMS} dims, got shape {shape}")
    if tensor.dtype not in KERNEL_DTYPES:
        raise SpecError(f"{label}: dtype {tensor.dtype} has no kernel dtype")
    dims = (ctypes.c_int64 * MAX_DIMS)(*shape)
    return LaunchTensor(tensor.data_ptr() if tensor.numel() else None, KERNEL_DTYPES[tensor.dtype], len(shape), dims)


LAUNCHER_FUNCTION = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(LaunchArgs))
WORKSPACE_FUNCTION = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.POINTER(LaunchArgs))
