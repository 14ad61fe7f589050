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

// (N, C, H, W) -> (N, H, W, C), kTILE x kTILE tiles through shared memory, 32 x 8 threads a tile: each thread moves
// 16 elements, all loaded before the first is stored (enough bytes in flight to near DRAM's rate in 16-bit types too).
constexpr int kTILE = 64;

template <typename T>
__global__ void __launch_bounds__(256) toChannelsLastKernel(T const* input, T* output, int channels, int planeSize)
{
    __shared__ T tile[kTILE][kTILE + 4 / sizeof(T)]; // a row 4 bytes past the banks: no conflicts either way
    int64_t const image = blockIdx.z;
    int const pixel0 = static_cast<int>(blockIdx.x) * kTILE;
    int const channel0 = static_cast<int>(blockIdx.y) * kTILE;
    T const* from = input + image * channels * planeSize;
    T* to = output + image * channels * planeSize;
    int const x = static_cast<int>(threadIdx.x);
#pragma unroll
    for (int i = static_cast<int>(threadIdx.y); i < kTILE; i += 8)
    {
        int const channel = channel0 + i;
#pragma unroll
        for (int half = 0; half < kTILE; half += 32)
        {
            int const pixel = pixel0 + half + x;
            if (channel < channels && pixel < planeSize)
            {
                tile[i][half + x] = from[static_cast<int64_t>(channel) * planeSize + pixel];
            }
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = static_cast<int>(threadIdx.y); i < kTILE; i += 8)
    {
        int const pixel = pixel0 + i;
#pragma unroll
        for (int half = 0; half < kTILE; half += 32)
        {
            int const channel = channel0 + half + x;
            if (channel < channels && pixel < planeSize)
            {
                to[static_cast<int64_t>(pixel) * channels + channel] = tile[half + x][i];
            }
        }
    }
}

// Whether toChannelsLast's grid holds (N, C, H * W).
inline bool channelsLastFits(int64_t batch, int64_t channels, int64_t planeSize)
{
    return (planeSize + kTILE - 1) / kTILE <= std::numeric_limits<int32_t>::max()
           && (channels + kTILE - 1) / kTILE <= 65535 && batch <= 65535
           && channels <= std::numeric_limits<int32_t>::max() && planeSize <= std::numeric_limits<int32_t>::max();
}

// `input` (N, C, H * W) written to `output` as (N, H * W, C) on `stream`; the caller checked channelsLastFits.
template <typename T>
void toChannelsLast(T const* input, T* output, int64_t batch, int64_t channels, int64_t planeSize, cudaStream_t stream)
{
    dim3 const grid(static_cast<unsigned>((planeSize + kTILE - 1) / kTILE),
        static_cast<unsigned>((channels + kTILE - 1) / kTILE), static_cast<unsigned>(batch));
    toChannelsLastKernel<T>
        <<<grid, dim3(32, 8), 0, stream>>>(input, output, static_cast<int>(channels), static_cast<int>(planeSize));
}

} // namespace
} // namespace ttp::vision
