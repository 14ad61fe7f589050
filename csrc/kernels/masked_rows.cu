#include "masked_rows.h"
#include "type_utils.cuh"

namespace ttp
{
namespace
{

constexpr int kBlockThreads = 256;
constexpr int kWarps = kBlockThreads / kWarpSize;
constexpr int kResidentBlocksPerSm = 2048 / kBlockThreads;
constexpr int kScanThreads = 1024;
constexpr int kScanItems = 4;
constexpr int kMaskLoadBytes = 16;
// Rows per tile: a power of two in [kMinTileRows, kMaxTileRows], about kTileBytes of row data, so that
// short rows still give each block real work and the single-block scan over tiles stays short.
// kMinTileRows: a whole number of warp-wide 16-byte mask loads, even for one-byte masks.
constexpr int64_t kMinTileRows = kWarpSize * kMaskLoadBytes;
constexpr int64_t kMaxTileRows = kWarpSize * kBlockThreads; // one mask word per thread in the scatter
// TTP_MASKED_*: tuning knobs; the kernel lab (scripts/kernel_lab/peers_lab.py at bf45c72) built variants with -D. 64
// KiB tiles against 32 KiB: 4M rows of 64 bytes, half kept, 115.7 us vs 118.4 (do_bench, peer lab, H100).
#ifndef TTP_MASKED_TILE_BYTES
#define TTP_MASKED_TILE_BYTES (64 * 1024)
#endif
constexpr int64_t kTileBytes = TTP_MASKED_TILE_BYTES;
// The count kernel takes several tiles a block, at least kCountBlockRows mask entries, so that short rows do not
// leave most of its warps idle; the scan then runs over one total per count block.
constexpr int64_t kCountBlockRows = 4 * 1024;
constexpr int kMaxTilesPerCountBlock = 32;
constexpr size_t kWorkspaceAlign = 256;
// Copy chunks each thread has in flight per row; a split of a row is at least this many per thread.
constexpr int kCopyUnroll = 4;
// Rows each lane has in flight where a row is 2 to 32 chunks, one per lane of its group (peer lab, H100, 64 KiB
// tiles, half the rows kept, do_bench: 4M x 64 B 114.2 us with 8 vs 115.7 with 4, 1M x 128 B 60.9 vs 63.3; rows of
// one chunk were slower with 8: 10M x 4 B 64.3 vs 61.4, so they keep kCopyUnroll).
#ifndef TTP_MASKED_SHORT_ROWS_UNROLL
#define TTP_MASKED_SHORT_ROWS_UNROLL 8
#endif
constexpr int kShortRowsUnroll = TTP_MASKED_SHORT_ROWS_UNROLL;
// The three launches as programmatic dependent launches (each waits for the previous one's memory).
constexpr bool kPdl = true;

int64_t tileRowsFor(int64_t rowBytes)
{
    int64_t tileRows = kMinTileRows;
    while (tileRows < kMaxTileRows && tileRows * rowBytes < kTileBytes)
    {
        tileRows *= 2;
    }
    return tileRows;
}

int64_t tilesPerCountBlock(int64_t tileRows)
{
    return std::min<int64_t>(std::max<int64_t>(kCountBlockRows / tileRows, 1), kMaxTilesPerCountBlock);
}

__host__ __device__ __forceinline__ int64_t ceilDiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

size_t alignUp(size_t bytes)
{
    return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// Workspace layout: one bit per row (words of 32 rows); one int64 per tile (its count, then its offset within its
// count block); one int64 per count block (its total, then its offset). Sized for the smallest tiles.
struct Workspace
{
    uint32_t* words;
    int64_t* tileOffsets;
    int64_t* blockOffsets;

    Workspace(void* base, int64_t rows)
        : words(static_cast<uint32_t*>(base))
        , tileOffsets(reinterpret_cast<int64_t*>(
              static_cast<char*>(base) + alignUp(static_cast<size_t>(ceilDiv(rows, 32)) * sizeof(uint32_t))))
        , blockOffsets(tileOffsets + ceilDiv(rows, kMinTileRows))
    {
    }
};

__device__ __forceinline__ int64_t warpInclusiveSum(int64_t v)
{
    int const lane = threadIdx.x % kWarpSize;
#pragma unroll
    for (int offset = 1; offset < kWarpSize; offset <<= 1)
    {
        int64_t const up = __shfl_up_sync(0xffffffffU, v, offset);
        v += lane >= offset ? up : 0;
    }
    return v;
}

// Exclusive prefix sum over the block; `warpTotals` holds one entry per warp; `total` receives the block sum.
template <int BLOCK>
__device__ __forceinline__ int64_t blockExclusiveSum(int64_t v, int64_t* warpTotals, int64_t& total)
{
    constexpr int kBlockWarps = BLOCK / kWarpSize;
    int const lane = threadIdx.x % kWarpSize;
    int const warp = threadIdx.x / kWarpSize;
    int64_t const inclusive = warpInclusiveSum(v);
    __syncthreads(); // readers of a previous call are done with warpTotals
    if (lane == kWarpSize - 1)
    {
        warpTotals[warp] = inclusive;
    }
    __syncthreads();
    int64_t before = 0;
    total = 0;
#pragma unroll
    for (int w = 0; w < kBlockWarps; ++w)
    {
        before += w < warp ? warpTotals[w] : 0;
        total += warpTotals[w];
    }
    return before + inclusive - v;
}

// One block per `tilesPerBlock` tiles. Each lane loads F mask entries at once (16 bytes) and makes F bits of them;
// L neighbouring lanes OR theirs into one 32-row word, which its first lane stores. Word bits are in row order.
// Each tile gets its offset within the block, the block its total.
template <typename M>
__global__ void __launch_bounds__(kBlockThreads)
    maskBitsKernel(M const* __restrict__ mask, int64_t rows, int64_t tileRows, int64_t tilesPerBlock, bool maskAligned,
        uint32_t* __restrict__ words, int64_t* __restrict__ tileOffsets, int64_t* __restrict__ blockTotals)
{
    constexpr int F = kMaskLoadBytes / sizeof(M);
    constexpr int L = kWarpSize / F;
    constexpr int64_t kChunkRows = kWarpSize * F;
    __shared__ unsigned long long tileCounts[kMaxTilesPerCountBlock];
    allowDependents();
    waitForPrerequisites();
    int const lane = threadIdx.x % kWarpSize;
    int const warp = threadIdx.x / kWarpSize;
    if (threadIdx.x < kMaxTilesPerCountBlock)
    {
        tileCounts[threadIdx.x] = 0;
    }
    __syncthreads();
    int64_t const blockBase = static_cast<int64_t>(blockIdx.x) * tilesPerBlock * tileRows;
    int64_t const blockEnd = min(blockBase + tilesPerBlock * tileRows, rows);
    for (int64_t chunkBase = blockBase + warp * kChunkRows; chunkBase < blockEnd; chunkBase += kWarps * kChunkRows)
    {
        int64_t const first = chunkBase + lane * F;
        uint32_t bits = 0;
        if (maskAligned && chunkBase + kChunkRows <= rows)
        {
            Vec<M, F> const flags = *reinterpret_cast<Vec<M, F> const*>(mask + first);
#pragma unroll
            for (int k = 0; k < F; ++k)
            {
                bits |= static_cast<uint32_t>(flags.v[k] != M{0}) << k;
            }
        }
        else
        {
#pragma unroll
            for (int k = 0; k < F; ++k)
            {
                bits |= static_cast<uint32_t>(first + k < rows && mask[first + k] != M{0}) << k;
            }
        }
        uint32_t word = bits << (F * (lane % L));
#pragma unroll
        for (int step = 1; step < L; step <<= 1)
        {
            word |= __shfl_xor_sync(0xffffffffU, word, step);
        }
        // A chunk (at most 512 rows) never straddles a tile (a power of two of at least 512 rows).
        int const tile = static_cast<int>((chunkBase - blockBase) / tileRows);
        unsigned chunkCount = lane % L == 0 && first < rows ? __popc(word) : 0;
#pragma unroll
        for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
        {
            chunkCount += __shfl_xor_sync(0xffffffffU, chunkCount, offset);
        }
        if (lane % L == 0 && first < rows)
        {
            words[first / kWarpSize] = word;
        }
        if (lane == 0 && chunkCount != 0)
        {
            atomicAdd(&tileCounts[tile], static_cast<unsigned long long>(chunkCount));
        }
    }
    __syncthreads();
    if (threadIdx.x == 0)
    {
        int64_t const firstTile = static_cast<int64_t>(blockIdx.x) * tilesPerBlock;
        int64_t const tiles = ceilDiv(blockEnd - blockBase, tileRows);
        int64_t offset = 0;
        for (int64_t t = 0; t < tiles; ++t)
        {
            tileOffsets[firstTile + t] = offset;
            offset += static_cast<int64_t>(tileCounts[t]);
        }
        blockTotals[blockIdx.x] = offset;
    }
}

// One block turns the per-count-block totals into exclusive offsets, in place, and writes their total K.
__global__ void __launch_bounds__(kScanThreads)
    scanTilesKernel(int64_t* tileOffsets, int64_t tiles, void* count, bool count64)
{
    __shared__ int64_t warpTotals[kScanThreads / kWarpSize];
    allowDependents();
    waitForPrerequisites();
    int64_t carry = 0;
    for (int64_t base = 0; base < tiles; base += kScanThreads * kScanItems)
    {
        int64_t const first = base + static_cast<int64_t>(threadIdx.x) * kScanItems;
        int64_t values[kScanItems];
        int64_t sum = 0;
#pragma unroll
        for (int k = 0; k < kScanItems; ++k)
        {
            values[k] = first + k < tiles ? tileOffsets[first + k] : 0;
            sum += values[k];
        }
        int64_t total = 0;
        int64_t offset = carry + blockExclusiveSum<kScanThreads>(sum, warpTotals, total);
#pragma unroll
        for (int k = 0; k < kScanItems; ++k)
        {
            if (first + k < tiles)
            {
                tileOffsets[first + k] = offset;
            }
            offset += values[k];
        }
        carry += total;
    }
    if (threadIdx.x == 0)
    {
        if (count64)
        {
            *static_cast<int64_t*>(count) = carry;
        }
        else
        {
            *static_cast<int32_t*>(count) = static_cast<int32_t>(carry);
        }
    }
}

// Block (tile, split): the tile's words and their prefix popcounts give every kept row its destination;
// groups of `1 << log2Group` threads (at most a warp) copy one row each, chunks [chunkBegin, chunkEnd) of
// it, as V words, several loads in flight per thread (chunks of a long row, or SHORT_ROWS: several rows).
template <typename V, bool SHORT_ROWS, int UNROLL>
__global__ void __launch_bounds__(kBlockThreads) scatterRowsKernel(V const* __restrict__ x, V* __restrict__ y,
    int64_t rows, int64_t tileRows, int64_t tilesPerCountBlock, int64_t chunksPerRow, int64_t chunksPerSplit,
    int64_t rowsPerSplit, int log2Group, uint32_t const* __restrict__ words, int64_t const* __restrict__ tileOffsets,
    int64_t const* __restrict__ blockOffsets)
{
    __shared__ uint32_t tileWords[kMaxTileRows / kWarpSize];
    __shared__ int64_t wordPrefix[kMaxTileRows / kWarpSize];
    __shared__ int64_t warpTotals[kWarps];
    allowDependents();
    waitForPrerequisites();
    int64_t const tileBase = static_cast<int64_t>(blockIdx.x) * tileRows;
    int64_t const rowsHere = min(tileRows, rows - tileBase);
    uint32_t const word = threadIdx.x < ceilDiv(rowsHere, kWarpSize) ? words[tileBase / kWarpSize + threadIdx.x] : 0;
    if (!__syncthreads_or(word != 0))
    {
        return;
    }
    int64_t total = 0;
    wordPrefix[threadIdx.x] = blockExclusiveSum<kBlockThreads>(__popc(word), warpTotals, total);
    tileWords[threadIdx.x] = word;
    __syncthreads();

    int64_t const tileOffset = blockOffsets[blockIdx.x / tilesPerCountBlock] + tileOffsets[blockIdx.x];
    int const groupSize = 1 << log2Group;
    int const groups = kBlockThreads >> log2Group;
    int const lane = static_cast<int>(threadIdx.x) & (groupSize - 1);
    auto destination = [&](int64_t r, int64_t& dst)
    {
        uint32_t const bits = tileWords[r / kWarpSize];
        uint32_t const bit = static_cast<uint32_t>(r % kWarpSize);
        dst = tileOffset + wordPrefix[r / kWarpSize] + __popc(bits & ((1U << bit) - 1U));
        return ((bits >> bit) & 1U) != 0;
    };
    if constexpr (SHORT_ROWS)
    {
        // A row is at most one chunk per lane: UNROLL rows per group in flight instead.
        for (int64_t r0 = threadIdx.x >> log2Group; r0 < rowsHere; r0 += groups * UNROLL)
        {
            V chunk[UNROLL];
            int64_t dst[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
            {
                int64_t const r = r0 + u * groups;
                if (r < rowsHere && lane < chunksPerRow && destination(r, dst[u]))
                {
                    chunk[u] = x[(tileBase + r) * chunksPerRow + lane];
                }
                else
                {
                    dst[u] = -1;
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
            {
                if (dst[u] >= 0)
                {
                    y[dst[u] * chunksPerRow + lane] = chunk[u];
                }
            }
        }
        return;
    }
    int64_t const chunkBegin = static_cast<int64_t>(blockIdx.y) * chunksPerSplit;
    int64_t const chunkEnd = min(chunkBegin + chunksPerSplit, chunksPerRow);
    int64_t const rowEnd = min(static_cast<int64_t>(blockIdx.z + 1) * rowsPerSplit, rowsHere);
    for (int64_t r = blockIdx.z * rowsPerSplit + (threadIdx.x >> log2Group); r < rowEnd; r += groups)
    {
        int64_t dst = 0;
        if (!destination(r, dst))
        {
            continue;
        }
        V const* src = x + (tileBase + r) * chunksPerRow;
        V* out = y + dst * chunksPerRow;
        int64_t c = chunkBegin + lane;
        for (; c + (kCopyUnroll - 1) * groupSize < chunkEnd; c += kCopyUnroll * groupSize)
        {
            V chunk[kCopyUnroll];
#pragma unroll
            for (int u = 0; u < kCopyUnroll; ++u)
            {
                chunk[u] = src[c + u * groupSize];
            }
#pragma unroll
            for (int u = 0; u < kCopyUnroll; ++u)
            {
                out[c + u * groupSize] = chunk[u];
            }
        }
        for (; c < chunkEnd; c += groupSize)
        {
            out[c] = src[c];
        }
    }
}

template <typename M>
cudaError_t launchMaskBits(void const* mask, int64_t rows, int64_t tileRows, int64_t tilesPerBlock, Workspace const& ws,
    int64_t countBlocks, cudaStream_t stream, bool pdl)
{
    return launchKernel(maskBitsKernel<M>, dim3(static_cast<unsigned>(countBlocks)), dim3(kBlockThreads), stream, pdl,
        static_cast<M const*>(mask), rows, tileRows, tilesPerBlock, isAligned(mask, kMaskLoadBytes), ws.words,
        ws.tileOffsets, ws.blockOffsets);
}

template <typename V>
cudaError_t launchScatter(
    void const* x, void* y, int64_t rows, int64_t rowBytes, Workspace const& ws, cudaStream_t stream, bool pdl)
{
    int maxBlocks = 0;
    if (cudaError_t err = maxResidentBlocks(&maxBlocks, kResidentBlocksPerSm); err != cudaSuccess)
    {
        return err;
    }
    int64_t const tileRows = tileRowsFor(rowBytes);
    int64_t const tiles = ceilDiv(rows, tileRows);
    int64_t const chunksPerRow = rowBytes / static_cast<int64_t>(sizeof(V));
    // A warp per long row keeps eight rows of a block in flight at once; short rows share a warp.
    int log2Group = 0;
    while ((1 << log2Group) < kWarpSize && (int64_t{1} << log2Group) < chunksPerRow)
    {
        ++log2Group;
    }
    // Few tiles of long rows: split each row across blocks so that the whole device copies.
    int64_t const minSplitChunks = int64_t{kCopyUnroll} << log2Group;
    int64_t const maxSplits = std::min<int64_t>(ceilDiv(chunksPerRow, minSplitChunks), 65535);
    int64_t const splits = std::max<int64_t>(1, std::min<int64_t>(ceilDiv(2 * int64_t{maxBlocks}, tiles), maxSplits));
    int64_t const chunksPerSplit = ceilDiv(chunksPerRow, splits);
    int64_t const chunkSplits = ceilDiv(chunksPerRow, chunksPerSplit);
    bool const wide = chunksPerRow > (int64_t{1} << log2Group);
    // Wide rows leave few tiles (a tile is at least kMinTileRows rows) and few chunk splits (each keeps a group's
    // unrolled loads in flight): their tiles' rows are split across blocks too, down to one row per group.
    int64_t const groups = kBlockThreads >> log2Group;
    int64_t const maxRowSplits = std::min<int64_t>(ceilDiv(tileRows, groups), 65535);
    int64_t const rowSplits
        = wide ? std::max<int64_t>(
                     1, std::min<int64_t>(ceilDiv(2 * int64_t{maxBlocks}, tiles * chunkSplits), maxRowSplits))
               : 1;
    int64_t const rowsPerSplit = ceilDiv(ceilDiv(tileRows, rowSplits), groups) * groups;
    dim3 const grid(static_cast<unsigned>(tiles), static_cast<unsigned>(chunkSplits),
        static_cast<unsigned>(ceilDiv(tileRows, rowsPerSplit)));
    auto* const kernel = wide            ? scatterRowsKernel<V, false, kCopyUnroll>
                         : log2Group > 0 ? scatterRowsKernel<V, true, kShortRowsUnroll>
                                         : scatterRowsKernel<V, true, kCopyUnroll>;
    return launchKernel(kernel, grid, dim3(kBlockThreads), stream, pdl, static_cast<V const*>(x), static_cast<V*>(y),
        rows, tileRows, tilesPerCountBlock(tileRows), chunksPerRow, chunksPerSplit, rowsPerSplit, log2Group,
        static_cast<uint32_t const*>(ws.words), static_cast<int64_t const*>(ws.tileOffsets),
        static_cast<int64_t const*>(ws.blockOffsets));
}

cudaError_t countImpl(void const* mask, DType maskDType, int64_t rows, int64_t rowBytes, void* workspace, void* count,
    DType countDType, cudaStream_t stream, bool pdl)
{
    if (rows < 0 || rowBytes < 0 || count == nullptr || (countDType != DType::kINT32 && countDType != DType::kINT64)
        || (rows > 0 && (mask == nullptr || workspace == nullptr)))
    {
        return cudaErrorInvalidValue;
    }
    if (rows == 0)
    {
        return cudaMemsetAsync(count, 0, static_cast<size_t>(dtypeSize(countDType)), stream);
    }
    Workspace const ws(workspace, rows);
    int64_t const tileRows = tileRowsFor(rowBytes);
    int64_t const tilesPerBlock = tilesPerCountBlock(tileRows);
    int64_t const countBlocks = ceilDiv(ceilDiv(rows, tileRows), tilesPerBlock);
    cudaError_t err = cudaSuccess;
    switch (maskDType)
    {
    case DType::kBOOL:
    case DType::kINT8:
        err = launchMaskBits<uint8_t>(mask, rows, tileRows, tilesPerBlock, ws, countBlocks, stream, pdl);
        break;
    case DType::kINT32:
        err = launchMaskBits<int32_t>(mask, rows, tileRows, tilesPerBlock, ws, countBlocks, stream, pdl);
        break;
    case DType::kINT64:
        err = launchMaskBits<int64_t>(mask, rows, tileRows, tilesPerBlock, ws, countBlocks, stream, pdl);
        break;
    default: return cudaErrorInvalidValue;
    }
    if (err != cudaSuccess)
    {
        return err;
    }
    return launchKernel(scanTilesKernel, dim3(1), dim3(kScanThreads), stream, pdl, ws.blockOffsets, countBlocks, count,
        countDType == DType::kINT64);
}

cudaError_t scatterImpl(
    void const* x, void* y, int64_t rows, int64_t rowBytes, void const* workspace, cudaStream_t stream, bool pdl)
{
    if (rows < 0 || rowBytes < 0)
    {
        return cudaErrorInvalidValue;
    }
    if (rows == 0 || rowBytes == 0)
    {
        return cudaSuccess;
    }
    if (x == nullptr || workspace == nullptr)
    {
        return cudaErrorInvalidValue;
    }
    Workspace const ws(const_cast<void*>(workspace), rows);
    // The widest word that divides a row and keeps every row of x and y aligned.
    auto fits = [&](int64_t bytes) { return rowBytes % bytes == 0 && isAligned(x, bytes) && isAligned(y, bytes); };
    if (fits(16))
        return launchScatter<uint4>(x, y, rows, rowBytes, ws, stream, pdl);
    if (fits(8))
        return launchScatter<uint2>(x, y, rows, rowBytes, ws, stream, pdl);
    if (fits(4))
        return launchScatter<uint32_t>(x, y, rows, rowBytes, ws, stream, pdl);
    if (fits(2))
        return launchScatter<uint16_t>(x, y, rows, rowBytes, ws, stream, pdl);
    return launchScatter<uint8_t>(x, y, rows, rowBytes, ws, stream, pdl);
}

} // namespace

size_t maskedRowsWorkspaceSize(int64_t rows)
{
    if (rows <= 0)
    {
        return 0;
    }
    return alignUp(static_cast<size_t>(ceilDiv(rows, 32)) * sizeof(uint32_t))
           + 2 * static_cast<size_t>(ceilDiv(rows, kMinTileRows)) * sizeof(int64_t);
}

cudaError_t maskedRowsCount(void const* mask, DType maskDType, int64_t rows, int64_t rowBytes, void* workspace,
    void* count, DType countDType, cudaStream_t stream)
{
    return countImpl(mask, maskDType, rows, rowBytes, workspace, count, countDType, stream, kPdl && pdlSupported());
}

cudaError_t maskedRowsScatter(
    void const* x, void* y, int64_t rows, int64_t rowBytes, void const* workspace, cudaStream_t stream)
{
    return scatterImpl(x, y, rows, rowBytes, workspace, stream, kPdl && pdlSupported());
}

} // namespace ttp
