// torch adapter helpers: dtype mapping, argument checks, error reporting.
#pragma once

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <string>
#include <type_traits>

#include "kernels/common.h"

namespace ttp::torch_adapter
{

// Error messages are assembled without iostreams: with some toolchain combinations (seen with g++ 13
// and torch 2.11+cu130) number formatting through the locale crashes inside an extension.
inline std::string piece(std::string const& s)
{
    return s;
}
inline std::string piece(char const* s)
{
    return s;
}
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
std::string piece(T v)
{
    return std::to_string(v);
}
inline std::string piece(c10::IntArrayRef sizes)
{
    std::string out = "(";
    for (size_t i = 0; i < sizes.size(); ++i)
    {
        out += (i ? ", " : "") + std::to_string(sizes[i]);
    }
    return out + ")";
}
inline std::string piece(at::ScalarType t)
{
    return c10::toString(t);
}

template <typename... Args>
std::string message(char const* op, Args const&... args)
{
    return ("torchtrt." + std::string(op) + ": " + ... + piece(args));
}

// TORCH_CHECK with a message built by `message`, so the check never formats through iostreams.
#define TTP_CHECK(cond, op, ...)                                                                                       \
    do                                                                                                                 \
    {                                                                                                                  \
        if (!(cond))                                                                                                   \
        {                                                                                                              \
            TORCH_CHECK(false, ::ttp::torch_adapter::message(op, __VA_ARGS__));                                        \
        }                                                                                                              \
    } while (0)

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
    default: TTP_CHECK(false, op, "argument '", arg, "' has unsupported dtype ", t);
    }
    return DType::kFLOAT32;
}

inline void checkCuda(cudaError_t err, char const* op)
{
    TTP_CHECK(err == cudaSuccess, op, "CUDA kernel failed: ", cudaGetErrorString(err));
}

} // namespace ttp::torch_adapter
