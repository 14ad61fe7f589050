// Device helpers shared by the kernels: element conversion, vector loads, reductions, launch bounds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace ttp
{

constexpr int kWarpSize = 32;

__device__ __forceinline__ float toFloat(float v)
{
    return v;
}
__device__ __forceinline__ float toFloat(__half v)
{
    return __half2float(v);
}
__device__ __forceinline__ float toFloat(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T fromFloat(float v);
template <>
__device__ __forceinline__ float fromFloat<float>(float v)
{
    return v;
}
template <>
__device__ __forceinline__ __half fromFloat<__half>(float v)
{
    return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

// VEC elements moved as one aligned load/store.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec
{
    T v[VEC];
};

// Sum over aligned groups of LANES consecutive lanes (LANES a power of two <= 32); all 32 lanes must call.
template <int LANES>
__device__ __forceinline__ float groupSum(float v)
{
#pragma unroll
    for (int offset = LANES / 2; offset > 0; offset >>= 1)
    {
        v += __shfl_xor_sync(0xffffffffU, v, offset);
    }
    return v;
}

__device__ __forceinline__ float warpSum(float v)
{
    return groupSum<kWarpSize>(v);
}

// Sum over the block; `partial` holds one float per warp. Safe to call repeatedly with the same buffer.
template <int BLOCK>
__device__ __forceinline__ float blockSum(float v, float* partial)
{
    constexpr int kWarps = BLOCK / kWarpSize;
    int const lane = threadIdx.x % kWarpSize;
    int const warp = threadIdx.x / kWarpSize;
    v = warpSum(v);
    __syncthreads(); // the previous call's readers are done with `partial`
    if (lane == 0)
    {
        partial[warp] = v;
    }
    __syncthreads();
    float total = 0.F;
#pragma unroll
    for (int i = 0; i < kWarps; ++i)
    {
        total += partial[i];
    }
    return total;
}

inline bool isAligned(void const* p, uintptr_t bytes)
{
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// Enough blocks to fill the current device; grid-stride loops cover the rest.
inline cudaError_t maxResidentBlocks(int* blocks, int blocksPerSm = 32)
{
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess)
    {
        return err;
    }
    int sms = 0;
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    *blocks = std::max(1, sms * blocksPerSm);
    return err;
}

} // namespace ttp
