#include "nms.h"
#include "suppression_bits.cuh"

#include "op_fields.h"

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

namespace ttp::vision
{
namespace
{

using suppression::kBOXES_PER_WORD;
using suppression::laneSelect;
using suppression::warpOr;
using suppression::wordCount;

constexpr int kREDUCE_WARPS = 32;
constexpr int kKEEP_THREADS = 256;
constexpr size_t kDEFAULT_SHARED_BYTES = 48 * 1024;

size_t aligned(size_t bytes)
{
    return (bytes + 255) / 256 * 256;
}

// The overlap bits are kept by column block, upper triangle only: column block c holds one word per sorted box
// 0 .. 64 (c + 1) - 1 (the boxes that can suppress one of its boxes), so column c starts at word 32 c (c + 1).
// Stored this way the reduce reads a column as one contiguous run, and the matrix takes half the space.
__host__ __device__ int64_t columnStart(int64_t column)
{
    return kBOXES_PER_WORD / 2 * column * (column + 1);
}

struct Layout
{
    size_t order, sortedScores, iota, mask, kept, sortTemp, total;
};

Layout layout(int64_t n)
{
    int64_t const words = wordCount(n);
    size_t sortBytes = 0;
    cub::DeviceRadixSort::SortPairsDescending(static_cast<void*>(nullptr), sortBytes,
        static_cast<float const*>(nullptr), static_cast<float*>(nullptr), static_cast<int32_t const*>(nullptr),
        static_cast<int32_t*>(nullptr), static_cast<int>(n));
    Layout l{};
    l.order = 0;
    l.sortedScores = l.order + aligned(n * sizeof(int32_t));
    l.iota = l.sortedScores + aligned(n * sizeof(float));
    l.mask = l.iota + aligned(n * sizeof(int32_t));
    l.kept = l.mask + aligned(static_cast<size_t>(columnStart(words)) * sizeof(uint64_t));
    l.sortTemp = l.kept + aligned(static_cast<size_t>(words) * sizeof(uint64_t));
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

// From kBLOCK_SORT_MIN to kBLOCK_SORT_BOXES boxes one block sorts them (cub's BlockRadixSort, one launch) instead of
// DeviceRadixSort's passes (past its one-block size, six kernels and six memsets): both sorts are stable, so the order
// is the same. On the H200 (torch.profiler) at 5000 boxes: 22.6 us against 46 with the index fill; at 1000,
// DeviceRadixSort's one-block kernel took 10.6 and this one 16.6 (it sorts all 8192 keys), hence the lower bound.
constexpr int kSORT_THREADS = 512;
constexpr int kSORT_ITEMS = 16;
constexpr int64_t kBLOCK_SORT_BOXES = int64_t{kSORT_THREADS} * kSORT_ITEMS;
constexpr int64_t kBLOCK_SORT_MIN = 4097;

__global__ void __launch_bounds__(kSORT_THREADS) blockSortKernel(float const* scores, int64_t n, int32_t* order)
{
    using Sort = cub::BlockRadixSort<float, kSORT_THREADS, kSORT_ITEMS, int32_t>;
    __shared__ typename Sort::TempStorage storage;
    float keys[kSORT_ITEMS];
    int32_t values[kSORT_ITEMS];
    // The blocked arrangement (thread t holds positions 16 t ..), the one the stable order follows; past n, the key
    // that sorts last (all bits set), after every score, a NaN of the same bits included.
#pragma unroll
    for (int i = 0; i < kSORT_ITEMS; ++i)
    {
        int const position = static_cast<int>(threadIdx.x) * kSORT_ITEMS + i;
        keys[i] = position < n ? scores[position] : __int_as_float(-1);
        values[i] = position;
    }
    Sort(storage).SortDescending(keys, values);
#pragma unroll
    for (int i = 0; i < kSORT_ITEMS; ++i)
    {
        int const rank = static_cast<int>(threadIdx.x) * kSORT_ITEMS + i;
        if (rank < n)
        {
            order[rank] = values[i];
        }
    }
}

// torchvision's IoU test, operation for operation, so that every decision is the same bit for bit. Pairs that do not
// intersect skip the division: 0 / union is 0, -0 or NaN, never above a threshold >= 0.
__device__ bool overlaps(float4 a, float4 b, float threshold)
{
    float const left = fmaxf(a.x, b.x);
    float const top = fmaxf(a.y, b.y);
    float const right = fminf(a.z, b.z);
    float const bottom = fminf(a.w, b.w);
    float const inter = fmaxf(right - left, 0.0F) * fmaxf(bottom - top, 0.0F);
    if (!(inter > 0.0F) && threshold >= 0.0F)
    {
        return false;
    }
    float const areaA = (a.z - a.x) * (a.w - a.y);
    float const areaB = (b.z - b.x) * (b.w - b.y);
    return inter / (areaA + areaB - inter) > threshold;
}

// One block per (row block r <= column block c), numbered along the triangle: bit j of the word of sorted box
// 64 r + t in column c says that box suppresses sorted box 64 c + j.
__global__ void maskKernel(float const* boxes, int32_t const* order, int64_t n, float threshold, uint64_t* mask)
{
    int64_t rowBlock = 0;
    int64_t colBlock = 0;
    suppression::trianglePair(blockIdx.x, rowBlock, colBlock);
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
    mask[columnStart(colBlock) + row] = bits;
}

// The greedy walk, 64 boxes (one block) per step, in one thread block, never leaving the GPU. Warp 0 decides the
// boxes of block c from the bits that earlier kept boxes set in column c and from block c's own diagonal words,
// which it keeps in registers, so the sequential part touches no memory. Meanwhile the other warps OR column c + 1
// over the kept boxes of blocks < c (already final); warp 0 adds block c's own share once it is decided. Every load
// of a step is issued at once, whatever the data: the walk costs one round trip to L2 per 64 boxes, not one per
// kept box. With `keep` null (the sizes phase) the kept bits go to `keptOut` instead, for keepKernel.
__global__ void __launch_bounds__(kREDUCE_WARPS * 32) reduceKernel(
    uint64_t const* mask, int32_t const* order, int64_t n, int64_t* keep, uint64_t* keptOut, int64_t* count)
{
    extern __shared__ uint64_t keptWords[]; // bit j of word b: sorted box 64 b + j is kept
    __shared__ uint64_t partial[2][kREDUCE_WARPS - 1];
    int64_t const words = wordCount(n);
    unsigned const warp = threadIdx.x / 32;
    unsigned const lane = threadIdx.x % 32;

    // Warp 0's state: the removed bits of the current block, its diagonal words, the words its boxes hold in the
    // next column, and their original indices.
    uint64_t removed = 0;
    uint64_t diagLow = 0;
    uint64_t diagHigh = 0;
    uint64_t nextLow = 0;
    uint64_t nextHigh = 0;
    int32_t orderLow = 0;
    int32_t orderHigh = 0;
    int64_t kept = 0;
    auto loadBlock = [&](int64_t block)
    {
        int64_t const first = block * kBOXES_PER_WORD;
        uint64_t const* diagonal = mask + columnStart(block) + first;
        uint64_t const* next = block + 1 < words ? mask + columnStart(block + 1) + first : nullptr;
        bool const low = first + lane < n;
        bool const high = first + lane + 32 < n;
        diagLow = low ? __ldg(diagonal + lane) : 0;
        diagHigh = high ? __ldg(diagonal + lane + 32) : 0;
        orderLow = low ? __ldg(order + first + lane) : 0;
        orderHigh = high ? __ldg(order + first + lane + 32) : 0;
        nextLow = next != nullptr ? __ldg(next + lane) : 0;
        nextHigh = next != nullptr ? __ldg(next + lane + 32) : 0;
    };
    if (warp == 0)
    {
        loadBlock(0);
    }
    for (int64_t block = 0; block < words; ++block)
    {
        bool const last = block + 1 == words;
        if (warp == 0)
        {
            int64_t const first = block * kBOXES_PER_WORD;
            uint64_t const valid = n - first >= kBOXES_PER_WORD ? ~uint64_t{0} : (uint64_t{1} << (n - first)) - 1;
            uint64_t const current = suppression::decideBlock(removed, diagLow, diagHigh);
            uint64_t const keptBits = ~current & valid;
            if (lane == 0)
            {
                keptWords[block] = keptBits;
                if (keep == nullptr)
                {
                    keptOut[block] = keptBits;
                }
            }
            uint64_t const below = (uint64_t{1} << lane) - 1;
            if (keep != nullptr && ((keptBits >> lane) & 1U) != 0)
            {
                keep[kept + __popcll(keptBits & below)] = orderLow;
            }
            if (keep != nullptr && ((keptBits >> (lane + 32)) & 1U) != 0)
            {
                keep[kept + __popcll(keptBits & ((below << 32) | 0xffffffffULL))] = orderHigh;
            }
            kept += __popcll(keptBits);
            removed = last ? 0 : warpOr(laneSelect(keptBits, lane, nextLow, nextHigh));
            if (!last)
            {
                loadBlock(block + 1);
            }
        }
        else if (!last)
        {
            uint64_t const* column = mask + columnStart(block + 1);
            uint64_t bits = 0;
#pragma unroll 8
            for (int64_t b = warp - 1; b < block; b += kREDUCE_WARPS - 1)
            {
                uint64_t const low = __ldg(column + b * kBOXES_PER_WORD + lane);
                uint64_t const high = __ldg(column + b * kBOXES_PER_WORD + lane + 32);
                bits |= laneSelect(keptWords[b], lane, low, high);
            }
            bits = warpOr(bits);
            if (lane == 0)
            {
                partial[block & 1][warp - 1] = bits;
            }
        }
        __syncthreads();
        if (warp == 0 && !last)
        {
            removed |= warpOr(lane < kREDUCE_WARPS - 1 ? partial[block & 1][lane] : 0);
        }
    }
    if (threadIdx.x == 0)
    {
        *count = kept;
    }
}

// The outputs phase: the kept indices from the kept bits the sizes phase left, in the same order (one block, one
// 64-box word per thread and step, a block-wide scan of their counts).
__global__ void __launch_bounds__(kKEEP_THREADS)
    keepKernel(uint64_t const* keptWords, int32_t const* order, int64_t n, int64_t* keep)
{
    using Scan = cub::BlockScan<int64_t, kKEEP_THREADS>;
    __shared__ typename Scan::TempStorage storage;
    int64_t const words = wordCount(n);
    int64_t base = 0;
    for (int64_t start = 0; start < words; start += kKEEP_THREADS)
    {
        int64_t const word = start + threadIdx.x;
        uint64_t bits = word < words ? keptWords[word] : 0;
        int64_t offset = 0;
        int64_t total = 0;
        Scan(storage).ExclusiveSum(static_cast<int64_t>(__popcll(bits)), offset, total);
        while (bits != 0)
        {
            int const j = __ffsll(static_cast<long long>(bits)) - 1;
            keep[base + offset++] = order[word * kBOXES_PER_WORD + j];
            bits &= bits - 1;
        }
        base += total;
        __syncthreads();
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
    auto* kept = reinterpret_cast<uint64_t*>(base + l.kept);
    if (a.phase == sdk::kPHASE_OUTPUTS)
    {
        keepKernel<<<1, kKEEP_THREADS, 0, a.stream>>>(kept, order, n, static_cast<int64_t*>(a.outputs[0].data));
        return cudaGetLastError();
    }
    auto const* scores = static_cast<float const*>(a.inputs[1].data);
    cudaError_t err = cudaSuccess;
    if (n >= kBLOCK_SORT_MIN && n <= kBLOCK_SORT_BOXES)
    {
        blockSortKernel<<<1, kSORT_THREADS, 0, a.stream>>>(scores, n, order);
    }
    else
    {
        int const threads = 256;
        iotaKernel<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, a.stream>>>(iota, n);
        size_t sortBytes = l.total - l.sortTemp;
        err = cub::DeviceRadixSort::SortPairsDescending(
            base + l.sortTemp, sortBytes, scores, sortedScores, iota, order, static_cast<int>(n), 0, 32, a.stream);
        if (err != cudaSuccess)
        {
            return err;
        }
    }
    int64_t const words = wordCount(n);
    maskKernel<<<static_cast<unsigned>(words * (words + 1) / 2), kBOXES_PER_WORD, 0, a.stream>>>(
        static_cast<float const*>(a.inputs[0].data), order, n,
        static_cast<float>(a.scalars[torchvision::fields::nms::kIOU_THRESHOLD]), mask);
    size_t const shared = static_cast<size_t>(words) * sizeof(uint64_t);
    if (shared > kDEFAULT_SHARED_BYTES)
    {
        err = cudaFuncSetAttribute(reduceKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
        if (err != cudaSuccess)
        {
            return err;
        }
    }
    // The sizes phase keeps the kept bits in the workspace; the outputs phase turns them into indices.
    auto* keep = a.phase == sdk::kPHASE_SIZES ? nullptr : static_cast<int64_t*>(a.outputs[0].data);
    reduceKernel<<<1, kREDUCE_WARPS * 32, shared, a.stream>>>(mask, order, n, keep, kept, count);
    return cudaGetLastError();
}

} // namespace ttp::vision
