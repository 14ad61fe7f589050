// How a kernel stores an fp32 result: rounded to a floating-point type (RoundTo), or quantized by a per-tensor scale
// read from device memory, as TensorRT's IQuantizeLayer and ONNX QuantizeLinear do: q = saturate(round(v / scale)),
// the division in fp32 and correctly rounded (not v * (1 / scale), which rounds twice).
//
// A kernel takes one of these as a parameter, calls ready() once per thread (after any programmatic-dependent-launch
// wait: the scale may be the previous kernel's output), then converts each value with operator().
#pragma once

#include "type_utils.cuh"

#include <cuda_fp8.h>

namespace ttp
{

template <typename T>
struct RoundTo
{
    using Elem = T;

    __device__ __forceinline__ RoundTo ready() const
    {
        return *this;
    }
    __device__ __forceinline__ T operator()(float v) const
    {
        return fromFloat<T>(v);
    }
};

// FP8 E4M3 (OCP "fn": no infinities): round to nearest even, saturated to +-448; NaN stays NaN.
struct QuantizeFp8E4M3
{
    using Elem = __nv_fp8_storage_t;

    float const* scalePtr;
    float scale;

    __device__ __forceinline__ QuantizeFp8E4M3 ready() const
    {
        return {scalePtr, *scalePtr};
    }
    __device__ __forceinline__ Elem operator()(float v) const
    {
        return __nv_cvt_float_to_fp8(__fdiv_rn(v, scale), __NV_SATFINITE, __NV_E4M3);
    }
};

// INT8: round half to even, saturated to [-128, 127]; NaN becomes 0 (the conversion's NaN result).
struct QuantizeInt8
{
    using Elem = int8_t;

    float const* scalePtr;
    float scale;

    __device__ __forceinline__ QuantizeInt8 ready() const
    {
        return {scalePtr, *scalePtr};
    }
    __device__ __forceinline__ Elem operator()(float v) const
    {
        int const r = __float2int_rn(__fdiv_rn(v, scale));
        return static_cast<Elem>(r < -128 ? -128 : (r > 127 ? 127 : r));
    }
};

} // namespace ttp
