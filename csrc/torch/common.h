// torch adapter helpers: dtype mapping, argument checks, error reporting.
#pragma once

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "kernels/common.h"

namespace ttp::torch_adapter
{

inline DType toKernelDType(at::ScalarType t, char const* op, char const* arg)
{
    switch (t)
    {
    case at::kFloat: return DType::kFLOAT32;
    case at::kHalf: return DType::kFLOAT16;
    case at::kBFloat16: return DType::kBFLOAT16;
    case at::kChar: return DType::kINT8;
    case at::kInt: return DType::kINT32;
    case at::kLong: return DType::kINT64;
    case at::kBool: return DType::kBOOL;
    default: TORCH_CHECK(false, "torchtrt.", op, ": argument '", arg, "' has unsupported dtype ", t);
    }
    return DType::kFLOAT32;
}

inline void checkCuda(cudaError_t err, char const* op)
{
    TORCH_CHECK(err == cudaSuccess, "torchtrt.", op, ": CUDA kernel failed: ", cudaGetErrorString(err));
}

} // namespace ttp::torch_adapter
