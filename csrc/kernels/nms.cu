#include "nms.h"

#include <cub/device/device_radix_sort.cuh>

namespace ttp::vision
{
namespace
{

constexpr int64_t kBOXES_PER_WORD = 64;

size_t aligned(size_t bytes)
{
    return (bytes + 255) / 256 * 256;
}

struct Layout
{
    size_t order, sortedScores, iota, mask, removed, sortTemp, total;
};

Layout layout(int64_t n)
{
    int64_t const words = (n + kBOXES_PER_WORD - 1) / kBOXES_PER_WORD;
    size_t sortBytes = 0;
    cub::DeviceRadixSort::SortPairsDescending(static_cast<void*>(nullptr), sortBytes,
        static_cast<float const*>(nullptr), static_cast<float*>(nullptr), static_cast<int32_t const*>(nullptr),
        static_cast<int32_t*>(nullptr), static_cast<int>(n));
    Layout l{};
    l.order = 0;
    l.sortedScores = l.order + aligned(n * sizeof(int32_t));
    l.iota = l.sortedScores + aligned(n * sizeof(float));
    l.mask = l.iota + aligned(n * sizeof(int32_t));
    l.removed = l.mask + aligned(static_cast<size_t>(n * words) * sizeof(uint64_t));
    l.sortTemp = l.removed + aligned(static_cast<size_t>(words) * sizeof(uint64_t));
    l.total = l.sortTemp + aligned(sortBytes);
    return l;
}

__global__ void iotaKernel(int32_t* values, int64_t n)
{
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    {
        values[i] = static_cast<int32_t>(i);
    }
}

__device__ bool overlaps(float4 a, float4 b, float threshold)
{
    float const left = fmaxf(a.x, b.x);
    float const top = fmaxf(a.y, b.y);
    float const right = fminf(a.z, b.z);
    float const bottom = fminf(a.w, b.w);
    float const inter = fmaxf(right - left, 0.0F) * fmaxf(bottom - top, 0.0F);
    float const areaA = (a.z - a.x) * (a.w - a.y);
    float const areaB = (b.z - b.x) * (b.w - b.y);
    return inter / (areaA + areaB - inter) > threshold;
}

// Block (rowBlock, colBlock): bit j of mask[i][colBlock] says sorted box i suppresses sorted box 64 * colBlock + j.
__global__ void maskKernel(float const* boxes, int32_t const* order, int64_t n, float threshold, uint64_t* mask)
{
    int64_t const words = (n + kBOXES_PER_WORD - 1) / kBOXES_PER_WORD;
    int64_t const rowBlock = blockIdx.y;
    int64_t const colBlock = blockIdx.x;
    if (rowBlock > colBlock)
    {
        return;
    }
    __shared__ float4 columns[kBOXES_PER_WORD];
    int64_t const column = colBlock * kBOXES_PER_WORD + threadIdx.x;
    if (column < n)
    {
        columns[threadIdx.x] = reinterpret_cast<float4 const*>(boxes)[order[column]];
    }
    __syncthreads();
    int64_t const row = rowBlock * kBOXES_PER_WORD + threadIdx.x;
    if (row >= n)
    {
        return;
    }
    float4 const box = reinterpret_cast<float4 const*>(boxes)[order[row]];
    int64_t const count
        = n - colBlock * kBOXES_PER_WORD < kBOXES_PER_WORD ? n - colBlock * kBOXES_PER_WORD : kBOXES_PER_WORD;
    uint64_t bits = 0;
    for (int64_t j = rowBlock == colBlock ? threadIdx.x + 1 : 0; j < count; ++j)
    {
        if (overlaps(box, columns[j], threshold))
        {
            bits |= uint64_t{1} << j;
        }
    }
    mask[row * words + colBlock] = bits;
}

// One warp walks the boxes by decreasing score; lane l owns the removed words w with w % 32 == l.
__global__ void reduceKernel(
    uint64_t const* mask, int32_t const* order, int64_t n, uint64_t* removed, int64_t* keep, int64_t* count)
{
    int64_t const words = (n + kBOXES_PER_WORD - 1) / kBOXES_PER_WORD;
    unsigned const lane = threadIdx.x;
    for (int64_t w = lane; w < words; w += 32)
    {
        removed[w] = 0;
    }
    __syncwarp();
    int64_t kept = 0;
    for (int64_t block = 0; block < words; ++block)
    {
        uint64_t current
            = __shfl_sync(0xffffffffU, lane == block % 32 ? removed[block] : 0, static_cast<int>(block % 32));
        int64_t const end = (block + 1) * kBOXES_PER_WORD < n ? (block + 1) * kBOXES_PER_WORD : n;
        for (int64_t i = block * kBOXES_PER_WORD; i < end; ++i)
        {
            if ((current >> (i % kBOXES_PER_WORD)) & 1U)
            {
                continue;
            }
            if (lane == 0)
            {
                keep[kept] = order[i];
            }
            ++kept;
            uint64_t const* row = mask + i * words;
            current |= row[block];
            for (int64_t w = block + 1 + ((lane + 32 - (block + 1) % 32) % 32); w < words; w += 32)
            {
                removed[w] |= row[w];
            }
        }
        __syncwarp();
    }
    if (lane == 0)
    {
        *count = kept;
    }
}

} // namespace

size_t nmsWorkspaceSize(sdk::LaunchArgs const& a)
{
    return layout(a.inputs[0].dims[0]).total;
}

cudaError_t nms(sdk::LaunchArgs const& a)
{
    if (a.nbInputs != 2 || a.nbOutputs != 2 || a.inputs[0].dtype != DType::kFLOAT32 || a.inputs[0].rank != 2
        || a.inputs[0].dims[1] != 4 || a.outputs[0].dtype != DType::kINT64)
    {
        return cudaErrorInvalidValue;
    }
    int64_t const n = a.inputs[0].dims[0];
    auto* count = static_cast<int64_t*>(a.outputs[1].data);
    if (n == 0)
    {
        return cudaMemsetAsync(count, 0, sizeof(int64_t), a.stream);
    }
    Layout const l = layout(n);
    if (a.workspace == nullptr || (a.workspaceSize != 0 && a.workspaceSize < l.total))
    {
        return cudaErrorInvalidValue;
    }
    auto* base = static_cast<uint8_t*>(a.workspace);
    auto* order = reinterpret_cast<int32_t*>(base + l.order);
    auto* sortedScores = reinterpret_cast<float*>(base + l.sortedScores);
    auto* iota = reinterpret_cast<int32_t*>(base + l.iota);
    auto* mask = reinterpret_cast<uint64_t*>(base + l.mask);
    auto* removed = reinterpret_cast<uint64_t*>(base + l.removed);
    int const threads = 256;
    iotaKernel<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, a.stream>>>(iota, n);
    size_t sortBytes = l.total - l.sortTemp;
    cudaError_t err = cub::DeviceRadixSort::SortPairsDescending(base + l.sortTemp, sortBytes,
        static_cast<float const*>(a.inputs[1].data), sortedScores, iota, order, static_cast<int>(n), 0, 32, a.stream);
    if (err != cudaSuccess)
    {
        return err;
    }
    int64_t const words = (n + kBOXES_PER_WORD - 1) / kBOXES_PER_WORD;
    dim3 const grid(static_cast<unsigned>(words), static_cast<unsigned>(words));
    maskKernel<<<grid, kBOXES_PER_WORD, 0, a.stream>>>(
        static_cast<float const*>(a.inputs[0].data), order, n, static_cast<float>(a.scalars[0]), mask);
    reduceKernel<<<1, 32, 0, a.stream>>>(mask, order, n, removed, static_cast<int64_t*>(a.outputs[0].data), count);
    return cudaGetLastError();
}

} // namespace ttp::vision
