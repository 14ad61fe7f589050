// torch adapter helpers: dtype mapping, argument checks, error reporting.
#pragma once

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <string>
#include <type_traits>

#include "contracts/contract.h"
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

// The kernel DType of `t`; false where the kernels have none.
inline bool kernelDTypeOf(at::ScalarType t, DType& out)
{
    switch (t)
    {
    case at::kFloat: out = DType::kFLOAT32; return true;
    case at::kHalf: out = DType::kFLOAT16; return true;
    case at::kBFloat16: out = DType::kBFLOAT16; return true;
    case at::kChar: out = DType::kINT8; return true;
    case at::kInt: out = DType::kINT32; return true;
    case at::kLong: out = DType::kINT64; return true;
    case at::kBool: out = DType::kBOOL; return true;
    default: return false;
    }
}

// The op's declared tensor inputs (contracts/ops.h): each tensor's dtype allowed, and shared where declared.
template <size_t N>
void checkInputs(
    std::array<contract::Input, N> const& inputs, std::array<at::Tensor const*, N> const& tensors, char const* op)
{
    for (size_t i = 0; i < N; ++i)
    {
        at::ScalarType const t = tensors[i]->scalar_type();
        DType dtype{};
        TTP_CHECK(kernelDTypeOf(t, dtype) && contract::accepts(inputs[i].torchMask, dtype), op, "argument '",
            inputs[i].name, "' must have dtype ", inputs[i].dtypeNames, ", got ", t);
        int32_t const same = inputs[i].sameDtypeAs;
        TTP_CHECK(same < 0 || tensors[same]->scalar_type() == t, op, "argument '", inputs[i].name,
            "' must have the same dtype as '", inputs[same < 0 ? 0 : same].name, "' (",
            tensors[same < 0 ? 0 : same]->scalar_type(), "), got ", t);
    }
}

// A scalar argument against its declared field (contracts/ops.h): in range, and finite for a float.
inline void checkField(contract::Field const& field, double value, char const* op)
{
    bool const isFloat = field.type == contract::FieldType::kFLOAT32 || field.type == contract::FieldType::kFLOAT64;
    TTP_CHECK((!isFloat || std::isfinite(value)) && field.inRange(value), op, "argument '", field.name, "' must be ",
        field.expectation, ", got ", value);
}

// A tactic argument: 0 (the kernels' own choice) or one the op declares.
template <size_t N>
void checkTactic(std::array<int32_t, N> const& tactics, int64_t tactic, char const* op)
{
    bool known = tactic == 0;
    for (int32_t value : tactics)
    {
        known = known || tactic == value;
    }
    if (!known)
    {
        std::string expected = "0";
        for (int32_t value : tactics)
        {
            expected += ", " + std::to_string(value);
        }
        TTP_CHECK(false, op, "argument 'tactic' must be one of [", expected, "], got ", tactic);
    }
}

} // namespace ttp::torch_adapter
