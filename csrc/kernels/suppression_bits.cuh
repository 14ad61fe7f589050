// The bitmask method of greedy non-maximum suppression, shared by torchvision::nms (nms.cu) and
// torchtrt::efficient_nms (efficient_nms.cu): boxes sorted by score, one bit per (suppressing box, suppressed box)
// pair, 64 boxes to a word; a greedy walk decides 64 boxes per step from the words of the boxes already kept.
#pragma once

#include <cstdint>

namespace ttp::suppression
{

constexpr int64_t kBOXES_PER_WORD = 64;

__host__ __device__ inline int64_t wordCount(int64_t n)
{
    return (n + kBOXES_PER_WORD - 1) / kBOXES_PER_WORD;
}

// Pair p of 64-box blocks along the upper triangle (row block <= column block), numbered column by column: column
// block c holds pairs c (c + 1) / 2 .. c (c + 1) / 2 + c. The square root's rounding is corrected both ways.
__device__ inline void trianglePair(int64_t pair, int64_t& rowBlock, int64_t& colBlock)
{
    colBlock = static_cast<int64_t>((sqrt(8.0 * static_cast<double>(pair) + 1.0) - 1.0) / 2.0);
    while (colBlock * (colBlock + 1) / 2 > pair)
    {
        --colBlock;
    }
    while ((colBlock + 1) * (colBlock + 2) / 2 <= pair)
    {
        ++colBlock;
    }
    rowBlock = pair - colBlock * (colBlock + 1) / 2;
}

__device__ inline uint64_t warpOr(uint64_t value)
{
#if __CUDA_ARCH__ >= 800
    auto const low = __reduce_or_sync(0xffffffffU, static_cast<unsigned>(value));
    auto const high = __reduce_or_sync(0xffffffffU, static_cast<unsigned>(value >> 32));
    return (uint64_t{high} << 32) | low;
#else
    for (int offset = 16; offset > 0; offset /= 2)
    {
        value |= __shfl_xor_sync(0xffffffffU, value, offset);
    }
    return value;
#endif
}

// The two words of a 64-box block held by one lane: boxes lane and lane + 32.
__device__ inline uint64_t laneSelect(uint64_t bits, unsigned lane, uint64_t low, uint64_t high)
{
    return (((bits >> lane) & 1U) != 0 ? low : 0) | (((bits >> (lane + 32)) & 1U) != 0 ? high : 0);
}

// One warp decides a 64-box block in registers: `removed` holds the bits earlier kept boxes set in it; lane j holds
// the block's own (diagonal) words of its boxes j (diagLow) and j + 32 (diagHigh). Returns the block's removed bits,
// the same in every lane; a box is kept when its bit is clear.
__device__ inline uint64_t decideBlock(uint64_t removed, uint64_t diagLow, uint64_t diagHigh)
{
    uint64_t current = removed;
#pragma unroll
    for (int j = 0; j < 32; ++j)
    {
        uint64_t const suppressed = __shfl_sync(0xffffffffU, diagLow, j);
        if (((current >> j) & 1U) == 0)
        {
            current |= suppressed;
        }
    }
#pragma unroll
    for (int j = 0; j < 32; ++j)
    {
        uint64_t const suppressed = __shfl_sync(0xffffffffU, diagHigh, j);
        if (((current >> (j + 32)) & 1U) == 0)
        {
            current |= suppressed;
        }
    }
    return current;
}

} // namespace ttp::suppression
