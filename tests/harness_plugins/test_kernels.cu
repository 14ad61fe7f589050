#include "test_kernels.h"

#include <cuda_fp16.h>

namespace ttp::testplugins
{
namespace
{

template <typename T>
__global__ void scaleKernel(T const* x, T* y, int64_t n, float scale, KernelFault fault)
{
    int64_t const i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n)
    {
        y[i] = static_cast<T>(static_cast<float>(x[i]) * scale);
        if (fault == KernelFault::kMODIFY_INPUT)
        {
            const_cast<T*>(x)[i] = static_cast<T>(0.0F);
        }
    }
    if (i == n && fault == KernelFault::kWRITE_PAST_END)
    {
        y[n] = static_cast<T>(1.0F);
    }
}

__global__ void positivesKernel(float const* x, float* values, void* count, int64_t n, float threshold, bool asFloat)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n; ++i)
    {
        if (x[i] > threshold)
        {
            values[k++] = x[i];
        }
    }
    if (asFloat)
    {
        *static_cast<float*>(count) = static_cast<float>(k);
    }
    else
    {
        *static_cast<int64_t*>(count) = k;
    }
}

} // namespace

cudaError_t scale(
    void const* x, void* y, int64_t n, float scale, bool half, int32_t threads, KernelFault fault, cudaStream_t stream)
{
    int64_t const work = n + (fault == KernelFault::kWRITE_PAST_END ? 1 : 0);
    if (work == 0)
    {
        return cudaSuccess;
    }
    auto const blocks = static_cast<unsigned>((work + threads - 1) / threads);
    if (half)
    {
        scaleKernel<<<blocks, threads, 0, stream>>>(
            static_cast<__half const*>(x), static_cast<__half*>(y), n, scale, fault);
    }
    else
    {
        scaleKernel<<<blocks, threads, 0, stream>>>(
            static_cast<float const*>(x), static_cast<float*>(y), n, scale, fault);
    }
    return cudaGetLastError();
}

cudaError_t positives(
    float const* x, float* values, void* count, int64_t n, float threshold, bool countAsFloat, cudaStream_t stream)
{
    positivesKernel<<<1, 1, 0, stream>>>(x, values, count, n, threshold, countAsFloat);
    return cudaGetLastError();
}

} // namespace ttp::testplugins
