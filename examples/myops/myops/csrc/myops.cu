// myops' kernels behind the torchtrt_plugins SDK launcher ABI: torch-free, TensorRT-free.
#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// The index of each op's scalar arguments in LaunchArgs::scalars, generated from the declarations at build time.
#include "op_fields.h"
#include "sdk/ttp_sdk.h"

namespace myops
{
namespace
{

using ttp::DType;
using ttp::sdk::LaunchArgs;

template <typename T>
__global__ void scaledAddScalarKernel(T const* x, T const* y, T* out, int64_t n, float alpha)
{
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    {
        out[i] = static_cast<T>(static_cast<float>(x[i]) + alpha * static_cast<float>(y[i]));
    }
}

// Four elements per thread and iteration; the tail is handled one by one.
template <typename T>
__global__ void scaledAddVectorKernel(T const* x, T const* y, T* out, int64_t n, float alpha)
{
    int64_t const stride = int64_t{gridDim.x} * blockDim.x * 4;
    int64_t const full = n / 4 * 4;
    for (int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 4; i < full; i += stride)
    {
#pragma unroll
        for (int k = 0; k < 4; ++k)
        {
            out[i + k] = static_cast<T>(static_cast<float>(x[i + k]) + alpha * static_cast<float>(y[i + k]));
        }
    }
    for (int64_t i = full + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    {
        out[i] = static_cast<T>(static_cast<float>(x[i]) + alpha * static_cast<float>(y[i]));
    }
}

template <typename T>
cudaError_t launchScaledAdd(LaunchArgs const& a, bool vector)
{
    int64_t const n = a.inputs[0].numel();
    if (n == 0)
    {
        return cudaSuccess;
    }
    auto const* x = static_cast<T const*>(a.inputs[0].data);
    auto const* y = static_cast<T const*>(a.inputs[1].data);
    auto* out = static_cast<T*>(a.outputs[0].data);
    float const alpha = static_cast<float>(a.scalars[fields::scaled_add::kALPHA]);
    int const threads = 256;
    int64_t const work = vector ? (n + 3) / 4 : n;
    int const blocks
        = static_cast<int>((work + threads - 1) / threads < 65535 ? (work + threads - 1) / threads : 65535);
    if (vector)
    {
        scaledAddVectorKernel<T><<<blocks, threads, 0, a.stream>>>(x, y, out, n, alpha);
    }
    else
    {
        scaledAddScalarKernel<T><<<blocks, threads, 0, a.stream>>>(x, y, out, n, alpha);
    }
    return cudaGetLastError();
}

cudaError_t scaledAddTyped(LaunchArgs const& a, bool vector)
{
    switch (a.inputs[0].dtype)
    {
    case DType::kFLOAT32: return launchScaledAdd<float>(a, vector);
    case DType::kFLOAT16: return launchScaledAdd<__half>(a, vector);
    case DType::kBFLOAT16: return launchScaledAdd<__nv_bfloat16>(a, vector);
    default: return cudaErrorInvalidValue;
    }
}

constexpr int kFILTER_THREADS = 512;

// One block walks the input in chunks; a block-wide scan keeps the kept elements in order. With `out` null (the
// sizes phase) it only counts them.
__global__ void filterAboveKernel(float const* x, int64_t n, float threshold, float* out, int64_t* count)
{
    using Scan = cub::BlockScan<int, kFILTER_THREADS>;
    __shared__ typename Scan::TempStorage storage;
    __shared__ int64_t base;
    if (threadIdx.x == 0)
    {
        base = 0;
    }
    __syncthreads();
    for (int64_t start = 0; start < n; start += kFILTER_THREADS)
    {
        int64_t const i = start + threadIdx.x;
        float const value = i < n ? x[i] : 0.0F;
        int const keep = i < n && value > threshold ? 1 : 0;
        int offset = 0;
        int total = 0;
        Scan(storage).ExclusiveSum(keep, offset, total);
        if (keep && out != nullptr)
        {
            out[base + offset] = value;
        }
        __syncthreads();
        if (threadIdx.x == 0)
        {
            base += total;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
    {
        *count = base;
    }
}

} // namespace

cudaError_t scaledAddScalar(LaunchArgs const& a)
{
    return scaledAddTyped(a, false);
}

cudaError_t scaledAddVector(LaunchArgs const& a)
{
    return scaledAddTyped(a, true);
}

// The default (tactic 0): the vector kernel once there is enough work for it.
cudaError_t scaledAdd(LaunchArgs const& a)
{
    return scaledAddTyped(a, a.inputs[0].numel() >= 4096);
}

// Declared sizes_first: kPHASE_SIZES counts (the output's data is null), kPHASE_OUTPUTS scans again and writes
// the elements into the exact-size output, kPHASE_ALL (the plugin) does both at once.
cudaError_t filterAbove(LaunchArgs const& a)
{
    if (a.inputs[0].dtype != DType::kFLOAT32 || a.nbOutputs != 2)
    {
        return cudaErrorInvalidValue;
    }
    auto* out = a.phase == ttp::sdk::kPHASE_SIZES ? nullptr : static_cast<float*>(a.outputs[0].data);
    filterAboveKernel<<<1, kFILTER_THREADS, 0, a.stream>>>(static_cast<float const*>(a.inputs[0].data),
        a.inputs[0].numel(), static_cast<float>(a.scalars[fields::filter_above::kTHRESHOLD]), out,
        static_cast<int64_t*>(a.outputs[1].data));
    return cudaGetLastError();
}

} // namespace myops
