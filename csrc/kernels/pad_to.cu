#include "pad_to.h"
#include "type_utils.cuh"

#include <cmath>
#include <cstring>
#include <limits>

namespace ttp
{
namespace
{

constexpr int kBlockThreads = 256;
constexpr int kResidentBlocksPerSm = 2048 / kBlockThreads;

// n / d for a run-time invariant d as a multiply-high, an add and a shift (Granlund & Montgomery); n < 2^32.
// An output row index becomes (plane, row in plane) without a 64-bit division per row.
class FastDivmod32
{
public:
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

    __device__ __forceinline__ void divmod(int64_t n, int64_t& quotient, int64_t& remainder) const
    {
        auto const n32 = static_cast<uint32_t>(n);
        auto const q = static_cast<uint32_t>((static_cast<uint64_t>(__umulhi(n32, mMultiplier)) + n32) >> mShift);
        quotient = q;
        remainder = n32 - q * mDivisor;
    }

private:
    uint32_t mDivisor;
    uint32_t mMultiplier{0};
    uint32_t mShift{0};
};

class Divmod64
{
public:
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
    int64_t rows; // planes * outHeight output rows
    int64_t height;
    int64_t width;
    int64_t outWidth;
};

// Groups of `1 << log2Group` threads each write one output row of outWidth elements as VEC-wide stores
// (VEC divides outWidth, so rows start aligned). Rows past `height` are pure fills and read nothing.
// X_VECTORS: width is a multiple of VEC and x is aligned, so a vector is wholly inside or outside the
// input row and is loaded in one piece; otherwise its elements are gathered one by one.
template <typename T, int VEC, bool X_VECTORS, typename Divider>
__global__ void __launch_bounds__(kBlockThreads) padToKernel(
    T const* __restrict__ x, T* __restrict__ y, PadShape shape, Divider rowsPerPlane, int log2Group, T value)
{
    using V = Vec<T, VEC>;
    int const lane = static_cast<int>(threadIdx.x) & ((1 << log2Group) - 1);
    int64_t const groupsPerBlock = kBlockThreads >> log2Group;
    int64_t const chunks = shape.outWidth / VEC;
    V fill;
#pragma unroll
    for (int k = 0; k < VEC; ++k)
    {
        fill.v[k] = value;
    }
    for (int64_t row = blockIdx.x * groupsPerBlock + (threadIdx.x >> log2Group); row < shape.rows;
        row += gridDim.x * groupsPerBlock)
    {
        int64_t plane = 0;
        int64_t h = 0;
        rowsPerPlane.divmod(row, plane, h);
        V* yRow = reinterpret_cast<V*>(y + row * shape.outWidth);
        if (h >= shape.height)
        {
            for (int64_t c = lane; c < chunks; c += (1 << log2Group))
            {
                yRow[c] = fill;
            }
            continue;
        }
        T const* xRow = x + (plane * shape.height + h) * shape.width;
        for (int64_t c = lane; c < chunks; c += (1 << log2Group))
        {
            int64_t const col = c * VEC;
            if constexpr (X_VECTORS)
            {
                yRow[c] = col < shape.width ? reinterpret_cast<V const*>(xRow)[c] : fill;
            }
            else
            {
                V out;
#pragma unroll
                for (int k = 0; k < VEC; ++k)
                {
                    out.v[k] = col + k < shape.width ? xRow[col + k] : value;
                }
                yRow[c] = out;
            }
        }
    }
}

int ceilLog2(int64_t n)
{
    int log2 = 0;
    while ((int64_t{1} << log2) < n)
    {
        ++log2;
    }
    return log2;
}

template <typename T, int VEC, bool X_VECTORS, typename Divider>
cudaError_t launch(T const* x, T* y, PadShape const& shape, Divider const& rowsPerPlane, T value, cudaStream_t stream)
{
    int maxBlocks = 0;
    if (cudaError_t err = maxResidentBlocks(&maxBlocks, kResidentBlocksPerSm); err != cudaSuccess)
    {
        return err;
    }
    // Just enough threads per row to cover it in one pass, up to a whole block for wide rows.
    int const log2Group = std::min(ceilLog2(shape.outWidth / VEC), ceilLog2(kBlockThreads));
    int64_t const groupsPerBlock = kBlockThreads >> log2Group;
    int64_t const blocks = std::min<int64_t>((shape.rows + groupsPerBlock - 1) / groupsPerBlock, maxBlocks);
    padToKernel<T, VEC, X_VECTORS, Divider>
        <<<static_cast<unsigned>(blocks), kBlockThreads, 0, stream>>>(x, y, shape, rowsPerPlane, log2Group, value);
    return cudaGetLastError();
}

template <typename T, int VEC, typename Divider>
cudaError_t launchVec(
    T const* x, T* y, PadShape const& shape, Divider const& rowsPerPlane, T value, cudaStream_t stream)
{
    bool const xVectors = shape.width % VEC == 0 && isAligned(x, sizeof(T) * VEC);
    return xVectors ? launch<T, VEC, true>(x, y, shape, rowsPerPlane, value, stream)
                    : launch<T, VEC, false>(x, y, shape, rowsPerPlane, value, stream);
}

// The widest vector (at most 16 bytes) that divides outWidth and keeps y aligned.
template <typename T, typename Divider>
cudaError_t dispatchVec(
    T const* x, T* y, PadShape const& shape, Divider const& rowsPerPlane, T value, cudaStream_t stream)
{
    constexpr int kMaxVec = 16 / sizeof(T);
    auto fits = [&](int vec) { return shape.outWidth % vec == 0 && isAligned(y, sizeof(T) * vec); };
    if constexpr (kMaxVec >= 16)
    {
        if (fits(16))
            return launchVec<T, 16>(x, y, shape, rowsPerPlane, value, stream);
    }
    if constexpr (kMaxVec >= 8)
    {
        if (fits(8))
            return launchVec<T, 8>(x, y, shape, rowsPerPlane, value, stream);
    }
    if (fits(4))
        return launchVec<T, 4>(x, y, shape, rowsPerPlane, value, stream);
    if (fits(2))
        return launchVec<T, 2>(x, y, shape, rowsPerPlane, value, stream);
    return launchVec<T, 1>(x, y, shape, rowsPerPlane, value, stream);
}

template <typename T>
cudaError_t dispatch(void const* x, void* y, PadShape const& shape, int64_t outHeight, T value, cudaStream_t stream)
{
    auto const* xt = static_cast<T const*>(x);
    auto* yt = static_cast<T*>(y);
    if (shape.rows <= std::numeric_limits<uint32_t>::max())
    {
        return dispatchVec(xt, yt, shape, FastDivmod32(static_cast<uint32_t>(outHeight)), value, stream);
    }
    return dispatchVec(xt, yt, shape, Divmod64(outHeight), value, stream);
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
    PadShape const shape{planes * outHeight, height, width, outWidth};
    switch (dtype)
    {
    case DType::kFLOAT32: return dispatch<uint32_t>(x, y, shape, outHeight, bitsOf<uint32_t>(value), stream);
    case DType::kFLOAT16:
        return dispatch<uint16_t>(x, y, shape, outHeight, bitsOf<uint16_t>(__float2half_rn(value)), stream);
    case DType::kBFLOAT16:
        return dispatch<uint16_t>(x, y, shape, outHeight, bitsOf<uint16_t>(__float2bfloat16_rn(value)), stream);
    case DType::kINT8:
    {
        float const clamped = std::fmin(std::fmax(std::nearbyint(value), -128.F), 127.F);
        return dispatch<uint8_t>(
            x, y, shape, outHeight, bitsOf<uint8_t>(static_cast<int8_t>(std::isnan(value) ? 0.F : clamped)), stream);
    }
    default: return cudaErrorInvalidValue;
    }
}

} // namespace ttp
