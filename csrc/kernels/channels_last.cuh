// The channels-last copy of an NCHW tensor that deform_conv2d's and roi_align's channels-last tactics sample with
// vector loads (a pixel's channels contiguous).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

namespace ttp::vision
{
// Each including file its own copy (the kernel's host stub included).
namespace
{

// (N, C, H, W) -> (N, H, W, C), 32 x 32 tiles through shared memory.
template <typename T>
__global__ void toChannelsLastKernel(T const* input, T* output, int channels, int planeSize)
{
    __shared__ T tile[32][33];
    int64_t const image = blockIdx.z;
    int const pixel0 = static_cast<int>(blockIdx.x) * 32;
    int const channel0 = static_cast<int>(blockIdx.y) * 32;
    T const* from = input + image * channels * planeSize;
    T* to = output + image * channels * planeSize;
    for (int i = static_cast<int>(threadIdx.y); i < 32; i += static_cast<int>(blockDim.y))
    {
        int const channel = channel0 + i;
        int const pixel = pixel0 + static_cast<int>(threadIdx.x);
        if (channel < channels && pixel < planeSize)
        {
            tile[i][threadIdx.x] = from[static_cast<int64_t>(channel) * planeSize + pixel];
        }
    }
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.y); i < 32; i += static_cast<int>(blockDim.y))
    {
        int const pixel = pixel0 + i;
        int const channel = channel0 + static_cast<int>(threadIdx.x);
        if (channel < channels && pixel < planeSize)
        {
            to[static_cast<int64_t>(pixel) * channels + channel] = tile[threadIdx.x][i];
        }
    }
}

// Whether toChannelsLast's grid holds (N, C, H * W).
inline bool channelsLastFits(int64_t batch, int64_t channels, int64_t planeSize)
{
    return (planeSize + 31) / 32 <= std::numeric_limits<int32_t>::max() && (channels + 31) / 32 <= 65535
           && batch <= 65535 && channels <= std::numeric_limits<int32_t>::max()
           && planeSize <= std::numeric_limits<int32_t>::max();
}

// `input` (N, C, H * W) written to `output` as (N, H * W, C) on `stream`; the caller checked channelsLastFits.
template <typename T>
void toChannelsLast(T const* input, T* output, int64_t batch, int64_t channels, int64_t planeSize, cudaStream_t stream)
{
    dim3 const grid(static_cast<unsigned>((planeSize + 31) / 32), static_cast<unsigned>((channels + 31) / 32),
        static_cast<unsigned>(batch));
    toChannelsLastKernel<T>
        <<<grid, dim3(32, 8), 0, stream>>>(input, output, static_cast<int>(channels), static_cast<int>(planeSize));
}

} // namespace
} // namespace ttp::vision
