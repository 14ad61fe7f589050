#include "pad_to.h"
#include "type_utils.cuh"

#include <cmath>
#include <cstring>
#include <limits>

namespace ttp
{
namespace
{

// Threads a block by element size, from the peer lab on H100 (same buffers, four placements, beside inductor's kernel
// on the same x; docs/results/2026-11-23e/peer_lab_pad16_*.log at bf45c72): wider types take 512 (bf16 224 -> 256, 256
// -> 224 and 512 -> 480x544, fp32 224 -> 256: 0.3-0.7% faster than 256 in both timers, level with or ahead of inductor
// where 256 was up to 0.6% behind; 1024 threads, the coherent load path and a block per group of whole rows were no
// better); int8 keeps 256 (512 with its evict-first loads was 0.7% slower, 2026-11-23d/peer_lab_pad_block_size.log).
template <typename T>
constexpr int kBlockThreads = sizeof(T) == 1 ? 256 : 512;
// Output vectors each thread has in flight: 1 (26 registers, a full SM of threads) beats 2 (44), 4 (80) and 8
// (150) on H100, where occupancy is what keeps loads in flight (kernel lab at bf45c72, int8 224->256: 98.8% of copy vs
// 92%, 80% and 44%).
constexpr int kUnroll = 1;
// Blocks per SM of a persistent grid (0: one pass, a block per kBlockThreads * UNROLL vectors).
constexpr int kPersistentBlocksPerSm = 0;
// L2 priorities by element size (16-byte vectors), from the peer lab on H100, each candidate timed on the same buffers
// at four to six placements in memory (placement moved a kernel's time by more than the candidates differ), median
// speed ratios: int8 reads x evict-first (against default loads and y written evict-first: 512x256x256 -> 224x224
// 1.075 in the graph timer and 1.018 with L2 flushed, 224 -> 256 1.008 / 1.014); wider types use the default
// priorities (bf16, against y written evict-first: 224 -> 256 1.006 / 1.005, crop 1.000 / 1.000, 512 -> 480x544
// 1.003 / 1.004; reading x evict-first instead lost 1.8% on the crop in the graph timer).
template <typename T>
constexpr CachePolicy kLoadPolicy = sizeof(T) == 1 ? CachePolicy::kEVICT_FIRST : CachePolicy::kDEFAULT;

// n / d for a run-time invariant d as a multiply-high, an add and a shift (Granlund & Montgomery); n < 2^32.
// An output vector's index becomes (row, column) and (plane, row in plane) without 64-bit divisions.
class FastDivmod32
{
public:
    using Index = uint32_t;

    explicit FastDivmod32(uint32_t divisor)
        : mDivisor(divisor)
    {
        while (mShift < 32 && (uint64_t{1} << mShift) < divisor)
        {
            ++mShift;
        }
        uint64_t const magic = ((uint64_t{1} << 32) * ((uint64_t{1} << mShift) - divisor)) / divisor + 1;
        mMultiplier = static_cast<uint32_t>(magic);
    }

    __device__ __forceinline__ void divmod(uint32_t n, uint32_t& quotient, uint32_t& remainder) const
    {
        quotient = static_cast<uint32_t>((static_cast<uint64_t>(__umulhi(n, mMultiplier)) + n) >> mShift);
        remainder = n - quotient * mDivisor;
    }

private:
    uint32_t mDivisor;
    uint32_t mMultiplier{0};
    uint32_t mShift{0};
};

class Divmod64
{
public:
    using Index = int64_t;

    explicit Divmod64(int64_t divisor)
        : mDivisor(divisor)
    {
    }

    __device__ __forceinline__ void divmod(int64_t n, int64_t& quotient, int64_t& remainder) const
    {
        quotient = n / mDivisor;
        remainder = n - quotient * mDivisor;
    }

private:
    int64_t mDivisor;
};

struct PadShape
{
    int64_t chunks; // output vectors: planes * outHeight * outWidth / VEC
    int64_t height;
    int64_t width;
};

// Output vectors in flat order, kUnroll of them per thread in flight (all loads before any store); each is
// VEC elements of one output row (VEC divides outWidth). Its (row, column) and (plane, row in plane) come
// from two divisions by invariants. Rows past `height` and columns past `width` are fills and read nothing.
// X_VECTORS: width is a multiple of VEC and x is aligned, so a vector is wholly inside or outside the
// input row and is loaded in one piece; otherwise its elements are gathered one by one.
template <typename T, int VEC, bool X_VECTORS, typename Divider, int UNROLL, CachePolicy LOAD, CachePolicy STORE,
    int BLOCK>
__global__ void __launch_bounds__(BLOCK) padToKernel(
    T const* __restrict__ x, T* __restrict__ y, PadShape shape, Divider chunksPerRow, Divider rowsPerPlane, T value)
{
    // Index math in 32 bits where the output has fewer than 2^32 vectors (FastDivmod32): fewer registers, so
    // more threads (and loads) in flight per SM; only the input offset is 64-bit.
    using Index = typename Divider::Index;
    using V = Vec<T, VEC>;
    V fill;
#pragma unroll
    for (int k = 0; k < VEC; ++k)
    {
        fill.v[k] = value;
    }
    V* yv = reinterpret_cast<V*>(y);
    auto const chunks = static_cast<Index>(shape.chunks);
    auto const height = static_cast<Index>(shape.height);
    auto const width = static_cast<Index>(shape.width);
    Index const stride = static_cast<Index>(gridDim.x) * BLOCK * UNROLL;
    for (Index base = static_cast<Index>(blockIdx.x) * BLOCK * UNROLL + threadIdx.x; base < chunks; base += stride)
    {
        V out[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
        {
            Index const i = base + u * BLOCK;
            out[u] = fill;
            if (i >= chunks)
            {
                continue;
            }
            Index row = 0;
            Index c = 0;
            Index plane = 0;
            Index h = 0;
            chunksPerRow.divmod(i, row, c);
            rowsPerPlane.divmod(row, plane, h);
            Index const col = c * VEC;
            if (h >= height || col >= width)
            {
                continue;
            }
            T const* xRow = x + (static_cast<int64_t>(plane) * shape.height + h) * shape.width;
            if constexpr (X_VECTORS)
            {
                out[u] = loadVec<LOAD>(reinterpret_cast<V const*>(xRow + col));
            }
            else
            {
#pragma unroll
                for (int k = 0; k < VEC; ++k)
                {
                    if (col + k < width)
                    {
                        out[u].v[k] = xRow[col + k];
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
        {
            Index const i = base + u * BLOCK;
            if (i < chunks)
            {
                storeVec<STORE>(yv + i, out[u]);
            }
        }
    }
}

template <typename T, int VEC, bool X_VECTORS, typename Divider, int UNROLL = kUnroll,
    int BLOCKS_PER_SM = kPersistentBlocksPerSm, CachePolicy LOAD = kLoadPolicy<T>,
    CachePolicy STORE = CachePolicy::kDEFAULT, int BLOCK = kBlockThreads<T>>
cudaError_t launch(T const* x, T* y, PadShape const& shape, Divider const& chunksPerRow, Divider const& rowsPerPlane,
    T value, cudaStream_t stream)
{
    // One pass over the output, no cap below the hardware's: the block scheduler balances the tail better
    // than a grid-stride loop over a device-sized grid (as measured for rms_norm on H100).
    int64_t const perBlock = int64_t{BLOCK} * UNROLL;
    int64_t blocks = std::min<int64_t>((shape.chunks + perBlock - 1) / perBlock, int64_t{0x7fffffff});
    if constexpr (BLOCKS_PER_SM > 0)
    {
        int resident = 0;
        if (cudaError_t err = maxResidentBlocks(&resident, BLOCKS_PER_SM); err != cudaSuccess)
        {
            return err;
        }
        blocks = std::min<int64_t>(blocks, resident);
    }
    padToKernel<T, VEC, X_VECTORS, Divider, UNROLL, LOAD, STORE, BLOCK>
        <<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(x, y, shape, chunksPerRow, rowsPerPlane, value);
    return cudaGetLastError();
}

struct PadArgs
{
    int64_t planes;
    int64_t height;
    int64_t width;
    int64_t outHeight;
    int64_t outWidth;
};

template <typename T, int VEC>
cudaError_t launchVec(T const* x, T* y, PadArgs const& a, T value, cudaStream_t stream)
{
    PadShape const shape{a.planes * a.outHeight * (a.outWidth / VEC), a.height, a.width};
    bool const xVectors = a.width % VEC == 0 && isAligned(x, sizeof(T) * VEC);
    if (shape.chunks <= std::numeric_limits<int32_t>::max())
    {
        FastDivmod32 const chunksPerRow(static_cast<uint32_t>(a.outWidth / VEC));
        FastDivmod32 const rowsPerPlane(static_cast<uint32_t>(a.outHeight));
        return xVectors ? launch<T, VEC, true>(x, y, shape, chunksPerRow, rowsPerPlane, value, stream)
                        : launch<T, VEC, false>(x, y, shape, chunksPerRow, rowsPerPlane, value, stream);
    }
    Divmod64 const chunksPerRow(a.outWidth / VEC);
    Divmod64 const rowsPerPlane(a.outHeight);
    return xVectors ? launch<T, VEC, true>(x, y, shape, chunksPerRow, rowsPerPlane, value, stream)
                    : launch<T, VEC, false>(x, y, shape, chunksPerRow, rowsPerPlane, value, stream);
}

// The widest vector (at most 16 bytes) that divides outWidth and keeps y aligned.
template <typename T>
cudaError_t dispatch(void const* x, void* y, PadArgs const& a, T value, cudaStream_t stream)
{
    constexpr int kMaxVec = 16 / sizeof(T);
    auto const* xt = static_cast<T const*>(x);
    auto* yt = static_cast<T*>(y);
    auto fits = [&](int vec) { return a.outWidth % vec == 0 && isAligned(y, sizeof(T) * vec); };
    if constexpr (kMaxVec >= 16)
    {
        if (fits(16))
            return launchVec<T, 16>(xt, yt, a, value, stream);
    }
    if constexpr (kMaxVec >= 8)
    {
        if (fits(8))
            return launchVec<T, 8>(xt, yt, a, value, stream);
    }
    if (fits(4))
        return launchVec<T, 4>(xt, yt, a, value, stream);
    if (fits(2))
        return launchVec<T, 2>(xt, yt, a, value, stream);
    return launchVec<T, 1>(xt, yt, a, value, stream);
}

// The kernels only move bits: every dtype of one size shares them, `value` arrives as that dtype's bits.
template <typename Bits, typename T>
Bits bitsOf(T v)
{
    static_assert(sizeof(Bits) == sizeof(T));
    Bits bits;
    std::memcpy(&bits, &v, sizeof(bits));
    return bits;
}

} // namespace

cudaError_t padTo(void const* x, void* y, int64_t planes, int64_t height, int64_t width, int64_t outHeight,
    int64_t outWidth, float value, DType dtype, cudaStream_t stream)
{
    if (planes < 0 || height < 0 || width < 0 || outHeight < 0 || outWidth < 0)
    {
        return cudaErrorInvalidValue;
    }
    if (planes == 0 || outHeight == 0 || outWidth == 0)
    {
        return cudaSuccess;
    }
    if (y == nullptr || (x == nullptr && height > 0 && width > 0))
    {
        return cudaErrorInvalidValue;
    }
    PadArgs const args{planes, height, width, outHeight, outWidth};
    switch (dtype)
    {
    case DType::kFLOAT32: return dispatch<uint32_t>(x, y, args, bitsOf<uint32_t>(value), stream);
    case DType::kFLOAT16: return dispatch<uint16_t>(x, y, args, bitsOf<uint16_t>(__float2half_rn(value)), stream);
    case DType::kBFLOAT16: return dispatch<uint16_t>(x, y, args, bitsOf<uint16_t>(__float2bfloat16_rn(value)), stream);
    case DType::kINT8:
    {
        float const clamped = std::fmin(std::fmax(std::nearbyint(value), -128.F), 127.F);
        return dispatch<uint8_t>(
            x, y, args, bitsOf<uint8_t>(static_cast<int8_t>(std::isnan(value) ? 0.F : clamped)), stream);
    }
    default: return cudaErrorInvalidValue;
    }
}

} // namespace ttp
